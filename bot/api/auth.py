"""Bearer-token auth of the API: the token lives only in an environment variable and is compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import math

from bot.api.protocol import APIError
from bot.config.secrets import env_secret
from bot.config.settings import Settings
from bot.serving.logins import ThrottledLogin, locked_message
from bot.serving.shared_logins import login_throttle

USER = "api"  # the throttle's "username": one token, so wrong guesses count per client address

CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _refused(message: str, code: str) -> APIError:
    return APIError(401, message, type="authentication_error", code=code, headers=CHALLENGE)


class TokenGuard:
    """Checks ``Authorization: Bearer <token>`` against the variable ``token_env``, read on every call.

    With the variable unset every call is refused, unless ``require_token`` is False (then the API is open).
    The token is never logged, echoed or kept beyond a hash used as the rate-limit key. Wrong tokens are
    throttled as logins are (``throttle``: a lockout per client address after a few, and a cap per minute), so
    guessing costs minutes per handful of tries.
    """

    def __init__(self, token_env: str, require_token: bool = True, throttle: ThrottledLogin | None = None):
        self.token_env = token_env
        self.require_token = require_token
        self.throttle = throttle or ThrottledLogin(self._matches)

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenGuard:
        """From ``api``, with wrong tokens throttled by the logins' ``limits.login_failures`` and lockout."""
        guard = cls(settings.api.token_env, settings.api.require_token)
        guard.throttle = login_throttle(guard._matches, settings)
        return guard

    def _matches(self, _user: str, given: str) -> bool:
        expected = self.expected()
        return expected is not None and hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))

    def expected(self) -> str | None:
        """The configured token, or None when the variable is unset or blank."""
        return env_secret(self.token_env) or None

    def check(self, authorization: str | None, address: str = "unknown") -> str | None:
        """A stable client key derived from the presented token (None when the API is open); raises APIError 401,
        or 429 while ``address`` is locked out after wrong tokens."""
        expected = self.expected()
        if expected is None:
            if self.require_token:
                raise _refused(
                    f"API 已锁定：服务器未设置环境变量 {self.token_env} / The API is locked: set the "
                    f"{self.token_env} environment variable on the server and send it as a bearer token "
                    "(or set api.require_token: false in config.yaml to open it)",
                    "api_token_not_configured",
                )
            return None
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise _refused(
                "缺少访问令牌 / Missing bearer token: send the header 'Authorization: Bearer <token>' "
                f"with the value of {self.token_env}",
                "missing_api_key",
            )
        given = given.strip()
        if not self.throttle.attempt(USER, given, address):
            wait = self.throttle.retry_after(USER, address)
            if wait > 0:  # locked out, by this wrong token or earlier ones: even the right one waits
                raise APIError(
                    429,
                    locked_message(wait),
                    type="rate_limit_error",
                    code="too_many_wrong_tokens",
                    headers={"Retry-After": str(math.ceil(wait))},
                )
            raise _refused("访问令牌无效 / Invalid bearer token", "invalid_api_key")
        return "token:" + hashlib.sha256(given.encode("utf-8")).hexdigest()[:16]
