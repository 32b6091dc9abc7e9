"""The search layer's two roles and the contract every backend keeps (tests/search/test_searcher_contract.py).

**Query role** (:class:`Retriever`): ``search(query, top_k, within) -> list[Hit]``. Every backend (tantivy, FAISS,
Elasticsearch, hybrid, passages) guarantees:

- hits best first, never more than ``top_k``, [] for an empty or word-less query;
- ``relevance`` in [0, 1] whatever the question, what the hit's ``signals`` say it is, never rising down the
  ranking; an entry's exact question gives it a relevance at least that of any other entry;
- with ``within``, only the entries it admits, in the order of the unfiltered ranking (:func:`top_within`);
- ``system`` names the thresholds that apply to the relevance (a key of ``retrieval.thresholds``);
- no per-search state on the searcher: what answered a search travels in :class:`Found`, which
  :class:`bot.search.serving.ServedSearcher.find` builds (the system that answered, notices, a failure). A turn
  searches only through that one call (``TurnSearch.find`` / ``_search``), the rewrite and HyDE rungs included.

**Storage role** (:class:`IndexStore`), what the knowledge index's workers use:

- ``sync(entries)`` makes the index hold exactly ``entries``, touching only what changed, and says what it did
  (:class:`SyncReport`); ``upsert``/``remove`` edit by id (unknown ids ignored); ``reset`` drops everything;
- ``signature()`` is what the layout depends on besides the entries: a change means a rebuild;
- ``indexed_hashes()`` is id -> content hash of what the index holds, None when no usable index exists;
- ``check()`` is why the index as it is stored cannot serve (missing, built with other settings, unreadable or not
  matching its checksum), None when it can: None after a sync, a reason for a missing or damaged index;
- a reopened index (same path) serves what the last sync left, and syncing it again changes nothing.

:class:`Searcher` is the base that implements both roles for a backend (it does the diffing for ``sync``).
:class:`Composite` is the base of a retriever over other searchers' indexes (hybrid, passages): it stores nothing
and forwards no storage call; the knowledge index syncs its ``leaves()``, each an :class:`IndexStore`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search.progress import announce

Progress = Callable[[int], None]
T = TypeVar("T")
FILTER_DEPTH = 4  # a filtered search asks the engine for this many times more results each round


@dataclass(frozen=True)
class Passage:
    """A part of a long entry's document that a search matched: its number, span ``[start, end)`` and relevance."""

    index: int
    start: int
    end: int
    relevance: float = 0.0


@dataclass(frozen=True)
class Hit:
    """One search result.

    ``relevance`` in [0, 1] is what thresholds compare; its meaning does not depend on the knowledge's size
    (docs/retrieval-and-decision.md "Scores and thresholds"). ``score`` is the engine's own score (BM25, cosine), ``signals`` the named
    parts behind the relevance (coverage, question/passage cosine, BM25), ``subquestion`` the part of a
    split message this hit was found for, and ``matched_question`` the entry's alternative question (one of
    ``entry.questions``) that matched better than its ``query``, if one did. ``passages`` are the parts of a long
    document that matched, best first (empty for a document searched whole: docs/retrieval-and-decision.md "Long documents").
    """

    entry: Entry
    relevance: float
    score: float
    searcher: str
    signals: dict[str, float] = field(default_factory=dict, compare=False)
    subquestion: str = field(default="", compare=False)
    matched_question: str = field(default="", compare=False)
    passages: tuple[Passage, ...] = field(default=(), compare=False)


def rescored(hit: Hit, relevance: float, signals: dict[str, float] | None = None) -> Hit:
    """``hit`` with another relevance (and signals): ``dataclasses.replace``'s result, built directly (this runs for
    every candidate of every search, where ``replace`` cost a tenth of a sparse search)."""
    return Hit(
        hit.entry,
        relevance,
        hit.score,
        hit.searcher,
        hit.signals if signals is None else signals,
        hit.subquestion,
        hit.matched_question,
        hit.passages,
    )


