"""Type-ahead (输入联想): the knowledge's questions that contain what a visitor is typing, from an index built with
the knowledge, never a scan of every question per keystroke.

Every phrasing of every entry (its ``query`` and ``questions``) is kept in its *match form*: NFKC, case-folded,
without spaces, punctuation or control characters, so "怎么 添加知识？" finds "怎么添加知识?". A
:class:`TypeaheadIndex` holds them in rank order (entries asked more often first, in coarse steps of the log's
counts, then shorter ones) with two structures over them:

- the forms sorted, so those *starting* with the typed text are one range found by bisection;
- a bigram inverted index (every two adjacent characters -> the ascending ranks of the forms holding them, one
  CSR array), so those *containing* it are the intersection of its bigrams' posting lists, rarest first, then
  checked with ``in`` (holding every bigram is not holding the text) only until enough are found.

Forms that start with the text come first, then those that contain it; the text as typed before the same text with
a synonym group's word replaced by another of its words (bot/search/synonyms.py); one question per entry. Drafts,
entries outside their validity dates (bot/knowledge/validity.py) and entries outside a category filter are left out
by boolean masks over the ranks. :class:`Typeahead` keeps the index in step with the knowledge: when the loaded
entries change (or the log's counts, at most every :data:`COUNTS_SECONDS`) it builds a new one, in the background
in a server, and serves the previous one meanwhile.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np

from bot.config.serving import TypeaheadSettings
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.knowledge.validity import Availability, answers_on
from bot.search.background import Worker
from bot.search.script import simplified
from bot.search.synonyms import SynonymGroups, Synonyms

log = logging.getLogger(__name__)

COUNTS_SECONDS = 600.0  # the log's counts reorder the questions at most this often (a rebuild in the background)
MAX_VARIANTS = 8  # spellings of the text tried with synonyms substituted, the text itself not counted
MAX_FILTERS = 32  # category filters whose masks are kept
_BIGRAM_SHIFT = 21  # a code point fits in 21 bits: two of them make one int64 key
_CHUNK = 64  # candidates checked per slice of a posting list


class _Dropped(dict[int, int | None]):
    """``str.translate``'s table: None (dropped) for spaces, punctuation and control characters, filled as met."""

    def __missing__(self, code: int) -> int | None:
        kept = None if unicodedata.category(chr(code))[0] in "PZC" else code
        self[code] = kept
        return kept


_DROPPED = _Dropped()


def match_form(text: str) -> str:
    """``text`` as type-ahead compares it: NFKC, case-folded, without spaces, punctuation or control characters,
    traditional Chinese as simplified."""
    if not unicodedata.is_normalized("NFKC", text):  # most text already is: the check is cheaper than the work
        text = unicodedata.normalize("NFKC", text)
    return simplified(text.casefold().translate(_DROPPED))


@dataclass(frozen=True)
class Suggestion:
    """A question offered while the visitor types, and the entry it is a phrasing of."""

    question: str
    entry_id: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form the widget's endpoint returns."""
        return {"question": self.question, "entry": self.entry_id}


def _code_points(form: str) -> np.ndarray:
    return np.frombuffer(form.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)


def _bigrams(points: np.ndarray) -> np.ndarray:
    return (points[:-1] << _BIGRAM_SHIFT) | points[1:]


