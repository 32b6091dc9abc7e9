"""Related questions (猜你想问) after an answer: up to three entries to ask next, shown as their questions.

They come, in this order until there are enough: the answered entry's own ``related`` ids (the knowledge's
choice), the entries visitors most often asked next in the same conversation (the conversation log), then its
nearest neighbours in the index (a search for its question). Never an entry the answer used, never one the
turn's category filter excludes, never a draft or an entry outside its validity dates.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Collection, Iterable, Sequence

from bot.chat.answer import Answer, Decision, Option
from bot.chat.status import example_of
from bot.conversations.asking import NextAsked
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.knowledge.validity import Availability
from bot.search.base import Hit

RELATED = 3  # related questions offered after an answer
NEIGHBOURS = 8  # hits searched for the nearest neighbours (the entry itself and excluded ones come back too)
CACHED = 10_000  # entries whose neighbours are remembered (per category filter) until the knowledge changes

# (query, within) -> the hits of a search over the published knowledge, best first
Neighbours = Callable[[str, EntryFilter | None], Sequence[Hit]]


def question_of(entry: Entry) -> str:
    """What a visitor would ask for ``entry``: its first phrasing worded as a question, else its query."""
    return example_of(entry) or entry.query


class RelatedQuestions:
    """Picks the related questions of an answer from the loaded ``entries``, the log and the index."""

    def __init__(
        self,
        entries: Callable[[], Sequence[Entry]],
        next_asked: NextAsked,
        neighbours: Neighbours,
        availability: Availability | None = None,
        limit: int = RELATED,
    ):
        self.entries = entries
        self.next_asked = next_asked
        self.neighbours = neighbours
        self.availability = availability or Availability()
        self.limit = limit
        # An entry's neighbours depend on the knowledge only, not on the question: searched once per loaded
        # knowledge (a search costs as much as the turn's own), with the entries by id.
        self._lock = threading.Lock()
        self._snapshot: Sequence[Entry] | None = None
        self._by_id: dict[str, Entry] = {}
        self._near: dict[tuple[str, str], tuple[str, ...]] = {}

    def _loaded(self) -> dict[str, Entry]:
        """The loaded entries by id; a new knowledge forgets the neighbours searched in the old one."""
        entries = self.entries()
        with self._lock:
            if entries is not self._snapshot:
                self._snapshot, self._by_id, self._near = entries, {e.id: e for e in entries}, {}
            return self._by_id

    def _nearest(self, entry: Entry, within: EntryFilter | None) -> tuple[str, ...]:
        """The ids of the entries nearest ``entry`` in the index (within the filter), best first."""
        key = (entry.id, json.dumps(within.to_dict(), sort_keys=True) if within else "")
        with self._lock:
            known = self._near.get(key)
        if known is None:
            known = tuple(h.entry.id for h in self.neighbours(entry.query, within))
            with self._lock:
                if len(self._near) >= CACHED:
                    self._near.clear()
                self._near[key] = known
        return known

    def of(self, answer: Answer) -> tuple[Option, ...]:
        """The related questions of a finished answer from the knowledge (none for any other decision)."""
        if not answer.finished or answer.decision is not Decision.ANSWER or not answer.hits:
            return ()
        by_id = self._loaded()
        answered = by_id.get(answer.hits[0].entry.id)
        if answered is None:  # answered by another knowledge base (routed), or removed since
            return ()
        used = {h.entry.id for h in answer.hits}
        return self.for_entry(answered, by_id, used, answer.within)

    def for_entry(
        self,
        answered: Entry,
        by_id: dict[str, Entry],
        used: Collection[str] = (),
        within: EntryFilter | None = None,
    ) -> tuple[Option, ...]:
        """Up to ``limit`` entries to ask after ``answered``: its ``related``, asked next, then neighbours."""
        skip = {*used, answered.id}
        picked: dict[str, Entry] = {}

        def take(ids: Iterable[str]) -> None:
            for entry_id in ids:
                if len(picked) >= self.limit:
                    return
                entry = by_id.get(entry_id)
                if entry is None or entry.id in skip or entry.id in picked:
                    continue
                if (within is not None and not within.admits(entry)) or not self.availability.answers(entry):
                    continue
                picked[entry.id] = entry

        take(answered.related)
        take(self.next_asked.after(answered.id))
        if len(picked) < self.limit:
            take(self._nearest(answered, within))
        return tuple(Option(e.id, question_of(e)) for e in picked.values())

    def added(self, answer: Answer) -> Answer:
        """``answer`` with its related questions (unchanged while unfinished)."""
        if not answer.finished:
            return answer
        related = self.of(answer)
        return dataclasses.replace(answer, related=related) if related else answer
