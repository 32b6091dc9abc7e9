"""WeCom's send API for answers that miss the callback's 5 s: ``gettoken`` (corp id + app secret) with the access
token cached until shortly before it expires, then ``message/send`` of a text message, retried with a timeout.

Failures are logged with WeCom's errcode, never with the secret or the token, and never shown to the user.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from bot.api.im.delivery import SendError, TokenCache, deliver
from bot.config.channels import WeComSettings

log = logging.getLogger(__name__)

EXPIRED_TOKEN = {40014, 42001}  # invalid / expired access_token: fetch a new one and try again


class WeComSender:
    """Sends text messages as one app (corp id, agent id, secret) through ``api_base``."""

    def __init__(self, settings: WeComSettings):
        self.api_base, self.corp_id, self.agent_id = settings.api_base, settings.corp_id, settings.agent_id
        self._secret = settings.secret()
        self.timeout, self.attempts = settings.send_timeout_seconds, settings.send_attempts
        self.backoff = settings.send_retry_seconds  # before the second attempt, doubled after each failure
        self.tokens = TokenCache(self._fetch_token)

    def __repr__(self) -> str:  # never the secret or the token
        return f"WeComSender({self.api_base!r}, corp_id={self.corp_id!r}, agent_id={self.agent_id})"

    def _fetch_token(self, http: httpx.Client) -> tuple[str, float]:
        """A new access token from ``gettoken`` and its lifetime in seconds."""
        if not self._secret:
            raise SendError("no app secret: set the variable named by wecom.secret_env")
        data = self._json(
            http.get(f"{self.api_base}/cgi-bin/gettoken", params={"corpid": self.corp_id, "corpsecret": self._secret})
        )
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise SendError("gettoken returned no access_token")
        return token, float(data.get("expires_in") or 7200)

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        """WeCom's JSON reply; SendError for an HTTP error, a non-JSON body or a non-zero errcode."""
        if response.status_code != 200:
            raise SendError(f"HTTP {response.status_code} from {response.url.path}")
        try:
            data = response.json()
        except ValueError:
            raise SendError(f"not JSON from {response.url.path}") from None
        if not isinstance(data, dict):
            raise SendError(f"not a JSON object from {response.url.path}")
        code = data.get("errcode", 0)
        if code:
            raise SendError(f"errcode {code} ({str(data.get('errmsg', ''))[:120]}) from {response.url.path}", code)
        return data

    def _send_once(self, http: httpx.Client, user: str, content: str) -> None:
        body = {"touser": user, "msgtype": "text", "agentid": self.agent_id, "text": {"content": content}, "safe": 0}
        token = self.tokens.get(http)
        try:
            self._json(http.post(f"{self.api_base}/cgi-bin/message/send", params={"access_token": token}, json=body))
        except SendError as exc:
            if exc.code not in EXPIRED_TOKEN:
                raise
            token = self.tokens.get(http, fresh=True)  # WeCom revoked it early: one more try with a new one
            self._json(http.post(f"{self.api_base}/cgi-bin/message/send", params={"access_token": token}, json=body))

    def send_text(self, user: str, content: str) -> bool:
        """Send ``content`` to ``user``; True when WeCom took it, False (logged) after ``attempts`` failures."""
        return deliver(
            lambda http: self._send_once(http, user, content),
            label="WeCom",
            timeout=self.timeout,
            attempts=self.attempts,
            backoff=self.backoff,
            log=log,
        )
