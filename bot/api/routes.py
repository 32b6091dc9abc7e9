"""The API's routes over the deployment's Bots: ``GET /v1/models`` and ``POST /v1/chat/completions`` (JSON or SSE)."""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from bot.api.assets import absolute_base
from bot.api.auth import TokenGuard
from bot.api.protocol import (
    DONE,
    MODEL,
    NO_CONVERSATION,
    APIError,
    Reply,
    TextDelta,
    kb_model_id,
    model_card,
    model_ids,
    model_list,
    parse_chat_request,
    parse_messages_request,
    sse,
)
from bot.chat.answer import Answer
from bot.config.settings import DEFAULT_KB, Settings
from bot.deployment import Deployment
from bot.errors import BotError
from bot.handoff.tickets import Conversation
from bot.knowledge_base import KnowledgeBase
from bot.serving.bodies import read_capped
from bot.serving.ratelimit import chat_per_minute, rate_limiter
from bot.texts import INTERNAL_ERROR, RATE_LIMITED

log = logging.getLogger(__name__)

# A request body larger than this is refused before it is parsed (the question itself is cut much earlier, at
# limits.max_message_chars, by the Bot; the history is clipped to prompt.max_history_turns).
MAX_BODY_BYTES = 1 << 20
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def error_response(err: APIError) -> JSONResponse:
    """The OpenAI-style JSON response of an APIError."""
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def bot_failure(exc: Exception) -> APIError:
    """A 500 for an error inside the bot: its own errors say what to fix, anything else is logged, not shown."""
    if isinstance(exc, BotError):
        return APIError(500, f"出错了 / Error: {exc}", type="server_error", code="kbbot_error")
    log.error("API chat turn failed", exc_info=exc)
    return APIError(500, INTERNAL_ERROR, type="server_error", code="internal_error")


