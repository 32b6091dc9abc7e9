"""Long messages cost the most (every part searched, every mode encoded, HyDE on top): at most a few are answered at
once, so one client sending many cannot slow every other chat. Short messages never wait here."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ExpensiveGate:
    """At most ``limit`` messages longer than ``min_chars`` in flight; one more waits up to ``wait`` s, then is
    refused (the caller answers :data:`LONG_BUSY`)."""

    def __init__(self, min_chars: int, limit: int, wait: float):
        self.min_chars = min_chars
        self.limit = limit
        self.wait = wait
        self._slots = threading.BoundedSemaphore(limit)

    @contextmanager
    def slot(self, message: str) -> Iterator[bool]:
        """Whether ``message`` may be answered now (a short one always); its slot is held until the block ends."""
        if len(message or "") <= self.min_chars:
            yield True
            return
        if not self._slots.acquire(timeout=self.wait):
            yield False
            return
        try:
            yield True
        finally:
            self._slots.release()
