"""What each retrieval mode serves now: its own searcher once its indexes are ready, else a stand-in with a notice.

:class:`ModeServer` builds a mode's searcher on first use (in a server: in the background, the cheap sparse one
first) and asks the :class:`~bot.search.writer.IndexWriter` which indexes can serve. :class:`ServedSearcher` is what
one request searches: the mode's own searcher, or another mode's (or none) while its index builds or heals, with a
visible notice; a search error marks its indexes broken and never reaches the chat.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from bot.errors import ConfigError
from bot.knowledge.filters import EntryFilter
from bot.search.background import Worker
from bot.search.base import Composite, Found, Hit, ModeSearcher, Progress, Searcher, SyncReport
from bot.search.loading import Loaded
from bot.search.passages import Passages, PassageSearcher
from bot.texts import BUILDING_ALONE, BUILDING_NOTICE, HEALING_ALONE, HEALING_NOTICE, PARTIAL_NOTICE

log = logging.getLogger("bot.search.index")  # one logger for the index, whichever of its parts writes

SPARSE = "sparse"  # the mode built first in the background: it stands in for the others until they are ready
RETRY_FAILED_BUILD = 30.0  # seconds a mode whose build failed reports that error before it is tried again


class LeafStates(Protocol):
    """What the server asks of the index writer (:class:`~bot.search.writer.IndexWriter`) about each index."""

    def open(self, leaf: Searcher) -> None: ...
    def serves(self, leaf: Searcher) -> bool: ...
    def serves_partly(self, leaf: Searcher) -> bool: ...
    def broken(self, leaf: Searcher) -> bool: ...
    def mark_broken(self, leaves: Iterable[Searcher], exc: BaseException) -> None: ...
    def retry(self, leaf: Searcher) -> None: ...
    def schedule(self, leaf: Searcher) -> object: ...
    def sync_together(
        self, leaves: list[Searcher], progress: Progress | None = None, rebuild: bool = False
    ) -> SyncReport: ...


class ModeServer:
    """One lazily built searcher per retrieval mode, and what each mode serves now."""

    def __init__(
        self,
        factories: Mapping[str, Callable[[], ModeSearcher]],
        writer: LeafStates,
        knowledge: Callable[[], Loaded | None],
        background: bool = False,
        passages: Passages | None = None,
    ):
        self.factories = dict(factories)
        self.writer = writer
        self.knowledge = knowledge  # the last good read of the folder (None: not read yet)
        self.background = background
        self.passages = passages  # long documents are searched as passages (PassageSearcher over each mode's)
        self.builder = Worker("build")
        self._searchers: dict[str, ModeSearcher] = {}
        self._failed: dict[str, tuple[BaseException, float]] = {}  # mode -> why its build failed, when
        self._lock = threading.RLock()

    def leaves(self) -> list[Searcher]:
        """The indexes of the searchers built so far, each once (a hybrid mode shares the sparse and dense ones)."""
        with self._lock:
            found = [leaf for s in self._searchers.values() for leaf in s.leaves()]
        return list(dict.fromkeys(found))

    def searcher(self, mode: str) -> ModeSearcher:
        """The searcher for ``mode``, built and synced on first use.

        In the background mode the build is scheduled and a stand-in serves until it is ready; before any knowledge was
        read, the index is opened as it is on disk.
        """
        if mode not in self.factories:
            raise ConfigError(f"unknown retrieval mode {mode!r}; choose one of: {', '.join(self.factories)}")
        if not self.background:
            with self._lock:
                if mode not in self._searchers:
                    if self.knowledge() is not None:
                        self.sync(mode)
                    else:
                        self._searchers[mode] = self._create(mode)
                return self._searchers[mode]
        if self.knowledge() is None and mode not in self._searchers:
            self._build(mode)  # nothing to sync against: open what is on disk, now
        with self._lock:
            failed = self._failed.get(mode)
            if failed is not None and mode not in self._searchers:
                if time.monotonic() - failed[1] < RETRY_FAILED_BUILD:
                    raise failed[0]
                self._failed.pop(mode, None)
            own = self._searchers.get(mode)
            for leaf in own.leaves() if own is not None else []:
                self.writer.retry(leaf)  # a heal that failed (e.g. its backend was down) is tried again in time
            if mode not in self._searchers:
                if mode != SPARSE and SPARSE in self.factories and SPARSE not in self._searchers:
                    # the cheap index first: it answers (with a notice) while the mode's own index builds
                    self.builder.submit(SPARSE, lambda: self._build(SPARSE))
                self.builder.submit(mode, lambda: self._build(mode))
        return self._served(mode)

    def served(self, mode: str) -> ServedSearcher:
        """What ``mode`` serves now, wrapped so that :meth:`ServedSearcher.find` reports what answered.

        Scripts and the CLI get the mode's own searcher, whose errors are raised.
        """
        searcher = self.searcher(mode)
        return searcher if isinstance(searcher, ServedSearcher) else ServedSearcher(mode, searcher)

    def built(self, mode: str) -> ModeSearcher | None:
        """``mode``'s searcher when it was built (or is being built in the background), else None.

        It never builds: status pages call it.
        """
        if not self.background:
            return self._searchers.get(mode)
        if mode not in self._searchers and not self.builder.busy(mode):
            return None
        return self._served(mode)

    def wait_ready(self, mode: str, timeout: float) -> bool:
        """Wait until ``mode``'s own indexes serve (scheduling its build); False when ``timeout`` passed first."""
        self.searcher(mode)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                own = self._searchers.get(mode)
                if own is not None and self._serves(own):
                    return True
                if mode in self._failed:
                    return False
            time.sleep(0.02)
        return False

    def sync(self, mode: str, progress: Progress | None = None, rebuild: bool = False) -> SyncReport:
        """Build ``mode``'s searcher if needed and sync its indexes in the calling thread (the CLI's ``index``)."""
        with self._lock:
            searcher = self._searchers.get(mode) or self._create(mode)
            self._searchers[mode] = searcher
        return self.writer.sync_together(searcher.leaves(), progress, rebuild)

    def _create(self, mode: str) -> ModeSearcher:
        if mode not in self.factories:
            raise ConfigError(f"unknown retrieval mode {mode!r}; choose one of: {', '.join(self.factories)}")
        searcher = self.factories[mode]()
        return PassageSearcher(searcher, self.passages) if self.passages is not None else searcher

    def _build(self, mode: str) -> None:
        """Create ``mode``'s searcher, serve what its indexes hold on disk, and schedule their syncs."""
        try:
            searcher = self._searchers.get(mode) or self._create(mode)
        except Exception as exc:
            log.error("the %s index cannot be built: %s", mode, exc)
            with self._lock:
                self._failed[mode] = (exc, time.monotonic())
            return
        with self._lock:
            self._searchers[mode] = searcher
        for leaf in searcher.leaves():
            self.writer.open(leaf)
        if self.knowledge() is not None:
            for leaf in searcher.leaves():
                self.writer.schedule(leaf)

    def _serves(self, searcher: ModeSearcher) -> bool:
        return all(self.writer.serves(leaf) for leaf in searcher.leaves())

    def _served(self, mode: str) -> ServedSearcher:
        """``mode``'s own searcher when its indexes are ready, else a stand-in with a notice.

        Part-way through a first build the mode stands in for itself (with a stand-in's cutoffs); else the first ready
        mode answers.
        """
        with self._lock:
            own = self._searchers.get(mode)
            if own is not None and self._serves(own):
                return ServedSearcher(mode, own, None, self._heal)
            if own is not None and all(self.writer.serves_partly(leaf) for leaf in own.leaves()):
                return ServedSearcher(mode, own, PARTIAL_NOTICE, self._heal)
            healing = own is not None and any(self.writer.broken(leaf) for leaf in own.leaves())
            other = next(
                (m for m in self.factories if m != mode and m in self._searchers and self._serves(self._searchers[m])),
                None,
            )
            stand_in = self._searchers[other] if other is not None else None
        if stand_in is None:
            return ServedSearcher(mode, None, HEALING_ALONE if healing else BUILDING_ALONE, self._heal)
        notice = (HEALING_NOTICE if healing else BUILDING_NOTICE).format(mode=other)
        return ServedSearcher(mode, stand_in, notice, self._heal)

    def _heal(self, searcher: ModeSearcher | None, exc: BaseException) -> None:
        """A search failed on ``searcher``: its indexes stop serving and are checked (and rebuilt) in the background."""
        if searcher is not None:
            self.writer.mark_broken(self._suspects(searcher), exc)

    def _suspects(self, searcher: ModeSearcher) -> list[Searcher]:
        """The indexes of ``searcher`` a failed search puts in doubt: all but those that serve another mode on their
        own and check fine (the sparse index a dense mode reads words from keeps standing in for it)."""
        leaves = searcher.leaves()
        with self._lock:
            alone = {s.leaves()[0] for s in self._searchers.values() if s is not searcher and len(s.leaves()) == 1}
        spared = [leaf for leaf in leaves if leaf in alone and self.writer.serves(leaf) and leaf.check() is None]
        return [leaf for leaf in leaves if leaf not in spared] or leaves