class TypeaheadIndex:
    """The published entries' phrasings in rank order, with a sorted copy (prefixes) and a bigram index (contains).

    Immutable once built, but for its caches of masks; readers need no lock.
    """

    def __init__(self, entries: Sequence[Entry], asked: Mapping[str, int] | None = None):
        self.asked = dict(asked or {})  # the log's counts it was ranked by
        rows: list[tuple[int, int, str, int, str]] = []
        for number, entry in enumerate(entries):
            if entry.draft:  # never answers a visitor, whatever the day
                continue
            # Coarse steps (1, 2-3, 4-7... asks): a popular entry goes first, a count of one more reorders nothing.
            step = -int(math.log2(1 + max(0, self.asked.get(entry.id, 0))))
            seen: set[str] = set()
            for question in entry.phrasings:
                form = match_form(question)
                if len(form) >= 2 and form not in seen:  # a shorter one can hold no text of two characters
                    seen.add(form)
                    rows.append((step, len(form), form, number, question.strip()))
        rows.sort()  # equal forms keep the knowledge's order
        self.entries = list(entries)
        self.forms = [r[2] for r in rows]  # by rank: a question's rank is its position here
        self.questions = [r[4] for r in rows]
        self.entry_of = np.array([r[3] for r in rows], dtype=np.int32)
        # entries whose validity dates make them answer on some days only (drafts are left out above)
        self._dated = [i for i, e in enumerate(self.entries) if e.valid_from is not None or e.valid_until is not None]
        order = sorted(range(len(rows)), key=self.forms.__getitem__)
        self.sorted_forms = [self.forms[i] for i in order]
        self.sorted_ranks = np.array(order, dtype=np.int32)
        self.keys, self.starts, self.postings = self._bigram_index(self.forms)
        self._live: tuple[date, np.ndarray] | None = None
        self._filters: dict[EntryFilter, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.forms)

    @staticmethod
    def _bigram_index(forms: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted bigram keys, where each one's postings start (one more at the end), the postings: ranks)."""
        if not forms:
            return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32)
        points = _code_points("\0".join(forms) + "\0")  # forms hold no control character: \0 separates them
        lengths = np.fromiter((len(f) + 1 for f in forms), dtype=np.int64, count=len(forms))
        ranks = np.repeat(np.arange(len(forms), dtype=np.int32), lengths)
        keys = _bigrams(points)
        inside = (points[:-1] != 0) & (points[1:] != 0)
        keys, ranks = keys[inside], ranks[:-1][inside]
        order = np.lexsort((ranks, keys))  # by key, then rank: each posting list ascending
        keys, ranks = keys[order], ranks[order]
        first = np.ones(len(keys), dtype=bool)  # a bigram twice in one form is posted once
        first[1:] = (keys[1:] != keys[:-1]) | (ranks[1:] != ranks[:-1])
        keys, ranks = keys[first], ranks[first]
        unique, starts = np.unique(keys, return_index=True)
        return unique, np.append(starts, len(keys)), ranks

    # -- masks -------------------------------------------------------------------------------------------------
    def live(self, day: date) -> np.ndarray:
        """True for each rank whose entry may answer a visitor on ``day`` (validity dates; drafts are not here)."""
        cached = self._live
        if cached is not None and cached[0] == day:
            return cached[1]
        answering = np.ones(len(self.entries), dtype=bool)
        for i in self._dated:
            answering[i] = answers_on(self.entries[i], day)
        mask = answering[self.entry_of] if len(self.entry_of) else np.zeros(0, dtype=bool)
        self._live = (day, mask)
        return mask

    def admitted(self, within: EntryFilter) -> np.ndarray:
        """True for each rank whose entry lists one of the filter's categories."""
        mask = self._filters.get(within)
        if mask is None:
            listed = np.fromiter((within.admits(e) for e in self.entries), dtype=bool, count=len(self.entries))
            mask = listed[self.entry_of] if len(self.entry_of) else np.zeros(0, dtype=bool)
            if len(self._filters) >= MAX_FILTERS:
                self._filters.clear()
            self._filters[within] = mask
        return mask

    # -- look-ups ----------------------------------------------------------------------------------------------
    def starting(self, form: str, allowed: np.ndarray) -> np.ndarray:
        """The allowed ranks whose form starts with ``form``, ascending."""
        lo = bisect_left(self.sorted_forms, form)
        hi = bisect_left(self.sorted_forms, form + "\U0010ffff", lo)
        ranks = self.sorted_ranks[lo:hi]
        return np.sort(ranks[allowed[ranks]])

    def containing(self, form: str, allowed: np.ndarray) -> np.ndarray:
        """The allowed ranks whose form holds every bigram of ``form`` (two characters or more), ascending."""
        keys = np.unique(_bigrams(_code_points(form)))
        slots = np.searchsorted(self.keys, keys)
        if not len(keys) or not len(self.keys) or np.any(slots >= len(self.keys)) or np.any(self.keys[slots] != keys):
            return np.zeros(0, dtype=np.int32)  # a bigram no question holds
        lists = sorted((self.postings[self.starts[s] : self.starts[s + 1]] for s in slots), key=len)
        found = lists[0]
        for other in lists[1:]:  # the rarest first: each step costs what is left, which only shrinks
            at = np.minimum(np.searchsorted(other, found), len(other) - 1)
            found = found[other[at] == found]
            if not len(found):
                break
        return found[allowed[found]]

    def find(self, variants: Sequence[str], allowed: np.ndarray, limit: int) -> list[Suggestion]:
        """Up to ``limit`` questions, one per entry: those starting with a variant first, then those containing one;
        within each, the first variant (the text as typed) first, then by rank."""
        picked: list[Suggestion] = []
        entries: set[int] = set()
        forms: set[str] = set()
        for prefix in (True, False):
            for form in variants:
                ranks = self.starting(form, allowed) if prefix else self.containing(form, allowed)
                for rank in _ranks(ranks):
                    text = self.forms[rank]
                    entry = int(self.entry_of[rank])
                    if entry in entries or text in forms or (not prefix and form not in text):
                        continue
                    entries.add(entry)
                    forms.add(text)
                    picked.append(Suggestion(self.questions[rank], self.entries[entry].id))
                    if len(picked) >= limit:
                        return picked
        return picked


def _ranks(ranks: np.ndarray) -> Iterator[int]:
    """The ranks as Python ints, a slice at a time (most look-ups stop within the first)."""
    for start in range(0, len(ranks), _CHUNK):
        yield from ranks[start : start + _CHUNK].tolist()


