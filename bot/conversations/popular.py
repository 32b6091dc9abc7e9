"""Popular questions: the entries most used in answers, from the conversation log, for the welcome examples and
the last resort's "did you mean" (``ui.examples_source``, ``fallback.last_resort.suggestions_source``).

Only entries in the knowledge as loaded now are returned (a deleted or renamed entry drops out at the next page
load); the log's counts are re-read at most every ``ttl`` seconds, so a page load never scans the log twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from bot.conversations.log_store import ConversationLog, EntryHits
from bot.knowledge.entries import Entry

TTL_SECONDS = 60.0


class PopularEntries:
    """The most-hit entries of the knowledge, from the log's hit counts (cached for ``ttl`` seconds)."""

    def __init__(self, log: ConversationLog | None, ttl: float = TTL_SECONDS):
        self.log = log
        self.ttl = ttl
        self._counts: dict[str, EntryHits] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def _hit_counts(self) -> dict[str, EntryHits]:
        with self._lock:
            if self.log is not None and time.monotonic() - self._read_at >= self.ttl:
                try:
                    self._counts = self.log.hit_counts()
                except Exception:  # the log is optional: no popular entries rather than no page
                    self._counts = {}
                self._read_at = time.monotonic()
            return self._counts

    def top(self, entries: Sequence[Entry], limit: int) -> list[Entry]:
        """Up to ``limit`` loaded entries, most used first (then most recently used)."""
        counts = self._hit_counts()
        present = [e for e in entries if e.id in counts]
        present.sort(key=lambda e: (counts[e.id].turns, counts[e.id].latest), reverse=True)
        return present[:limit]

    def forget(self) -> None:
        """Re-read the counts at the next call (after an edit or in tests)."""
        with self._lock:
            self._read_at = float("-inf")