class ServedSearcher(Composite):
    """What a mode serves now: its own searcher, or a stand-in (another mode's searcher, or none) with a notice.

    Resolved once per request and never changed after: :meth:`find` reports each search's facts (the system whose
    thresholds apply, the notices, a failure) in a :class:`Found`. A search error is reported through ``on_error``
    (which schedules the healing) and answered with no hits.
    """

    def __init__(
        self,
        mode: str,
        target: ModeSearcher | None,
        notice: str | None = None,
        on_error: Callable[[ModeSearcher, BaseException], None] | None = None,
    ):
        self.mode, self.target, self.notice, self._on_error = mode, target, notice, on_error
        self.name = target.name if target is not None else "none"
        self.system = target.system if target is not None else "sparse"

    @property
    def standing_in(self) -> bool:
        """True when this is not the mode's own searcher (building, healing or missing)."""
        return self.notice is not None

    def notices(self) -> tuple[str, ...]:
        """The stand-in notice and those its indexes were built with (e.g. Elasticsearch down), once each."""
        built = [self.target, *self.leaves()] if self.target is not None else []
        found = [self.notice, *(s.notice for s in built)]
        return tuple(n for n in dict.fromkeys(found) if n)

    def find(self, query: str, top_k: int, within: EntryFilter | None = None) -> Found:
        """The target's hits and what answered them; no hits and ``failed`` (healing scheduled) when it raised."""
        if self.target is None:
            return Found((), self.system, self.name, self.notices(), standing_in=self.standing_in)
        try:
            hits = self.target.search(query, top_k, within)
        except (KeyboardInterrupt, SystemExit, ConfigError):
            raise
        except BaseException as exc:
            if self._on_error is None:  # nothing heals it (scripts, the CLI): the caller sees the error
                raise
            log.error(
                "search failed in mode %s (%s): %s; healing the index in the background",
                self.mode,
                type(exc).__name__,
                exc,
            )
            self._on_error(self.target, exc)
            return Found(
                (), self.system, self.name, (*self.notices(), HEALING_ALONE), failed=True, standing_in=self.standing_in
            )
        return Found(tuple(hits), self.system, self.name, self.notices(), standing_in=self.standing_in)

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The hits of :meth:`find` (for callers that only rank, e.g. the linter)."""
        return list(self.find(query, top_k, within).hits)

    def leaves(self) -> list[Searcher]:
        """The target's leaves (their notices show too)."""
        return self.target.leaves() if self.target is not None else []

    def check(self) -> str | None:
        """The target's (no searcher: none can serve)."""
        return self.target.check() if self.target is not None else "no searcher"
