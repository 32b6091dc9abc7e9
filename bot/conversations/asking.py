"""What visitors ask, read from the conversation log: the entries answered next in the same conversation (related
questions, bot/chat/related.py) and the entries most asked lately with their ratings and phrasings (the welcome
card, bot/chat/welcome.py).

Each read is one grouped query, cached for ``ttl`` seconds: a chat turn or a page load never scans the log twice a
minute. A log that fails gives nothing rather than no answer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Generic, TypeVar

from bot.conversations.log_store import ConversationLog, utc_iso

log = logging.getLogger(__name__)

TTL_SECONDS = 60.0
NEXT_SCAN = 100_000  # the newest turns read for "asked next": bounded work on a log of millions
MOST_ASKED_SCAN = 200_000  # the newest turns of the window read for the welcome card
WELCOME_TTL_SECONDS = 600.0  # the welcome card may be ten minutes old; a busy month is a few seconds to read

T = TypeVar("T")


class _Cached(Generic[T]):
    """A value read from the log at most every ``ttl`` seconds (``empty`` without a log or when the read fails)."""

    def __init__(self, read: Callable[[ConversationLog], T], empty: T, ttl: float):
        self.read, self.empty, self.ttl = read, empty, ttl
        self._value, self._read_at = empty, float("-inf")
        self._lock = threading.Lock()

    def get(self, turn_log: ConversationLog | None) -> T:
        with self._lock:
            if turn_log is not None and time.monotonic() - self._read_at >= self.ttl:
                try:
                    self._value = self.read(turn_log)
                except Exception as exc:  # the log is optional: no suggestions rather than no page
                    log.warning("conversation log: reading what visitors ask failed: %s", exc)
                    self._value = self.empty
                self._read_at = time.monotonic()
            return self._value

    def forget(self) -> None:
        with self._lock:
            self._read_at = float("-inf")


# The turns of conversations, newest NEXT_SCAN only, each conversation's in order.
NEXT_SQL = """
SELECT session, hits FROM turns
WHERE session IS NOT NULL AND id > (SELECT COALESCE(MAX(id), 0) FROM turns) - ?
ORDER BY session, id
"""
_DECODER = json.JSONDecoder()


def answered_entry(hits: str | None) -> str | None:
    """The entry a stored turn answered from: its first hit when used (the used hits are stored first), else None.

    Only the first object of the stored list is decoded: a turn keeps up to a dozen candidates after it.
    """
    if not hits or not hits.startswith("[{"):
        return None
    try:
        first, _ = _DECODER.raw_decode(hits, 1)
    except ValueError:
        return None
    return str(first["id"]) if isinstance(first, dict) and first.get("used") and "id" in first else None


def _next_counts(turn_log: ConversationLog) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    previous: tuple[str | None, str | None] = (None, None)
    for session, hits in turn_log.query(NEXT_SQL, (NEXT_SCAN,)):
        entry = answered_entry(hits)
        before_session, before = previous
        if session == before_session and before is not None and entry is not None and entry != before:
            out.setdefault(before, Counter())[entry] += 1
        previous = (session, entry)
    return out


class NextAsked:
    """Which entries visitors asked about next, after an answer from a given entry (cached ``ttl`` seconds)."""

    def __init__(self, turn_log: ConversationLog | None, ttl: float = TTL_SECONDS):
        self.log = turn_log
        self._counts: _Cached[dict[str, Counter[str]]] = _Cached(_next_counts, {}, ttl)

    def after(self, entry_id: str) -> list[str]:
        """Entry ids answered in the turn after one that ``entry_id`` answered, most often first (ties by id)."""
        counts = self._counts.get(self.log).get(entry_id, Counter())
        return [e for e, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]

    def forget(self) -> None:
        """Re-read the log at the next call."""
        self._counts.forget()


@dataclass(frozen=True)
class AskedEntry:
    """One entry's answers in the window: how many turns, their thumbs, and the phrasings asked (one stored question
    per normal form, with its count), most asked first."""

    turns: int
    up: int = 0
    down: int = 0
    phrasings: tuple[tuple[str, int], ...] = field(default=())

    @property
    def down_majority(self) -> bool:
        """True when more of its rated answers got a thumbs down than a thumbs up."""
        return self.down > self.up


# The window's answered turns, newest MOST_ASKED_SCAN only.
ASKED_SQL = """
SELECT hits, norm, question, rating FROM turns
WHERE time >= ? AND id > (SELECT COALESCE(MAX(id), 0) FROM turns) - ? AND id IN (SELECT turn_id FROM used)
"""


class MostAsked:
    """The entries answered in the last ``days`` days, with thumbs and phrasings (cached ``ttl`` seconds)."""

    def __init__(self, turn_log: ConversationLog | None, days: int, ttl: float = WELCOME_TTL_SECONDS):
        self.log = turn_log
        self.days = days
        self._asked: _Cached[dict[str, AskedEntry]] = _Cached(self._read, {}, ttl)

    def _read(self, turn_log: ConversationLog) -> dict[str, AskedEntry]:
        since = utc_iso(turn_log.clock() - timedelta(days=self.days))
        turns: Counter[str] = Counter()
        up: Counter[str] = Counter()
        down: Counter[str] = Counter()
        asked: dict[str, Counter[str]] = {}
        shown: dict[str, str] = {}  # normal form -> one stored (masked) question of it
        for hits, norm, question, rating in turn_log.query(ASKED_SQL, (since, MOST_ASKED_SCAN)):
            entry = answered_entry(hits)
            if entry is None:
                continue
            turns[entry] += 1
            up[entry] += rating is not None and rating > 0
            down[entry] += rating is not None and rating < 0
            asked.setdefault(entry, Counter())[norm] += 1
            shown.setdefault(norm, question)
        return {
            entry: AskedEntry(
                n,
                up[entry],
                down[entry],
                tuple((shown[norm], k) for norm, k in sorted(asked[entry].items(), key=lambda nk: (-nk[1], nk[0]))),
            )
            for entry, n in turns.items()
        }

    def entries(self) -> dict[str, AskedEntry]:
        """entry id -> its record in the window (empty without a log)."""
        return self._asked.get(self.log)

    def forget(self) -> None:
        """Re-read the log at the next call."""
        self._asked.forget()