def openai_errors(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a route so every APIError it raises becomes an OpenAI-style JSON error."""

    async def route(request: Request) -> Response:
        try:
            return await handler(request)
        except APIError as err:
            return error_response(err)

    route.__name__ = handler.__name__
    route.__doc__ = handler.__doc__
    return route


class ChatAPI:
    """The OpenAI-compatible API over the knowledge bases of a deployment (the model picks one and a mode):
    bearer-token auth, the chat's rate and length limits.

    A turn's blocking work (retrieval, the LLM) runs in the threadpool, one step of a stream at a time, so the
    event loop keeps serving other clients and the browser app.
    """

    def __init__(self, served: KnowledgeBase | Deployment, settings: Settings):
        self.deployment = served if isinstance(served, Deployment) else Deployment(settings, ready={DEFAULT_KB: served})
        self.kb = self.deployment.knowledge_base()  # the default one
        self.settings = settings
        self.guard = TokenGuard.from_settings(settings)
        self.limiter = rate_limiter(settings, "api-chat", chat_per_minute(settings))
        self.created = int(time.time())  # the models' "created": when this API started
        if settings.api.require_token and self.guard.expected() is None:
            log.warning("API at /v1 refuses every call until %s is set in the environment", settings.api.token_env)

    def router(self) -> APIRouter:
        """The routes, under ``/v1``."""
        router = APIRouter(prefix="/v1")
        router.add_api_route("/models", openai_errors(self.models), methods=["GET"], include_in_schema=False)
        router.add_api_route(
            "/models/{model_id:path}", openai_errors(self.model), methods=["GET"], include_in_schema=False
        )
        router.add_api_route("/chat/completions", openai_errors(self.chat), methods=["POST"], include_in_schema=False)
        router.add_api_route(
            "/handoff/messages", openai_errors(self.handoff_messages), methods=["POST"], include_in_schema=False
        )
        return router

    # -- helpers --------------------------------------------------------------
    def authorize(self, request: Request) -> str:
        """The client's rate-limit key (its token's hash, or its address when the API is open); raises 401."""
        address = request.client.host if request.client else "unknown"
        key = self.guard.check(request.headers.get("authorization"), address)
        return key or f"addr:{address}"

    def target(self, model: str) -> tuple[KnowledgeBase, str]:
        """The knowledge base and retrieval mode a model name selects: ``kbbot`` / ``kbbot-<mode>`` the default one,
        ``kbbot/<kb>`` or ``<kb>`` another one in its configured mode; 404 naming the models when unknown."""
        status = self.kb.bot.status()
        ids = model_ids(list(status.modes))
        if model in ids:
            return self.kb, ids[model] or status.configured
        name = model.removeprefix(f"{MODEL}/")
        if name in self.deployment.names:
            kb = self.deployment.knowledge_base(name)
            return kb, kb.bot.status().configured
        known = [*ids, *(kb_model_id(n) for n in self.deployment.names[1:])]
        raise APIError(
            404,
            f"没有这个模型 / The model {model!r} does not exist; use one of: {', '.join(known)}",
            param="model",
            code="model_not_found",
        )

    def models_body(self) -> dict[str, Any]:
        """The model list: the default knowledge base's ids, then ``kbbot/<kb>`` for each other one."""
        status = self.kb.bot.status()
        body = model_list(status.modes, status.configured, self.created)
        for name in self.deployment.names[1:]:
            mode = self.deployment.knowledge_base(name).bot.status().configured
            body["data"].append(model_card(kb_model_id(name), mode, self.created, name))
        return body

    @staticmethod
    async def read_body(request: Request) -> bytes:
        """The request body, refused with 413 beyond MAX_BODY_BYTES without reading it all."""
        too_large = APIError(
            413, f"请求体过大 / The request body exceeds {MAX_BODY_BYTES} bytes", code="request_too_large"
        )
        body = await read_capped(request, MAX_BODY_BYTES)
        if body is None:
            raise too_large
        return body

    # -- routes ---------------------------------------------------------------
    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: ``kbbot`` (the configured mode), ``kbbot-<mode>`` for each retrieval mode, and
        ``kbbot/<kb>`` for each other knowledge base."""
        self.authorize(request)
        return JSONResponse(await run_in_threadpool(self.models_body))

    async def model(self, request: Request) -> Response:
        """``GET /v1/models/{model}``: one model, or 404."""
        self.authorize(request)
        model_id = request.path_params["model_id"]
        kb, mode = await run_in_threadpool(self.target, model_id)
        return JSONResponse(model_card(model_id, mode, self.created, kb.name))

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: the bot's answer as a ``chat.completion``, or SSE chunks with ``stream``."""
        key = self.authorize(request)
        req = parse_chat_request(await self.read_body(request))
        kb, mode = await run_in_threadpool(self.target, req.model)
        if not self.limiter.allow(key):
            raise APIError(429, RATE_LIMITED, code="rate_limit_exceeded")
        # A client that sent no conversation gets a fresh one: should this turn hand off, its secret comes back in
        # kbbot.handoff and later requests send it (the API keeps no state of its own).
        conversation = Conversation("api", req.conversation or secrets.token_urlsafe(24))
        session = conversation.id if req.conversation else None
        public = self.settings.knowledge.assets.public_url
        assets = absolute_base(kb.name, public, str(request.base_url))
        reply = Reply(model=req.model, conversation=conversation.secret, assets=assets)
        if not req.stream:
            try:
                answer = await run_in_threadpool(
                    functools.partial(
                        kb.ask,
                        req.question,
                        req.history,
                        mode=mode,
                        source="api",
                        within=req.within,
                        session=session,
                        conversation=conversation,
                    )
                )
            except Exception as exc:
                raise bot_failure(exc) from None
            return JSONResponse(reply.completion(answer))
        snapshots = kb.turn(
            req.question,
            req.history,
            mode=mode,
            source="api",
            within=req.within,
            session=session,
            conversation=conversation,
        )  # logged
        # The first snapshot comes after retrieval: most failures surface here, still as a proper HTTP status.
        try:
            first = await run_in_threadpool(next, snapshots, None)
        except Exception as exc:
            raise bot_failure(exc) from None
        if first is None:
            raise bot_failure(RuntimeError("the bot yielded no answer"))
        return StreamingResponse(
            self.events(reply, first, snapshots), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def handoff_messages(self, request: Request) -> Response:
        """``POST /v1/handoff/messages`` ``{"conversation", "after"}``: a person's replies and the desk's notices
        after message ``after``, and the ticket's status; 404 for a conversation without a hand-off (or guessed)."""
        self.authorize(request)
        conversation, after = parse_messages_request(await self.read_body(request))
        for name in self.deployment.names:
            desk = self.deployment.knowledge_base(name).desk
            if desk is None:
                continue
            try:
                updates = await run_in_threadpool(desk.updates, Conversation("api", conversation), after)
            except BotError as exc:
                raise bot_failure(exc) from None
            if updates.status is not None:
                return JSONResponse(updates.to_dict())
        raise APIError(404, NO_CONVERSATION, param="conversation", code="conversation_not_found")

    async def events(self, reply: Reply, answer: Answer, snapshots: Iterator[Answer]) -> AsyncIterator[str]:
        """SSE events of one answer: the role, content deltas, a final chunk with ``finish_reason`` and ``kbbot``."""
        delta = TextDelta()
        yield sse(reply.chunk({"role": "assistant", "content": ""}))
        try:
            while True:
                piece = delta(answer.text)
                if piece:
                    yield sse(reply.chunk({"content": piece}))
                if answer.finished:
                    yield sse(reply.chunk({}, "stop", answer))
                    break
                following = await run_in_threadpool(next, snapshots, None)
                if following is None:  # a stream should end with finished=True; do not leave the client hanging
                    yield sse(reply.chunk({}, "stop", answer))
                    break
                answer = following
        except Exception as exc:
            yield sse(bot_failure(exc).body())
        finally:
            _close(snapshots)
        yield DONE


def _close(snapshots: Iterator[Any]) -> None:
    """Stop the Bot's generator (e.g. the client went away), unless a worker thread is still inside it."""
    close = getattr(snapshots, "close", None)
    if close is not None:
        try:
            close()
        except ValueError:  # "generator already executing": it finishes on its own thread and is collected
            pass
