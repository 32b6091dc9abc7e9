"""The WeCom callback (接收消息与事件, safe mode) over one knowledge base: ``GET`` verifies the URL, ``POST`` takes a message.

Every request is checked before anything else happens: a wrong msg_signature is 401, a timestamp too far from now
403 (a replay), a message for another corp id 403, anything malformed 400; none of them reaches the bot. A message
WeCom retries (same MsgId) is answered once. A text message is answered in the callback's reply when the bot is done
within ``reply_budget_seconds`` (WeCom waits 5 s), otherwise the callback returns an empty 200 at once and the
answer follows through the send API. One user's messages are answered, and their answers sent, in the order they
came. Other message types get a short bilingual reply; events an empty 200.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from starlette.requests import Request  # at run time: FastAPI reads the handlers' annotations
from starlette.responses import PlainTextResponse, Response

from bot.api.assets import absolute_base
from bot.api.im.memory import Histories
from bot.api.im.order import InOrder
from bot.api.im.render import render
from bot.api.im.seen import SeenFile
from bot.api.im.shared_memory import SharedHistories, SharedSeen
from bot.api.wecom.crypto import CryptoError, WeComCrypto, WrongReceiver
from bot.api.wecom.messages import (
    MAX_BODY_BYTES,
    MAX_TEXT_BYTES,
    Incoming,
    MessageError,
    encrypted_reply,
    envelope,
    incoming,
    text_reply,
)
from bot.api.wecom.passive import PASSIVE, SEND_API, ReplyWay
from bot.api.wecom.sender import WeComSender
from bot.handoff.tickets import Conversation
from bot.serving.bodies import read_capped
from bot.serving.ratelimit import chat_per_minute, rate_limiter, shared_store
from bot.texts import ONLY_TEXT, SORRY, TOO_FAST

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

NOT_CONFIGURED = "the WeCom channel is not configured on this server; its log says which variables to set"


def refusal(status: int, reason: str) -> Response:
    """A plain-text refusal (WeCom shows the status in its console; the reason helps whoever sets it up)."""
    return PlainTextResponse(reason, status_code=status)


class WeComAPI:
    """The callback routes at ``wecom.path``, the in-memory histories and the background sender of one app."""

    def __init__(self, kb: KnowledgeBase, settings: Settings):
        self.kb = kb
        # the answers' pictures and files as absolute links (none without knowledge.assets.public_url)
        self.assets = absolute_base(kb.name, settings.knowledge.assets.public_url)
        self.settings = s = settings.wecom
        token, key = s.token(), s.aes_key()
        self.crypto = WeComCrypto(token, key, s.corp_id) if token and key else None
        if self.crypto is None:
            log.warning("the WeCom callback refuses every request until %s and %s are set", s.token_env, s.aes_key_env)
        if not s.secret():
            log.warning(
                "WeCom answers slower than %.1f s cannot be sent until %s is set", s.reply_budget_seconds, s.secret_env
            )
        self.sender = WeComSender(s)
        self.histories: Histories | SharedHistories = Histories(s.history_messages, s.history_ttl_seconds, s.max_users)
        # taken MsgIds outlive a restart: a captured callback replayed after one is still refused
        taken = settings.resolve(settings.state_dir) / "wecom" / "taken-messages.sqlite"
        seen = SeenFile(taken, 2.0 * s.max_clock_skew_seconds, "WeCom")
        self.seen: SeenFile | SharedSeen = seen
        store = shared_store(settings)
        if store is not None:  # limits.backend: postgres: any replica may get the user's next message, or a retry
            self.histories = SharedHistories(store, self.histories, kb.mask, self.session_of, "wecom")
            self.seen = SharedSeen(store, self.seen, "wecom")
        self.per_minute = rate_limiter(settings, "wecom-chat", chat_per_minute(settings))
        # A user's next message waits for the last one's answer: it reads that turn in its history, and its reply
        # must not overtake the last one (a quick 你好 sent before a slow answer to the question asked first).
        self.answers = InOrder(
            ThreadPoolExecutor(max_workers=max(2, settings.ui.concurrency), thread_name_prefix="wecom-answer")
        )

    def router(self) -> APIRouter:
        """The callback's routes (GET: URL verification, POST: messages)."""
        from fastapi import APIRouter

        router = APIRouter()
        router.add_api_route(self.settings.path, self.verify_url, methods=["GET"], include_in_schema=False)
        router.add_api_route(self.settings.path, self.receive, methods=["POST"], include_in_schema=False)
        return router

    # -- checks ---------------------------------------------------------------
    def refused(self, request: Request, encrypt: str) -> Response | None:
        """Why this request is refused (not configured, unsigned, forged, stale), or None when it is WeCom's."""
        if self.crypto is None:
            return refusal(503, NOT_CONFIGURED)
        query = request.query_params
        signature, timestamp, nonce = query.get("msg_signature"), query.get("timestamp"), query.get("nonce")
        if not signature or not timestamp or not nonce:
            return refusal(400, "msg_signature, timestamp and nonce are required")
        if not self.crypto.valid(signature, timestamp, nonce, encrypt):
            log.warning("WeCom callback with a wrong signature refused (from %s)", _client(request))
            return refusal(401, "wrong msg_signature")
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > self.settings.max_clock_skew_seconds:
            log.warning("WeCom callback with a stale timestamp refused (a replay, or this host's clock is off)")
            return refusal(403, f"timestamp further than {self.settings.max_clock_skew_seconds} s from now")
        return None

    def decrypted(self, encrypt: str) -> str | Response:
        """The plaintext of a checked request, or the refusal of one that does not decrypt for this corp."""
        assert self.crypto is not None  # refused() checked it
        try:
            return self.crypto.decrypt(encrypt)
        except WrongReceiver as exc:
            log.warning("WeCom callback refused: %s", exc)
            return refusal(403, str(exc))
        except CryptoError as exc:
            log.warning("WeCom callback refused: %s", exc)
            return refusal(400, str(exc))

    # -- routes ---------------------------------------------------------------
    async def verify_url(self, request: Request) -> Response:
        """``GET``: WeCom checks the URL when the admin saves it; the decrypted echostr proves we hold the key."""
        echostr = request.query_params.get("echostr", "")
        if not echostr:
            return refusal(400, "echostr is required")
        refused = self.refused(request, echostr)
        if refused is not None:
            return refused
        plain = self.decrypted(echostr)
        return plain if isinstance(plain, Response) else PlainTextResponse(plain)

    async def receive(self, request: Request) -> Response:
        """``POST``: one encrypted message or event; the passive reply, or an empty 200 and the send API later."""
        body = await read_capped(request, MAX_BODY_BYTES)
        if body is None:
            return refusal(413, f"the body is over {MAX_BODY_BYTES} bytes")
        try:
            encrypt = envelope(body)
        except MessageError as exc:
            return refusal(400, str(exc))
        refused = self.refused(request, encrypt)
        if refused is not None:
            return refused
        plain = self.decrypted(encrypt)
        if isinstance(plain, Response):
            return plain
        try:
            message = incoming(plain)
        except MessageError as exc:
            return refusal(400, str(exc))
        if not self.seen.first(message.key):
            log.info("WeCom retried a message already taken; not answered twice")
            return Response(status_code=200)
        return await self.respond(request, message)

    async def respond(self, request: Request, message: Incoming) -> Response:
        """The reply to a new message: nothing for events, a notice for non-text, the bot's answer for text."""
        if message.kind == "event" or (message.kind == "text" and not message.content.strip()):
            return Response(status_code=200)
        if message.kind != "text":
            return self.passive(request, message.user, ONLY_TEXT)
        if not self.per_minute.allow(f"wecom:{message.user}"):
            return self.passive(request, message.user, TOO_FAST)
        way = ReplyWay()
        job: Future[str] = self.answers.submit(message.user, lambda: self.answer_or_send(message, way))
        budget = self.settings.reply_budget_seconds
        if budget > 0:
            await asyncio.wait({asyncio.wrap_future(job)}, timeout=budget)
        # WeCom gives up at 5 s (and retries): past the budget the answering thread sends the answer when it is ready
        if way.settle(SEND_API) == SEND_API:
            return Response(status_code=200)
        text = await asyncio.wrap_future(job)  # the answer was ready first: its result is being set
        # empty while a person holds the conversation: their reply is sent to the user
        return self.passive(request, message.user, text) if text else Response(status_code=200)

    # -- answering ------------------------------------------------------------
    def answer_or_send(self, message: Incoming, way: ReplyWay) -> str:
        """The answer for the callback's passive reply, or sent through the send API when the callback has given up
        (worker thread); a failed turn is logged and answered with the bilingual apology, send failures are logged."""
        try:
            text = self.answer(message)
        except Exception:
            log.exception("WeCom turn failed")
            text = SORRY
        if way.settle(PASSIVE) == SEND_API and text:
            self.sender.send_text(message.user, text)
        return text

    def answer(self, message: Incoming) -> str:
        """The bot's answer to a text message as WeCom text, remembered in the user's history (worker thread)."""
        history = self.histories.get(message.user)
        session = self.session_of(message.user)
        # The conversation's secret is the keyed hash of the UserID; a person's replies are pushed to the UserID.
        conversation = Conversation("wecom", session, address=message.user, session=session)
        answer = self.kb.ask(message.content, history, session=session, source="wecom", conversation=conversation)
        text = render(answer, MAX_TEXT_BYTES, self.settings.show_sources, self.assets)
        self.histories.add(message.user, message.content, text)
        return text

    def session_of(self, user: str) -> str:
        """The conversation log's session of a WeCom user: an HMAC keyed with the callback token, so the log holds no
        UserID and a guessed UserID ("zhangsan") cannot be matched to its turns without the token."""
        key = self.crypto.token if self.crypto is not None else ""
        return "wecom-" + hmac.new(key.encode(), user.encode(), hashlib.sha256).hexdigest()[:20]

    def passive(self, request: Request, user: str, content: str) -> Response:
        """The encrypted, signed passive reply carrying ``content`` to ``user``."""
        assert self.crypto is not None
        timestamp, nonce = str(int(time.time())), request.query_params.get("nonce", "")
        encrypt = self.crypto.encrypt(text_reply(user, self.settings.corp_id, content))
        signature = self.crypto.sign(timestamp, nonce, encrypt)
        body = encrypted_reply(encrypt, signature, timestamp, nonce)
        return Response(body, media_type="application/xml; charset=utf-8")


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"