@dataclass(frozen=True)
class SyncReport:
    """What a sync changed in an index."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    reason: str = ""

    @property
    def changed(self) -> bool:
        """True when the index content differs from before the sync."""
        return bool(self.added or self.updated or self.removed or self.rebuilt)

    @classmethod
    def of_all(cls, reports: dict[str, SyncReport], seconds: float) -> SyncReport:
        """One report for the syncs of several indexes holding the same entries (a mode's leaves, by name): the
        most any changed, each reason named by its index."""
        if len(reports) == 1:
            return next(iter(reports.values()))
        values = reports.values()
        return cls(
            added=max((r.added for r in values), default=0),
            updated=max((r.updated for r in values), default=0),
            removed=max((r.removed for r in values), default=0),
            rebuilt=any(r.rebuilt for r in values),
            seconds=seconds,
            reason="; ".join(f"{name}: {r.reason}" for name, r in reports.items() if r.reason),
        )


@dataclass(frozen=True)
class Found:
    """What one search of a served mode returned, and what answered it.

    ``system`` names the thresholds that apply to the hits' relevance (the searcher that answered, which is another
    mode's while the mode's own index builds or heals); ``notices`` are what the user is told about that (a stand-in,
    Elasticsearch down); ``failed`` is True when the search raised (the index is being healed: search again for
    what serves now). Built per search, never stored on a searcher: two turns cannot see each other's state.
    """

    hits: tuple[Hit, ...]
    system: str
    searcher: str
    notices: tuple[str, ...] = ()
    failed: bool = False
    standing_in: bool = False  # another mode's searcher answered (the mode's own index builds or heals)


@runtime_checkable
class Retriever(Protocol):
    """The query role: ranks the knowledge for a query. Holds no per-search state."""

    name: str
    # The retrieval system whose thresholds apply to the relevance of the hits ("sparse", "dense-e5", ...).
    system: str

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` hits for ``query`` (among the entries ``within`` admits), best first."""
        ...


