"""The configured chat rate and a per-key sliding-window rate limit (one key per browser session, token or client
address), in this process's memory or, with ``limits.backend: postgres``, shared by every replica (shared_limits.py)."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Protocol

from bot.config.settings import Settings

if TYPE_CHECKING:
    from bot.serving.shared_limits import RateStore


def chat_per_minute(settings: Settings) -> int:
    """Chat messages per client and minute: the deprecated ``ui.rate_limit_per_minute`` when set, else ``limits``."""
    old = settings.ui.rate_limit_per_minute
    return old if old is not None else settings.limits.chat_per_minute


class RateLimiter(Protocol):
    """Counts events per key and says whether one more is within the limit."""

    def allow(self, key: str) -> bool:
        """Record one event for ``key`` and say whether it is within the limit."""
        ...


def rate_limiter(settings: Settings, name: str, max_events: int, window: float = 60.0) -> RateLimiter:
    """The limiter ``name`` (e.g. "api-chat": its counts are its own) as ``limits.backend`` says: this process's
    memory, or the PostgreSQL database the replicas share."""
    store = shared_store(settings) if max_events > 0 else None
    if store is not None:
        from bot.serving.shared_limits import SharedLimiter

        return SharedLimiter(store, name, max_events, window)
    return SlidingWindowLimiter(max_events, window)


def shared_store(settings: Settings) -> RateStore | None:
    """The PostgreSQL store every replica counts in (a ``RateStore``) with ``limits.backend: postgres``, else None."""
    if settings.limits.backend != "postgres":
        return None
    from bot.serving.shared_limits import rate_store

    pg = settings.log.postgres
    return rate_store(pg.dsn_env, pg.connect_timeout)


class SlidingWindowLimiter:
    """Allows at most ``max_events`` per ``window`` seconds for each key; ``max_events`` 0 disables it."""

    def __init__(self, max_events: int, window: float = 60.0, clock=time.monotonic):
        self.max_events = max_events
        self.window = window
        self._clock = clock
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> bool:
        """Record one event for ``key`` and say whether it is within the limit."""
        if self.max_events <= 0:
            return True
        now = self._clock()
        with self._lock:
            events = self._events.setdefault(key, deque())
            while events and now - events[0] >= self.window:
                events.popleft()
            if len(events) >= self.max_events:
                return False
            events.append(now)
            if len(self._events) > 10_000:  # forget idle sessions so memory stays bounded
                self._events = {k: v for k, v in self._events.items() if v and now - v[-1] < self.window}
            return True