class SynonymSpellings:
    """The text's other spellings after the synonym groups: each group word in it replaced by its other words."""

    def __init__(self) -> None:
        self._groups: SynonymGroups | None = None
        self._table: list[tuple[str, tuple[str, ...]]] = []

    def _words(self, groups: SynonymGroups) -> list[tuple[str, tuple[str, ...]]]:
        if groups is not self._groups:  # the groups change when the file or the knowledge's aliases do
            table = []
            for group in groups.groups:
                forms = [f for f in dict.fromkeys(match_form(w) for w in group) if f]
                table += [(f, tuple(o for o in forms if o != f)) for f in forms if len(forms) > 1]
            table.sort(key=lambda pair: -len(pair[0]))  # the longer word first: 中山大学 before 中大
            self._table, self._groups = table, groups
        return self._table

    def of(self, form: str, groups: SynonymGroups) -> list[str]:
        """Up to :data:`MAX_VARIANTS` spellings of ``form`` other than itself."""
        if not groups:
            return []
        spellings = [form]
        taken: list[str] = []
        for word, others in self._words(groups):
            if word not in form or any(word in longer for longer in taken):
                continue
            taken.append(word)
            spellings += [s.replace(word, other) for s in spellings if word in s for other in others]
            if len(spellings) > MAX_VARIANTS:
                break
        return list(dict.fromkeys(spellings[1:]))[:MAX_VARIANTS]


class Typeahead:
    """Questions to offer as a visitor types, from an index rebuilt when the knowledge (or the log's counts) changes.

    ``entries`` returns the loaded knowledge's entries (a new list at each load); ``asked`` the log's entry counts.
    In the ``background`` (a server) a rebuild runs on its own worker while the previous index serves; the first
    build is started at once. Elsewhere a look-up builds what it needs first.
    """

    def __init__(
        self,
        settings: TypeaheadSettings,
        entries: Callable[[], Sequence[Entry]],
        synonyms: Synonyms | None = None,
        availability: Availability | None = None,
        asked: Callable[[], Mapping[str, int]] | None = None,
        background: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.settings = settings
        self.entries = entries
        self.synonyms = synonyms
        self.availability = availability or Availability()
        self.asked = asked
        self.background = background
        self.clock = clock
        self.spellings = SynonymSpellings()
        self._lock = threading.Lock()
        self._worker = Worker("typeahead")
        # The index, the entries it was built from and when the log's counts were read for it.
        self._built: tuple[TypeaheadIndex, Sequence[Entry], float] | None = None
        if background and settings.enabled:
            self._worker.submit("build", self._build)

    @property
    def enabled(self) -> bool:
        """True when questions are offered (``typeahead.enabled``)."""
        return self.settings.enabled

    def suggest(self, text: str, within: EntryFilter | None = None) -> list[Suggestion]:
        """The questions to offer for ``text`` (none when it is too short, too long, or while the first index builds)."""
        s = self.settings
        if not s.enabled or not isinstance(text, str) or len(text) > s.max_chars:
            return []
        form = match_form(text)
        if len(form) < s.min_chars:
            return []
        index = self.index()
        if index is None or not len(index):
            return []
        allowed = index.live(self.availability.today())
        if within is not None:
            allowed = allowed & index.admitted(within)
        groups = self.synonyms.current() if self.synonyms is not None else SynonymGroups()
        return index.find([form, *self.spellings.of(form, groups)], allowed, s.suggestions)

    def index(self) -> TypeaheadIndex | None:
        """The index of the knowledge as loaded now; in the background the last one built while a newer builds."""
        built, entries = self._built, self.entries()
        if built is not None:
            # a new list at each load of the knowledge (an empty one at each call before the first)
            same = built[1] is entries or not (entries or built[1])
            if same and self.clock() - built[2] < COUNTS_SECONDS:
                return built[0]
        if self.background:
            self._worker.submit("build", self._build)
            return built[0] if built is not None else None
        return self._build()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no build is scheduled or running; False when ``timeout`` passed first."""
        return self._worker.wait_idle(timeout)

    def _build(self) -> TypeaheadIndex:
        with self._lock:
            entries = self.entries()
            built = self._built
            counts_read = self.clock()
            asked = self._counts()
            if built is not None and built[1] is entries and asked == built[0].asked:
                index = built[0]  # the counts were read again and changed nothing
            else:
                started = time.perf_counter()
                index = TypeaheadIndex(entries, asked)
                index.live(self.availability.today())  # the first keystroke does not pay for the mask
                log.info("type-ahead: %d questions indexed in %.2f s", len(index), time.perf_counter() - started)
            self._built = (index, entries, counts_read)
            return index

    def _counts(self) -> dict[str, int]:
        if self.asked is None:
            return {}
        try:
            return dict(self.asked())
        except Exception:  # the log is optional: questions in their plain order rather than none
            log.exception("type-ahead: the log's counts not read; questions ranked without them")
            return {}
