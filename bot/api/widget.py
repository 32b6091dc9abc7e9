"""The embeddable chat widget: ``/widget.js`` puts a chat bubble on any page that loads it with
``<script src="https://kb.example.org/widget.js" data-token="…"></script>``, and talks to ``/widget/chat``.

The widget's requests come from other sites, so ``/widget/chat`` answers only browsers on an allowed origin
(``widget.allowed_origins``, plus the app's own origin for its demo page: the address the connection came in on,
not the Host header a client picks); any other ``Origin`` (or none) gets 403
without the bot being asked (with CORS headers, so the widget can show why). The widget token names the widget (401 when wrong), and each session and each
client address per day have their own limits (429). Replies are plain JSON: the answer's Markdown (``reply``) and
the same as HTML sanitised by an allow-list (``html``: pictures only from this app's assets, links in a new tab), the
ladder's decision, its options as buttons, sources only when ``widget.show_sources``. Conversations are stateless
like the API's: the script sends the history, and a reply to a clarify or confirm question is read from it.
"""

from __future__ import annotations

import functools
import html
import ipaddress
import json
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.requests import Request  # at run time: FastAPI reads the handlers' annotations
from starlette.responses import Response

from bot.api.assets import asset_base
from bot.api.widget_feedback import feedback_offer, parse_rating, store_rating
from bot.handoff.tickets import Conversation, Updates
from bot.knowledge.markup import safe_html
from bot.messages import Message, said
from bot.serving.bodies import read_capped
from bot.serving.ratelimit import RateLimiter, chat_per_minute, rate_limiter
from bot.texts import (
    BAD_REQUEST,
    BAD_TOKEN,
    DAY_FULL,
    FOREIGN,
    NO_SUCH_TURN,
    NOT_STORED,
    SESSION_FULL,
    THANKS,
    TOO_FAST,
    TOO_MANY,
)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

DAY = 86_400.0
MAX_BODY_BYTES = 64_000
MAX_HISTORY = 20  # messages of history a widget request may carry
POLLS_PER_MINUTE = 120  # per client address: a page polls every 3 s, a few tabs or visitors behind one NAT more
RATINGS_PER_MINUTE = 30  # ratings and welcome cards per client address (a welcome card per opened widget)


def widget_script() -> str:
    """The widget's JavaScript (bot/api/static/widget.js)."""
    return resources.files("bot.api").joinpath("static/widget.js").read_text(encoding="utf-8")


