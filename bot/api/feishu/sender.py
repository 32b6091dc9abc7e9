"""Feishu's IM API for the answers: a ``tenant_access_token`` (自建应用: App ID + App Secret) cached until shortly
before it expires, then ``im/v1/messages`` to a chat or ``im/v1/messages/:message_id/reply``, retried with a
timeout; ``bot/v3/info`` says which open_id is the bot's (to know when a group message @mentions it).

Every message carries a ``uuid``, Feishu's idempotency key: an attempt that timed out after Feishu took it is not
shown twice. Failures are logged with Feishu's code, never with the secret or the token, and never shown to users.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any
from urllib.parse import quote

import httpx

from bot.api.feishu.messages import Outgoing
from bot.api.im.delivery import SendError, TokenCache, deliver
from bot.config.channels import FeishuSettings

log = logging.getLogger(__name__)

# 99991661: no access token, 99991663: an invalid or expired one (Feishu's common error codes): a new one, once more
EXPIRED_TOKEN = {99991661, 99991663}


class FeishuSender:
    """Sends messages as one app (App ID, App Secret) through ``api_base``."""

    def __init__(self, settings: FeishuSettings):
        self.api_base = settings.api_base
        self._app_id, self._secret = settings.app_id(), settings.app_secret()
        self.timeout, self.attempts = settings.send_timeout_seconds, settings.send_attempts
        self.backoff = settings.send_retry_seconds  # before the second attempt, doubled after each failure
        self.tokens = TokenCache(self._fetch_token)
        self._bot_open_id = ""
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the secret or the token
        return f"FeishuSender({self.api_base!r}, app_id={self._app_id!r})"

    # -- the calls ------------------------------------------------------------
    def _fetch_token(self, http: httpx.Client) -> tuple[str, float]:
        """A new tenant_access_token and its lifetime in seconds."""
        if not self._app_id or not self._secret:
            raise SendError("no App ID or App Secret: set the variables named by feishu.app_id_env and app_secret_env")
        data = self._json(
            http.post(
                f"{self.api_base}/open-apis/auth/v3/tenant_access_token/internal",
                json={"app_id": self._app_id, "app_secret": self._secret},
            )
        )
        token = data.get("tenant_access_token")
        if not isinstance(token, str) or not token:
            raise SendError("tenant_access_token/internal returned no tenant_access_token")
        return token, float(data.get("expire") or 7200)

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        """Feishu's JSON reply; SendError for a non-zero code (Feishu sends some with HTTP 400), a non-JSON body or
        another HTTP error."""
        path = response.url.path
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            status = response.status_code
            raise SendError(f"HTTP {status} from {path}" if status != 200 else f"not a JSON object from {path}")
        code = data.get("code", 0)
        if code:
            raise SendError(f"code {code} ({str(data.get('msg', ''))[:120]}) from {path}", code)
        if response.status_code != 200:
            raise SendError(f"HTTP {response.status_code} from {path}")
        return data

    def _call(self, http: httpx.Client, method: str, path: str, **request: Any) -> dict[str, Any]:
        """One API call with the tenant token; once more with a new token when Feishu refuses the cached one."""
        url = f"{self.api_base}{path}"
        try:
            headers = {"Authorization": f"Bearer {self.tokens.get(http)}"}
            return self._json(http.request(method, url, headers=headers, **request))
        except SendError as exc:
            if exc.code not in EXPIRED_TOKEN:
                raise
            headers = {"Authorization": f"Bearer {self.tokens.get(http, fresh=True)}"}
            return self._json(http.request(method, url, headers=headers, **request))

    def _deliver(self, path: str, body: dict[str, Any], params: dict[str, str] | None = None) -> bool:
        return deliver(
            lambda http: self._call(http, "POST", path, params=params, json=body),
            label="Feishu",
            timeout=self.timeout,
            attempts=self.attempts,
            backoff=self.backoff,
            log=log,
        )

    # -- what the channel uses -------------------------------------------------
    def bot_open_id(self) -> str:
        """The bot's own open_id (``bot/v3/info``, asked once); "" (logged) when Feishu cannot say now."""
        with self._lock:
            if self._bot_open_id:
                return self._bot_open_id
            try:
                with httpx.Client(timeout=self.timeout) as http:
                    bot = self._call(http, "GET", "/open-apis/bot/v3/info").get("bot")
            except (SendError, httpx.HTTPError) as exc:
                reason = str(exc) if isinstance(exc, SendError) else type(exc).__name__
                log.warning("Feishu bot/v3/info failed (%s): group messages @mentioning the bot go unanswered", reason)
                return ""
            open_id = bot.get("open_id") if isinstance(bot, dict) else None
            if not isinstance(open_id, str) or not open_id:
                log.warning("Feishu bot/v3/info returned no open_id: enable the app's bot (机器人) capability")
                return ""
            self._bot_open_id = open_id
            return open_id

    def send(self, chat_id: str, message: Outgoing, key: str | None = None) -> bool:
        """Send ``message`` to the chat ``chat_id``; True when Feishu took it, False (logged) after ``attempts``.

        ``key``: the idempotency key (Feishu shows one message per key within an hour); a new one by default.
        """
        body = {"receive_id": chat_id, "msg_type": message.msg_type, "content": message.json_content()}
        body["uuid"] = key or str(uuid.uuid4())
        return self._deliver("/open-apis/im/v1/messages", body, {"receive_id_type": "chat_id"})

    def reply(self, message_id: str, message: Outgoing, key: str | None = None) -> bool:
        """Send ``message`` as a reply to the message ``message_id`` (quoted above it in the chat); as :meth:`send`."""
        body = {"msg_type": message.msg_type, "content": message.json_content(), "uuid": key or str(uuid.uuid4())}
        return self._deliver(f"/open-apis/im/v1/messages/{quote(message_id, safe='')}/reply", body)

    def send_text(self, chat_id: str, text: str) -> bool:
        """Send ``text`` to the chat ``chat_id`` (e.g. a person's answer from the hand-off inbox); as :meth:`send`."""
        return self.send(chat_id, Outgoing.text(text))
