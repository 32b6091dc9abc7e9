"""How the knowledge index writes: each index (a mode's leaf) synced on its own worker under its own lock, checked
and rebuilt first when a search failed on it; a mode's composite searcher built over its leaves.

A mixin of :class:`bot.search.index.KnowledgeIndex` (its state is declared here and set there), kept apart so that
the index module holds loading and serving and this one the writing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from bot.errors import ConfigError, KnowledgeError
from bot.knowledge.entries import Entry
from bot.search.background import Worker
from bot.search.base import IndexStore, ModeSearcher, Progress, Searcher, SyncReport
from bot.search.integrity import index_damage
from bot.search.passages import Passages, PassageSearcher
from bot.search.progress import BuildProgress

log = logging.getLogger("bot.search.index")  # one logger for the index, whichever module of it writes


class IndexSyncing:
    """The writing half of the knowledge index: per-leaf syncs, their workers, locks and progress."""

    _lock: threading.RLock
    _loaded: bool
    _factories: dict[str, Callable[[], ModeSearcher]]
    _searchers: dict[str, ModeSearcher]
    _writing: dict[int, threading.RLock]
    _broken: dict[int, str]
    _ready: set[int]
    _building: dict[int, BuildProgress]
    _workers: dict[int, Worker]
    _indexing: dict[str, int]
    passages: Passages | None
    units: list[Entry]
    error: KnowledgeError | None

    def _leaf_lock(self, leaf: IndexStore) -> threading.RLock:
        with self._lock:
            return self._writing.setdefault(id(leaf), threading.RLock())

    def _sync_leaf(self, leaf: Searcher, progress: Progress | None = None) -> SyncReport:
        """Bring one index in step with the entries (checked and rebuilt first when a search failed on it)."""
        key = id(leaf)
        with self._leaf_lock(leaf):
            damage = self._broken.get(key)
            if not self._loaded:
                if damage is None:  # nothing to sync against: what is on disk serves
                    with self._lock:
                        self._ready.add(key)
                return SyncReport()
            if damage is not None:
                problem = index_damage(leaf, self.units)
                if problem:
                    log.warning(
                        "%s index is damaged (%s; a search failed with %s); rebuilding it from the knowledge",
                        leaf.name,
                        problem,
                        damage,
                    )
                    leaf.reset(f"damaged ({problem})")
            tracked = BuildProgress(leaf.name, relay=progress)
            with self._lock:
                self._building[key] = tracked
            try:
                report = leaf.sync(self.units, tracked)
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                if self._broken.get(key) == damage:
                    self._broken.pop(key, None)
                self._ready.add(key)
        if report.changed:
            log.info(
                "%s index synced: +%d ~%d -%d%s in %.1f s",
                leaf.name,
                report.added,
                report.updated,
                report.removed,
                f" ({report.reason})" if report.reason else "",
                report.seconds,
            )
        return report

    def _schedule(self, leaf: Searcher) -> Future:
        """Sync ``leaf`` on its own worker (merged with a sync that still waits there)."""
        with self._lock:
            worker = self._workers.setdefault(id(leaf), Worker(leaf.name))

        def job() -> SyncReport:
            try:
                return self._sync_leaf(leaf, lambda n: self._advance(leaf.name, n))
            except Exception:
                log.exception("%s index not synced; still serving its last good snapshot", leaf.name)
                raise
            finally:
                with self._lock:
                    self._indexing.pop(leaf.name, None)

        return worker.submit("sync", job)

    def _advance(self, name: str, done: int) -> None:
        with self._lock:
            self._indexing[name] = self._indexing.get(name, 0) + done

    def indexing(self) -> dict[str, int]:
        """Entries indexed so far by each background sync running now (index name -> count)."""
        with self._lock:
            return dict(self._indexing)

    def sync(self, mode: str, progress: Progress | None = None, rebuild: bool = False) -> SyncReport:
        """Build ``mode``'s searcher if needed and bring it in step with the entries (from scratch with ``rebuild``).

        Runs in the calling thread, in either way of running (the CLI's ``index`` command).
        """
        with self._lock:
            if not self._loaded:
                # Syncing now would make the on-disk index match an empty list and lose the last good one.
                raise self.error or ConfigError("the knowledge was not loaded yet; call load() first")
            searcher = self._searchers.get(mode) or self._create(mode)
            self._searchers[mode] = searcher
        start = time.perf_counter()
        leaves = searcher.leaves()
        locks = [self._leaf_lock(leaf) for leaf in leaves]
        for lock in locks:
            lock.acquire()
        try:
            reports = {}
            for leaf in leaves:  # a composite (hybrid, passages) stores nothing: its indexes are synced one by one
                if rebuild:
                    leaf.reset("rebuild requested")
                reports[leaf.name] = leaf.sync(self.units, progress)
            report = SyncReport.of_all(reports, time.perf_counter() - start)
            if rebuild:
                report = dataclasses.replace(report, rebuilt=True, reason="rebuild requested")
            with self._lock:
                self._ready.update(id(leaf) for leaf in leaves)
        finally:
            for lock in reversed(locks):
                lock.release()
        return report

    def _create(self, mode: str) -> ModeSearcher:
        if mode not in self._factories:
            raise ConfigError(f"unknown retrieval mode {mode!r}; choose one of: {', '.join(self._factories)}")
        searcher = self._factories[mode]()
        return PassageSearcher(searcher, self.passages) if self.passages is not None else searcher