class WidgetAPI:
    """``/widget.js``, ``/widget/chat`` (CORS, token, limits) and ``/widget/demo`` for one knowledge base."""

    def __init__(self, kb: KnowledgeBase, settings: Settings):
        self.kb = kb
        self.settings = settings.widget
        self.allowed = set(self.settings.allowed_origins)
        self.per_session = rate_limiter(settings, "widget-session", self.settings.max_messages_per_session, DAY)
        self.per_day = rate_limiter(settings, "widget-day", self.settings.max_messages_per_day, DAY)
        self.per_minute = rate_limiter(settings, "widget-chat", chat_per_minute(settings))
        # a page polls for a person's replies every few seconds while a hand-off runs
        self.per_poll = rate_limiter(settings, "widget-poll", POLLS_PER_MINUTE)
        self.per_rating = rate_limiter(settings, "widget-feedback", RATINGS_PER_MINUTE)
        self.feedback_settings = settings.feedback
        self.per_typeahead = rate_limiter(settings, "widget-typeahead", settings.limits.typeahead_per_minute)
        if self.settings.token() is None:
            log.warning("the chat widget refuses every message until %s is set", self.settings.token_env)

    def router(self) -> APIRouter:
        """The widget's routes."""
        from fastapi import APIRouter

        router = APIRouter()
        router.add_api_route("/widget.js", self.script, methods=["GET"], include_in_schema=False)
        router.add_api_route("/widget/chat", self.chat, methods=["POST", "OPTIONS"], include_in_schema=False)
        router.add_api_route("/widget/messages", self.messages, methods=["POST", "OPTIONS"], include_in_schema=False)
        router.add_api_route("/widget/welcome", self.welcome, methods=["POST", "OPTIONS"], include_in_schema=False)
        router.add_api_route("/widget/feedback", self.feedback, methods=["POST", "OPTIONS"], include_in_schema=False)
        router.add_api_route("/widget/typeahead", self.typeahead, methods=["POST", "OPTIONS"], include_in_schema=False)
        router.add_api_route("/widget/demo", self.demo, methods=["GET"], include_in_schema=False)
        return router

    # -- origins ---------------------------------------------------------------
    def origin_allowed(self, request: Request, origin: str) -> bool:
        """True when ``origin`` may use the widget: an allowed origin, or this app's own (its demo page)."""
        return origin in self.allowed or origin in own_origins(request)

    @staticmethod
    def cors(origin: str) -> dict[str, str]:
        """The CORS headers that let ``origin`` read the reply (and send its JSON)."""
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        }

    # -- routes ----------------------------------------------------------------
    async def script(self, request: Request) -> Response:
        """The widget's script; any page may load it (it is useless where the origin is not allowed)."""
        from starlette.responses import Response

        return Response(
            widget_script(), media_type="text/javascript; charset=utf-8", headers={"Cache-Control": "max-age=300"}
        )

    async def demo(self, request: Request) -> Response:
        """A page of this app showing the widget as a visitor sees it (the app's own origin is always allowed)."""
        from starlette.responses import HTMLResponse

        token = html.escape(self.settings.token() or "", quote=True)
        return HTMLResponse(
            "<!doctype html><html lang='zh'><meta charset='utf-8'><title>kbbot widget demo</title>"
            "<body style='font-family:sans-serif;max-width:40em;margin:3em auto'>"
            "<h1>聊天窗口演示 / Widget demo</h1><p>右下角的按钮打开聊天窗口。/ The button at the bottom right opens"
            ' the chat.</p><pre>&lt;script src="…/widget.js" data-token="…"&gt;&lt;/script&gt;</pre>'
            f'<script src="/widget.js" data-token="{token}"></script></body></html>'
        )

    async def _checked(self, request: Request) -> tuple[dict[str, str], bytes] | Response:
        """(CORS headers, body) of a request from an allowed origin, or the refusal (403 foreign, 204 preflight)."""
        from starlette.responses import JSONResponse, Response

        origin = request.headers.get("origin")
        if not origin:  # not a browser on some page: nothing to answer
            return JSONResponse({"error": FOREIGN}, status_code=403)
        # Every page may ask (and read the refusal: a deployer sees why the widget is silent); only an allowed
        # origin gets an answer.
        headers = self.cors(origin)
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=headers)
        if not self.origin_allowed(request, origin):
            log.info("widget message from a foreign origin %s refused", origin[:200])
            return JSONResponse({"error": FOREIGN}, status_code=403, headers=headers)
        body = await read_capped(request, MAX_BODY_BYTES)  # the rest of a larger body is never read
        if body is None:
            too_large = f"{BAD_REQUEST}: body over {MAX_BODY_BYTES} bytes"
            return JSONResponse({"error": too_large}, status_code=413, headers=headers)
        return headers, body

    async def chat(self, request: Request) -> Response:
        """One message from a widget: the bot's reply as JSON, for an allowed origin with the right token."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        checked = await self._checked(request)
        if isinstance(checked, Response):
            return checked
        headers, body = checked
        try:
            message, history, session, token = parse_widget_request(body)
        except ValueError as exc:
            return JSONResponse({"error": f"{BAD_REQUEST}: {exc}"}, status_code=400, headers=headers)
        expected = self.settings.token()
        if expected is None or token != expected:
            return JSONResponse({"error": BAD_TOKEN}, status_code=401, headers=headers)
        address = request.client.host if request.client else "unknown"
        refused = self.refused(session, address)
        if refused:
            return JSONResponse({"error": refused}, status_code=429, headers=headers)
        # The session is random in the visitor's browser (96 bits): it is the conversation's secret, too.
        conversation = Conversation("widget", session, session=session)
        answer = await run_in_threadpool(
            functools.partial(
                self.kb.ask, message, history, session=session, source="widget", conversation=conversation
            )
        )
        reply: dict[str, Any] = {
            "reply": answer.text,
            "html": safe_html(answer.text, asset_base(self.kb.name)),  # the script makes its paths absolute
            "decision": answer.decision.value,
            "options": [o.to_dict() for o in answer.options],
            "notice": answer.notice,
            "handoff": answer.handoff.to_dict() if answer.handoff else None,
            "related": [o.to_dict() for o in answer.related],
            "feedback": feedback_offer(answer, self.feedback_settings),
        }
        if self.settings.show_sources:
            reply["sources"] = [{"id": h.entry.id, "query": h.entry.query} for h in answer.hits]
        return JSONResponse(reply, headers=headers)

    async def messages(self, request: Request) -> Response:
        """A person's replies and the desk's notices for the widget's conversation after message ``after``: JSON
        ``{"status", "ticket", "messages": [{id, role, author, text, time}]}`` (status null: no hand-off)."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        checked = await self._authorized(request, self.per_poll, "widget-poll")
        if isinstance(checked, Response):
            return checked
        headers, data = checked
        try:
            session, after = parse_messages_request(data)
        except ValueError as exc:
            return JSONResponse({"error": f"{BAD_REQUEST}: {exc}"}, status_code=400, headers=headers)
        desk = self.kb.desk
        if desk is None:
            return JSONResponse(Updates(None).to_dict(), headers=headers)
        updates = await run_in_threadpool(desk.updates, Conversation("widget", session), after)
        return JSONResponse(updates.to_dict(), headers=headers)

    async def welcome(self, request: Request) -> Response:
        """The welcome card's questions (JSON ``{"questions": [...]}``), for an allowed origin with the token."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        checked = await self._authorized(request, self.per_rating, "widget-welcome")
        if isinstance(checked, Response):
            return checked
        headers, _ = checked
        questions = await run_in_threadpool(self.kb.welcome_questions)
        return JSONResponse({"questions": questions}, headers=headers)

    async def feedback(self, request: Request) -> Response:
        """A 👍 / 👎 (with a fixed reason and text) or a "was this solved?" reply on the widget's own turn."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        checked = await self._authorized(request, self.per_rating, "widget-feedback")
        if isinstance(checked, Response):
            return checked
        headers, data = checked
        try:
            rating = parse_rating(data, *_session_and_token(data))
        except ValueError as exc:
            return JSONResponse({"error": f"{BAD_REQUEST}: {exc}"}, status_code=400, headers=headers)
        stored = await run_in_threadpool(store_rating, self.kb.recorder, rating)
        if stored is None:
            return JSONResponse({"error": NO_SUCH_TURN}, status_code=404, headers=headers)
        if not stored:
            return JSONResponse({"error": NOT_STORED}, status_code=503, headers=headers)
        return JSONResponse({"stored": True, "message": THANKS}, headers=headers)

    async def typeahead(self, request: Request) -> Response:
        """The questions to offer for what the visitor is typing: JSON ``{"suggestions": [{question, entry}]}``
        (empty for fewer than ``typeahead.min_chars`` characters, more than ``typeahead.max_chars``, or when off)."""
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        checked = await self._authorized(request, self.per_typeahead, "widget-typeahead", too_many=TOO_MANY)
        if isinstance(checked, Response):
            return checked
        headers, data = checked
        try:
            text = parse_typeahead_request(data)
        except ValueError as exc:
            return JSONResponse({"error": f"{BAD_REQUEST}: {exc}"}, status_code=400, headers=headers)
        typeahead = self.kb.typeahead
        found = await run_in_threadpool(typeahead.suggest, text) if typeahead is not None else []
        return JSONResponse({"suggestions": [s.to_dict() for s in found]}, headers=headers)

    async def _authorized(
        self, request: Request, limit: RateLimiter, name: str, too_many: str = TOO_FAST
    ) -> tuple[dict[str, str], dict] | Response:
        """(CORS headers, the JSON object) of a request from an allowed origin with the token, within ``limit``
        per client address; or the refusal."""
        from starlette.responses import JSONResponse

        checked = await self._checked(request)
        if isinstance(checked, Response):
            return checked
        headers, body = checked
        try:
            data = _json_object(body)
            token = data.get("token")
        except ValueError as exc:
            return JSONResponse({"error": f"{BAD_REQUEST}: {exc}"}, status_code=400, headers=headers)
        expected = self.settings.token()
        if expected is None or token != expected:
            return JSONResponse({"error": BAD_TOKEN}, status_code=401, headers=headers)
        address = request.client.host if request.client else "unknown"
        if not limit.allow(f"{name}:{address}"):
            return JSONResponse({"error": too_many}, status_code=429, headers=headers)
        return headers, data

    def refused(self, session: str, address: str) -> str | None:
        """Why this message is over a limit (per minute, per session, per day), or None."""
        if not self.per_minute.allow(f"widget:{address}"):
            return TOO_FAST
        if not self.per_session.allow(session):
            return SESSION_FULL
        if not self.per_day.allow(address):
            return DAY_FULL
        return None


