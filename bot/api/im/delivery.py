"""Delivery through an IM platform's send API: the app's access token cached until shortly before it expires, and a
message tried a few times with a timeout and a growing wait, every failure logged without a credential.

The channel supplies what differs: how a token is fetched, how one send is made, how the platform names an error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import httpx

EARLY = 300.0  # renew a token this many seconds before the platform says it expires


class SendError(RuntimeError):
    """A send API call that failed (the reason carries the platform's error code, never a credential)."""

    def __init__(self, reason: str, code: int | None = None):
        super().__init__(reason)
        self.code = code


class TokenCache:
    """One app's access token: ``fetch`` gets a new one with its lifetime in seconds; it is kept until ``EARLY``
    seconds before that (half the lifetime when shorter), and fetched again when missing, expiring or refused."""

    def __init__(self, fetch: Callable[[httpx.Client], tuple[str, float]], clock: Callable[[], float] = time.monotonic):
        self.fetch, self.clock = fetch, clock
        self._token: tuple[str, float] | None = None  # (token, clock time it is renewed)
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the token
        return f"TokenCache(cached={self._token is not None})"

    def get(self, http: httpx.Client, fresh: bool = False) -> str:
        """The cached token, fetched when missing, expiring or ``fresh`` (the platform refused the cached one)."""
        with self._lock:
            if not fresh and self._token and self.clock() < self._token[1]:
                return self._token[0]
            token, lifetime = self.fetch(http)
            self._token = (token, self.clock() + max(lifetime - EARLY, lifetime / 2))
            return token


def deliver(
    send_once: Callable[[httpx.Client], object],
    *,
    label: str,
    timeout: float,
    attempts: int,
    backoff: float,
    log: logging.Logger,
) -> bool:
    """Call ``send_once`` until it returns (its result unused), at most ``attempts`` times, waiting ``backoff`` seconds
    before the second try and twice as long after each failure; True when one returned, False (logged) when none did.

    ``label`` names the channel in the log; ``log`` is the channel's logger, so its failures are found under it.
    """
    delay = backoff
    with httpx.Client(timeout=timeout) as http:
        for attempt in range(1, attempts + 1):
            try:
                send_once(http)
                return True
            except (SendError, httpx.HTTPError) as exc:
                # httpx errors name the URL, and a URL may carry the token: log the kind of error only
                reason = str(exc) if isinstance(exc, SendError) else type(exc).__name__
                log.warning("%s send attempt %d/%d failed: %s", label, attempt, attempts, reason)
            if attempt < attempts:
                time.sleep(delay)
                delay *= 2
    log.error("%s answer not delivered after %d attempts", label, attempts)
    return False
