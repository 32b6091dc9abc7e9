"""The Feishu event subscription (将事件发送至开发者服务器) over one knowledge base: ``POST`` takes the URL check and the events.

Every request is checked before anything else happens: a wrong ``X-Lark-Signature`` is 401, a timestamp too far
from now 403 (a replay), a wrong Verification Token 403, anything malformed 400, a body over the cap 413; none of
them reaches the bot. The URL check is answered with its challenge (Feishu does not sign it; the token and, when it
is encrypted, the Encrypt Key prove it); every other event must be signed. An event Feishu retries, or a replay of
it, is taken once (its event_id, remembered across restarts). Feishu wants its 200 within 3 s, so a message is
acknowledged at once and answered afterwards through the IM API: in a one-to-one chat always, in a group only
when it @mentions the bot (the mention left out of the question). Other kinds of message get a short bilingual note.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

from starlette.requests import Request  # at run time: FastAPI reads the handlers' annotations
from starlette.responses import JSONResponse, PlainTextResponse, Response

from bot.api.assets import absolute_base
from bot.api.feishu.crypto import CryptoError, FeishuCrypto
from bot.api.feishu.messages import (
    MAX_BODY_BYTES,
    MAX_TEXT_BYTES,
    MESSAGE_RECEIVED,
    TEXT_KINDS,
    Event,
    EventError,
    Incoming,
    Outgoing,
    envelope,
    event_of,
    incoming,
)
from bot.api.feishu.sender import FeishuSender
from bot.api.im.memory import Histories
from bot.api.im.order import InOrder
from bot.api.im.render import render
from bot.api.im.seen import SeenFile
from bot.api.im.shared_memory import SharedHistories, SharedSeen
from bot.handoff.tickets import Conversation
from bot.serving.bodies import read_capped
from bot.serving.ratelimit import chat_per_minute, rate_limiter, shared_store
from bot.texts import ONLY_TEXT, SORRY, TOO_FAST

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

CHANNEL: Final = "feishu"  # the log's source, and the name an answer variant for this channel will go by
NOT_CONFIGURED = "the Feishu channel is not configured on this server; its log says which variables to set"
SIGNATURE_HEADERS = ("x-lark-signature", "x-lark-request-timestamp", "x-lark-request-nonce")


def refusal(status: int, reason: str) -> Response:
    """A plain-text refusal (Feishu's console shows it when a URL check fails; the reason helps whoever sets it up)."""
    return PlainTextResponse(reason, status_code=status)


def taken() -> Response:
    """The 200 that tells Feishu the event arrived (it retries anything else)."""
    return JSONResponse({"msg": "ok"})


class FeishuAPI:
    """The event route at ``feishu.path``, the users' histories, the events taken and the IM API of one app."""

    def __init__(self, kb: KnowledgeBase, settings: Settings):
        self.kb = kb
        # the answers' pictures and files as absolute links (none without knowledge.assets.public_url)
        self.assets = absolute_base(kb.name, settings.knowledge.assets.public_url)
        self.settings = s = settings.feishu
        self._token, key = s.verification_token(), s.encrypt_key()
        self.crypto = FeishuCrypto(key) if self._token and key else None
        if self.crypto is None:
            log.warning(
                "the Feishu event route refuses every request until %s and %s are set",
                s.verification_token_env,
                s.encrypt_key_env,
            )
        if not (s.app_id() and s.app_secret()):
            log.warning("Feishu messages cannot be answered until %s and %s are set", s.app_id_env, s.app_secret_env)
        self.sender = FeishuSender(s)
        self.histories: Histories | SharedHistories = Histories(s.history_messages, s.history_ttl_seconds, s.max_users)
        seen = SeenFile(
            settings.resolve(settings.state_dir) / "feishu" / "events.sqlite", s.remember_events_seconds, "Feishu"
        )
        self.seen: SeenFile | SharedSeen = seen
        store = shared_store(settings)
        if store is not None:  # limits.backend: postgres: a retry, or the user's next message, may reach any replica
            self.histories = SharedHistories(store, self.histories, kb.mask, self.session_of, CHANNEL)
            self.seen = SharedSeen(store, seen, CHANNEL)
        self.per_minute = rate_limiter(settings, "feishu-chat", chat_per_minute(settings))
        self.answers = InOrder(
            ThreadPoolExecutor(max_workers=max(2, settings.ui.concurrency), thread_name_prefix="feishu-answer")
        )

    def router(self) -> APIRouter:
        """The event route (POST: the URL check and the events)."""
        from fastapi import APIRouter

        router = APIRouter()
        router.add_api_route(self.settings.path, self.receive, methods=["POST"], include_in_schema=False)
        return router

    # -- checks ---------------------------------------------------------------
    def signed(self, request: Request, body: bytes) -> bool | Response:
        """True when Feishu signed this request, False when it carries no signature, or the refusal of a forged or
        stale one."""
        assert self.crypto is not None  # receive() checked it
        signature, timestamp, nonce = (request.headers.get(h, "") for h in SIGNATURE_HEADERS)
        if not (signature or timestamp or nonce):
            return False
        if not (signature and timestamp and nonce):
            return refusal(400, "X-Lark-Signature, X-Lark-Request-Timestamp and X-Lark-Request-Nonce come together")
        if not self.crypto.valid(signature, timestamp, nonce, body):
            log.warning("Feishu event with a wrong signature refused (from %s)", _client(request))
            return refusal(401, "wrong X-Lark-Signature")
        skew = self.settings.max_clock_skew_seconds
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > skew:
            log.warning("Feishu event with a stale timestamp refused (a replay, or this host's clock is off)")
            return refusal(403, f"X-Lark-Request-Timestamp further than {skew} s from now")
        return True

    def opened(self, body: bytes) -> Event | Response:
        """The event in a body, decrypted when it is encrypted, or the refusal of one that is not Feishu's."""
        assert self.crypto is not None
        try:
            data = envelope(body)
            if "encrypt" in data:
                if not isinstance(data["encrypt"], str):
                    raise EventError("the encrypt field is not a string")
                data = envelope(self.crypto.decrypt(data["encrypt"]).encode("utf-8"))
            return event_of(data)
        except (EventError, CryptoError) as exc:
            log.warning("Feishu event refused: %s", exc)
            return refusal(400, str(exc))

    # -- the route ------------------------------------------------------------
    async def receive(self, request: Request) -> Response:
        """``POST``: the URL check (its challenge echoed) or one event (200 at once; a message answered later)."""
        if self.crypto is None:
            return refusal(503, NOT_CONFIGURED)
        body = await read_capped(request, MAX_BODY_BYTES)
        if body is None:
            return refusal(413, f"the body is over {MAX_BODY_BYTES} bytes")
        signed = self.signed(request, body)
        if isinstance(signed, Response):
            return signed
        event = self.opened(body)
        if isinstance(event, Response):
            return event
        if not hmac.compare_digest(event.token.encode("utf-8"), self._token.encode("utf-8")):
            log.warning("Feishu event with a wrong Verification Token refused (from %s)", _client(request))
            return refusal(403, "wrong Verification Token; check the variable named by feishu.verification_token_env")
        if event.type == "url_verification":
            return JSONResponse({"challenge": event.challenge})
        if not signed:
            log.warning("unsigned Feishu event refused (from %s)", _client(request))
            return refusal(401, "the event is not signed: set an Encrypt Key in the app's 事件与回调 → 加密策略")
        return await self.take(event)

    async def take(self, event: Event) -> Response:
        """Acknowledge a checked event; a new message is queued for an answer, a repeat or another event is not."""
        message = None
        if event.type == MESSAGE_RECEIVED:
            try:
                message = incoming(event)
            except EventError as exc:
                log.warning("Feishu message refused: %s", exc)
                return refusal(400, str(exc))
        elif event.schema != "2.0":
            log.info("Feishu sent a schema %s event: only %s (schema 2.0) is answered", event.schema, MESSAGE_RECEIVED)
        # the store may be a database round trip: off the event loop
        if not await asyncio.to_thread(self.seen.first, event.event_id):
            log.info("Feishu sent an event already taken (a retry or a replay); not answered twice")
            return taken()
        if message is not None:
            self.answers.submit(message.conversation, lambda: self.handle(message))
        return taken()

    # -- answering (worker threads) -------------------------------------------
    def handle(self, message: Incoming) -> None:
        """Answer one message through the IM API; a failure is logged, and the user gets an apology."""
        try:
            reply = self.reply_to(message)
        except Exception:
            log.exception("Feishu turn failed")
            reply = SORRY
        if reply:
            self.deliver(message, Outgoing.text(reply))

    def reply_to(self, message: Incoming) -> str | None:
        """The text answering ``message``, or None when it is not for the bot (a group message not @mentioning it,
        an empty one)."""
        bot_id = self.sender.bot_open_id() if message.mentions or message.chat_type != "p2p" else ""
        if message.chat_type != "p2p" and not message.mentions_bot(bot_id):
            return None
        question = message.question(bot_id)
        if message.kind in TEXT_KINDS and not question:
            return None
        if not self.per_minute.allow(f"feishu:{message.sender}"):
            return TOO_FAST
        if message.kind not in TEXT_KINDS:
            return ONLY_TEXT
        who = message.conversation
        session = self.session_of(who)
        # The conversation's secret is the keyed hash of chat and sender; a person's replies are pushed to the chat.
        conversation = Conversation(CHANNEL, session, address=message.chat_id, session=session)
        answer = self.kb.ask(
            question, self.histories.get(who), session=session, source=CHANNEL, conversation=conversation
        )
        text = render(answer, MAX_TEXT_BYTES, self.settings.show_sources, self.assets)
        self.histories.add(who, question, text)
        return text

    def deliver(self, message: Incoming, outgoing: Outgoing) -> bool:
        """Send the answer: to the chat when it is one-to-one, as a reply to the question in a group."""
        # the event id makes the idempotency key: a retried send is shown once
        key = "kbbot-" + hashlib.sha256(message.event_id.encode("utf-8")).hexdigest()[:40]
        if message.chat_type == "p2p":
            return self.sender.send(message.chat_id, outgoing, key)
        return self.sender.reply(message.message_id, outgoing, key)

    def session_of(self, conversation: str) -> str:
        """The conversation log's session of a user in a chat: an HMAC keyed with the Verification Token, so the log
        holds no open_id and a guessed one cannot be matched to its turns without the token."""
        return "feishu-" + hmac.new(self._token.encode(), conversation.encode(), hashlib.sha256).hexdigest()[:20]


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"