def parse_typeahead_request(data: dict) -> str:
    """The text of a ``/widget/typeahead`` request, or ValueError saying what is wrong."""
    text = data.get("text")
    if not isinstance(text, str):
        raise ValueError("'text' must be a string")
    return text


def own_origins(request: Request) -> set[str]:
    """The origins of this app as the connection reached it: the address and port of the socket that accepted it
    (with ``localhost`` for a loopback one), never the request's own Host header, which any client sets."""
    server = request.scope.get("server")
    if not server or server[1] is None:
        return set()
    host, port = str(server[0]), int(server[1])
    names = {f"[{host}]" if ":" in host else host}
    if _loopback(host):
        names |= {"localhost", "127.0.0.1", "[::1]"}
    scheme = request.url.scheme
    default = {"http": 80, "https": 443}.get(scheme)
    return {f"{scheme}://{name}" + ("" if port == default else f":{port}") for name in names}


def _loopback(host: str) -> bool:
    """True for a loopback address (or the name localhost)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _json_object(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_BODY_BYTES:
        raise ValueError(f"body over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def _session_and_token(data: dict[str, Any]) -> tuple[str, str]:
    session, token = data.get("session"), data.get("token")
    if not isinstance(session, str) or not 8 <= len(session) <= 64:
        raise ValueError("'session' must be a string of 8 to 64 characters")
    if not isinstance(token, str):
        raise ValueError("'token' must be a string")
    return session, token


def parse_messages_request(data: dict[str, Any]) -> tuple[str, int]:
    """(session, after) of a ``/widget/messages`` request's object, or ValueError saying what is wrong."""
    session, _ = _session_and_token(data)
    after = data.get("after", 0)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ValueError("'after' must be a non-negative integer")
    return session, after


def parse_widget_request(body: bytes) -> tuple[str, list[Message], str, str]:
    """(message, history, session, token) of a widget request, or ValueError saying what is wrong."""
    data = _json_object(body)
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ValueError("'message' must be a non-empty string")
    session, token = _session_and_token(data)
    history = data.get("history") or []
    if not isinstance(history, list) or len(history) > MAX_HISTORY:
        raise ValueError(f"'history' must be a list of at most {MAX_HISTORY} messages")
    turns: list[Message] = []
    for turn in history:
        if not (
            isinstance(turn, dict)
            and turn.get("role") in ("user", "assistant")
            and isinstance(turn.get("content"), str)
        ):
            raise ValueError("each history message is {'role': 'user'|'assistant', 'content': '...'}")
        turns.append(said(turn["role"], turn["content"]))
    return message, turns, session, token