@runtime_checkable
class IndexStore(Protocol):
    """The storage role: keeps an index in step with the entries; what the knowledge index's workers use."""

    name: str

    def sync(self, entries: Sequence[Entry], progress: Progress | None = None) -> SyncReport:
        """Make the index hold exactly ``entries``, touching only what changed."""
        ...

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Add new entries or replace entries with the same id."""
        ...

    def remove(self, ids: Iterable[str]) -> None:
        """Remove entries by id; unknown ids are ignored."""
        ...

    def reset(self, reason: str) -> None:
        """Drop the whole index so the next sync rebuilds it."""
        ...

    def signature(self) -> str:
        """What the index's layout depends on besides the entries; a change means a rebuild."""
        ...

    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash of what the index holds now, or None when no usable index exists."""
        ...

    def check(self) -> str | None:
        """Why the index as it is on disk cannot serve, None when it can."""
        ...


class Searcher(ABC):
    """Base of every searcher, in both roles (:class:`Retriever` and :class:`IndexStore`; the contract is the
    module's docstring): subclasses store and score; the base does the diffing for sync."""

    name: str = "searcher"
    # The retrieval system whose thresholds apply to this searcher's relevance ("sparse", "dense-e5", ...).
    system: str = "sparse"
    # Fixed when the searcher is built: why it stands in for the configured engine (e.g. Elasticsearch unreachable).
    notice: str | None = None
    # Why the last look at the on-disk index found nothing usable; backends set it when they open it (read: check()).
    _stale: str = "no index yet"

    @property
    def partial(self) -> bool:
        """True while a first build has made the index searchable but not complete (its relevance is not yet the
        calibrated one: it serves as a stand-in for itself)."""
        return False

    @abstractmethod
    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` hits for ``query``, best first; an empty or word-less query gives []. With ``within``,
        only entries it admits, in the unfiltered ranking's order (:func:`top_within`).
        """

    @abstractmethod
    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Add new entries or replace entries with the same id."""

    @abstractmethod
    def remove(self, ids: Iterable[str]) -> None:
        """Remove entries by id; unknown ids are ignored."""

    @abstractmethod
    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash of what the index holds now, or None when no valid index exists."""

    def reset(self, reason: str) -> None:
        """Drop the whole index so the next sync rebuilds it (used when its signature changed)."""
        self.remove(list((self.indexed_hashes() or {}).keys()))

    def signature(self) -> str:
        """What the index's layout depends on besides the entries (tokenizer, fields, boosts)."""
        return ""

    def check(self) -> str | None:
        """Why the index as it is on disk cannot serve (missing, built with other settings, unreadable), None when
        it can."""
        return None if self.indexed_hashes() is not None else self._stale

    def leaves(self) -> list[Searcher]:
        """The searchers that hold an index: itself, or the parts of a fusion."""
        return [self]

    def components(self) -> list[str]:
        """Names of the searchers whose scores this one reports (itself, or the parts of a fusion)."""
        return [s.name for s in self.leaves()]

    def sync(self, entries: Sequence[Entry], progress: Progress | None = None) -> SyncReport:
        """Make the index hold exactly ``entries``, touching only what changed."""
        start = time.perf_counter()
        current = self.indexed_hashes()
        rebuilt = current is None
        reason = (self.check() or "no index yet") if rebuilt else ""
        if current is None:
            self.reset(reason)
            current = {}
        wanted = {e.id: e for e in entries}
        stale = [i for i in current if i not in wanted]
        fresh = [e for e in entries if current.get(e.id) != e.content_hash]
        updated = sum(1 for e in fresh if e.id in current)
        if stale:
            self.remove(stale)
        if fresh:
            announce(progress, len(fresh))
            self.upsert(fresh, progress)
        return SyncReport(
            added=len(fresh) - updated,
            updated=updated,
            removed=len(stale),
            rebuilt=rebuilt,
            seconds=time.perf_counter() - start,
            reason=reason,
        )


class Composite(ABC):
    """A retriever over other searchers' indexes (hybrid fusion, long documents' passages): the query role only.

    It stores nothing: the knowledge index keeps each of its :meth:`leaves` in step with the entries, and a
    composite's own answers to "can it serve" are its leaves'. Two composites may share a leaf (hybrid and sparse
    share the sparse index), which is then synced once.
    """

    name: str
    system: str
    notice: str | None = None  # a composite is never a stand-in: its leaves carry any notice they were built with

    @abstractmethod
    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` hits for ``query`` (among the entries ``within`` admits), best first."""

    @abstractmethod
    def leaves(self) -> list[Searcher]:
        """The searchers whose indexes this one reads."""

    def components(self) -> list[str]:
        """Names of the searchers whose scores this one reports."""
        return [s.name for s in self.leaves()]

    def check(self) -> str | None:
        """Why one of its indexes cannot serve (named by its searcher), or None."""
        leaves = self.leaves()
        reasons = ((leaf.name, leaf.check()) for leaf in leaves)
        return next((why if len(leaves) == 1 else f"{name}: {why}" for name, why in reasons if why is not None), None)


ModeSearcher = Searcher | Composite  # what a retrieval mode searches with: a backend, or a composite over some


def top_within(
    fetch: Callable[[int], list[T]], entry_of: Callable[[T], Entry], within: EntryFilter | None, top_k: int, total: int
) -> list[T]:
    """The first ``top_k`` of an engine's ranked results whose entries ``within`` admits.

    ``fetch(n)`` returns the engine's best ``n`` results in its order; ``total`` is how many it holds. Unfiltered,
    one fetch of ``top_k``. Filtered, the depth grows by ``FILTER_DEPTH`` until ``top_k`` are admitted or the engine
    has nothing more, so the admitted results are exactly the top of the engine's ranking restricted to the filter
    (scores that do not depend on the other results: BM25, cosines), before any rank-based relevance is applied.
    """
    if within is None:
        return fetch(top_k)
    depth = min(max(top_k * FILTER_DEPTH, top_k), max(total, top_k))
    while True:
        found = fetch(depth)
        admitted = [r for r in found if within.admits(entry_of(r))]
        if len(admitted) >= top_k or len(found) < depth or depth >= total:
            return admitted[:top_k]
        depth = min(depth * FILTER_DEPTH, total)


@runtime_checkable
class VectorIndex(Protocol):
    """An index that holds vectors (the dense searchers): what the negative examples measure closeness with."""

    encoder: Any

    def query_vector(self, query: str) -> Any:
        """The question's vector, or None when it has none."""
        ...


@runtime_checkable
class DenseRetriever(Protocol):
    """The dense half a hybrid fuses (FAISS or the search cluster): hits by vectors, and the cosines of given entries
    from the vectors it stores (no re-encoding), mapped to relevance the same way whatever the store."""

    name: str
    encoder: Any

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` hits by dense relevance."""
        ...

    def query_vector(self, query: str) -> Any:
        """The question's vector, or None when it has none."""
        ...

    def similarities(self, vector: Any, entry_ids: Iterable[str]) -> dict[str, Any]:
        """entry id -> its cosines (bot.search.dense_scoring.Cosines) for the given entries; unknown ids left out."""
        ...

    def hit(self, entry: Entry, cosines: Any) -> Hit:
        """A hit for ``entry`` from its cosines."""
        ...


def dense_leaf(searcher: ModeSearcher) -> VectorIndex | None:
    """The index of ``searcher`` that holds vectors (a dense mode's, a hybrid's dense half, under passages or a
    served stand-in), None for a sparse one."""
    return next((leaf for leaf in searcher.leaves() if isinstance(leaf, VectorIndex)), None)
