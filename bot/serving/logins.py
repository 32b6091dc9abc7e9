"""Login throttling shared by every front end: the browser's chat and admin logins and the API's token check.

A lockout per username + client address after repeated failures (doubling, at most 15 minutes), and a cap of
wrong attempts per address against password spraying. Front ends set ``CLIENT_ADDRESS`` for the request.
"""

from __future__ import annotations

import contextvars
import hmac
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bot.config.settings import LimitSettings, default_of

log = logging.getLogger(__name__)

CLIENT_ADDRESS: contextvars.ContextVar[str] = contextvars.ContextVar("kbbot_client_address", default="unknown")
MAX_LOCKOUT = 900.0  # seconds: the longest a username + address pair is locked after repeated failures
# Wrong passwords from one address (any usernames) per minute before it is refused for the rest of the minute.
ADDRESS_FAILURES_PER_MINUTE = 20
ADDRESS_WINDOW = 60.0


@dataclass
class _Failures:
    count: int = 0
    lockouts: int = 0
    locked_until: float = 0.0
    last: float = 0.0


def credentials_check(username: str, password: str) -> Callable[[str, str], bool]:
    """A constant-time check of one username and password."""
    user_b, pass_b = username.encode("utf-8"), password.encode("utf-8")

    def check(given_user: str, given_password: str) -> bool:
        user_ok = hmac.compare_digest(given_user.encode("utf-8"), user_b)
        pass_ok = hmac.compare_digest(given_password.encode("utf-8"), pass_b)
        return user_ok & pass_ok

    return check


class ThrottledLogin:
    """A login check (``check(username, password)``) behind a lockout per username + client address.

    ``failures`` wrong attempts lock the pair for ``lockout`` s (doubling on each further lockout, at most 15 min);
    while locked every attempt is refused, even with the right password. A success clears the pair's record.
    Against password spraying (one password tried on many usernames) an address is also refused for the rest of
    the minute after ``address_failures`` wrong attempts within a minute, whatever the usernames.

    Called as ``throttle(username, password)`` it is Gradio's ``auth`` callable (the address comes from
    ``CLIENT_ADDRESS``, set by :class:`GuardMiddleware`); :meth:`attempt` takes the address itself and
    :meth:`retry_after` says how long a refused pair still waits (the admin login's 429 and message).
    """

    def __init__(
        self,
        check: Callable[[str, str], bool],
        failures: int = default_of(LimitSettings, "login_failures"),
        lockout: float = default_of(LimitSettings, "login_lockout_seconds"),
        clock: Callable[[], float] = time.monotonic,
        address_failures: int = ADDRESS_FAILURES_PER_MINUTE,
    ):
        self.check = check
        self.failures = failures
        self.lockout = lockout
        self.address_failures = address_failures
        self._clock = clock
        self._state: dict[tuple[str, str], _Failures] = {}
        self._by_address: dict[str, deque[float]] = {}  # wrong attempts per address in the last minute
        self._lock = threading.Lock()

    def __call__(self, username: str, password: str) -> bool:
        """True when the credentials are right and the pair is not locked out (the address from CLIENT_ADDRESS)."""
        return self.attempt(username, password, CLIENT_ADDRESS.get())

    def _wait(self, username: str, address: str, now: float) -> float:
        """Seconds until ``username`` may try again from ``address`` (0: now). Call with the lock held."""
        state = self._state.get((username, address))
        wait = state.locked_until - now if state is not None else 0.0
        recent = self._by_address.get(address)
        if recent:
            while recent and now - recent[0] >= ADDRESS_WINDOW:
                recent.popleft()
            if len(recent) >= self.address_failures > 0:
                wait = max(wait, recent[0] + ADDRESS_WINDOW - now)
        return max(wait, 0.0)

    def retry_after(self, username: str, address: str) -> float:
        """Seconds until ``username`` may try again from ``address``; 0 when not locked out."""
        with self._lock:
            return self._wait(username, address, self._clock())

    def attempt(self, username: str, password: str, address: str) -> bool:
        """True when the credentials are right and neither the pair nor the address is locked out; a wrong
        password counts towards both lockouts."""
        if self._refused(username, address):
            return False
        if self.check(username, password):
            self._succeeded(username, address)
            return True
        self._failed(username, address)
        return False

    def _lockout_seconds(self, lockouts: int) -> float:
        """How long the ``lockouts``-th lockout of a pair lasts: doubling, at most MAX_LOCKOUT."""
        return min(self.lockout * 2 ** (lockouts - 1), MAX_LOCKOUT)

    def _refused(self, username: str, address: str) -> bool:
        """True when the pair or the address is locked out now (the attempt is not even checked)."""
        now = self._clock()
        with self._lock:
            if self._wait(username, address, now) > 0:
                state = self._state.get((username, address))
                if state is not None:
                    state.last = now
                return True
        return False

    def _succeeded(self, username: str, address: str) -> None:
        with self._lock:
            self._state.pop((username, address), None)

    def _failed(self, username: str, address: str) -> None:
        """Count a wrong password towards the pair's and the address's lockouts."""
        now = self._clock()
        with self._lock:
            state = self._state.setdefault((username, address), _Failures())
            state.count += 1
            state.last = now
            if state.count >= self.failures:
                state.lockouts += 1
                state.count = 0
                seconds = self._lockout_seconds(state.lockouts)
                state.locked_until = now + seconds
                log.warning("login locked for %g s after %d failed attempts from %s", seconds, self.failures, address)
            recent = self._by_address.setdefault(address, deque())
            recent.append(now)
            if len(recent) == self.address_failures:
                log.warning("logins from %s refused for a minute after %d failed attempts", address, len(recent))
            if len(self._state) > 10_000:  # forget pairs idle for the longest lockout, so memory stays bounded
                self._state = {
                    k: v for k, v in self._state.items() if v.locked_until > now or now - v.last < MAX_LOCKOUT
                }
            if len(self._by_address) > 10_000:
                self._by_address = {a: d for a, d in self._by_address.items() if d and now - d[-1] < ADDRESS_WINDOW}


def locked_message(seconds: float) -> str:
    """What a locked-out login is told: when to try again (Chinese first)."""
    if seconds <= 90:
        n = max(1, math.ceil(seconds))
        zh, en = f"{n} 秒", f"{n} s"
    else:
        n = math.ceil(seconds / 60)
        zh, en = f"{n} 分钟", f"{n} min"
    return (
        f"登录失败次数过多，已暂时锁定，请在 {zh}后再试。/ Too many failed logins: locked for now, try again in {en}."
    )
