"""How the knowledge index writes: each on-disk index synced on its own worker under its own lock.

An index (a mode's leaf) a search failed on is checked, and rebuilt when damaged, before its next sync.

:class:`IndexWriter` keeps one :class:`LeafState` per index (tantivy, FAISS, cluster vectors...). It reads the
knowledge it writes from ``knowledge()`` when a sync starts, so ten saves in a row cost one or two syncs, not ten;
before any knowledge was read it writes nothing (what is on disk serves).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

from bot.errors import ConfigError
from bot.search.background import Worker
from bot.search.base import Progress, Searcher, SyncReport
from bot.search.integrity import index_damage
from bot.search.loading import Loaded
from bot.search.progress import BuildProgress, Snapshot

log = logging.getLogger("bot.search.index")  # one logger for the index, whichever of its parts writes

RETRY_BROKEN = 30.0  # seconds before a heal that failed (e.g. its backend was down) is tried again


@dataclass
class LeafState:
    """One on-disk index as the writer knows it; owned by :class:`IndexWriter`, changed under its lock."""

    worker: Worker  # its background jobs, one at a time
    lock: threading.RLock = field(default_factory=threading.RLock)  # held while this index is written
    progress: BuildProgress | None = None  # how far its running sync has got
    indexed: int | None = None  # entries its running background sync has indexed so far
    opened: bool = False  # its files were checked once, when its mode was first built
    ready: bool = False  # holds a usable index: the last good snapshot serves
    broken: str | None = None  # why a search failed on it, until re-checked
    retry_at: float = 0.0  # when a failed heal may be tried again


class IndexWriter:
    """Syncs each index with the knowledge, inline or on its worker, and knows which ones can serve."""

    def __init__(self, knowledge: Callable[[], Loaded | None]):
        self.knowledge = knowledge  # the last good read of the folder (None: not read yet)
        self._leaves: dict[Searcher, LeafState] = {}
        self._lock = threading.Lock()

    def _state(self, leaf: Searcher) -> LeafState:
        with self._lock:
            state = self._leaves.get(leaf)
            if state is None:
                state = self._leaves[leaf] = LeafState(worker=Worker(leaf.name))
            return state

    def lock(self, leaf: Searcher) -> threading.RLock:
        """The lock held while ``leaf`` is written."""
        return self._state(leaf).lock

    def open(self, leaf: Searcher) -> None:
        """The first time ``leaf`` is seen: what its files hold on disk serves until its sync is done."""
        state = self._state(leaf)
        with self._lock:
            if state.opened:
                return
            state.opened = True
        try:
            usable = leaf.indexed_hashes() is not None  # opens (and checks) the index on disk
        except Exception as exc:
            log.warning("%s index cannot be opened (%s); it will be rebuilt", leaf.name, exc)
            usable = False
        if usable:
            with self._lock:
                state.ready = True

    def serves(self, leaf: Searcher) -> bool:
        """True when ``leaf`` holds a usable index and no search has failed on it since."""
        with self._lock:
            state = self._leaves.get(leaf)
            return state is not None and state.ready and state.broken is None

    def serves_partly(self, leaf: Searcher) -> bool:
        """True when ``leaf`` is ready or searchable part-way through its first build, and not broken."""
        with self._lock:
            state = self._leaves.get(leaf)
            broken = state is not None and state.broken is not None
            ready = state is not None and state.ready
        return (ready or leaf.partial) and not broken

    def broken(self, leaf: Searcher) -> bool:
        """True when a search failed on ``leaf`` and it was not checked (and rebuilt) since."""
        with self._lock:
            state = self._leaves.get(leaf)
            return state is not None and state.broken is not None

    def mark_broken(self, leaves: Iterable[Searcher], exc: BaseException) -> None:
        """A search failed on these indexes: stop serving them, then check (and rebuild) each in the background."""
        leaves = list(leaves)
        for leaf in leaves:
            state = self._state(leaf)
            with self._lock:
                state.broken = state.broken or f"{type(exc).__name__}: {exc}"
                state.retry_at = time.monotonic() + RETRY_BROKEN
        for leaf in leaves:
            self.schedule(leaf)

    def retry(self, leaf: Searcher) -> None:
        """Try a broken index's heal again when it is due (at most every RETRY_BROKEN seconds)."""
        state = self._state(leaf)
        now = time.monotonic()
        with self._lock:
            due = state.broken is not None and now >= state.retry_at
            if due:
                state.retry_at = now + RETRY_BROKEN
        if due and not state.worker.busy("sync"):
            self.schedule(leaf)

    def sync(self, leaf: Searcher, progress: Progress | None = None) -> SyncReport:
        """Bring one index in step with the knowledge (checked and rebuilt first when a search failed on it)."""
        state = self._state(leaf)
        with state.lock:
            with self._lock:
                damage = state.broken
            knowledge = self.knowledge()
            if knowledge is None:
                if damage is None:  # nothing to sync against: what is on disk serves
                    with self._lock:
                        state.ready = True
                return SyncReport()
            if damage is not None:
                problem = index_damage(leaf, knowledge.units)
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
                state.progress = tracked
            try:
                report = leaf.sync(knowledge.units, tracked)
            finally:
                with self._lock:
                    state.progress = None
            with self._lock:
                if state.broken == damage:
                    state.broken = None
                state.ready = True
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

    def schedule(self, leaf: Searcher) -> Future:
        """Sync ``leaf`` on its own worker (merged with a sync that still waits there)."""
        state = self._state(leaf)

        def advance(done: int) -> None:
            with self._lock:
                state.indexed = (state.indexed or 0) + done

        def job() -> SyncReport:
            try:
                return self.sync(leaf, advance)
            except Exception:
                log.exception("%s index not synced; still serving its last good snapshot", leaf.name)
                raise
            finally:
                with self._lock:
                    state.indexed = None

        return state.worker.submit("sync", job)

    def sync_together(
        self, leaves: list[Searcher], progress: Progress | None = None, rebuild: bool = False
    ) -> SyncReport:
        """Sync a mode's indexes in the calling thread, all locked at once (from scratch with ``rebuild``)."""
        knowledge = self.knowledge()
        if knowledge is None:  # syncing now would make the index match an empty list and lose the last good one
            raise ConfigError("the knowledge was not loaded yet; call load() first")
        start = time.perf_counter()
        locks = [self.lock(leaf) for leaf in leaves]
        for lock in locks:
            lock.acquire()
        try:
            reports = {}
            for leaf in leaves:  # a composite (hybrid, passages) stores nothing: its indexes are synced one by one
                if rebuild:
                    leaf.reset("rebuild requested")
                reports[leaf.name] = leaf.sync(knowledge.units, progress)
            report = SyncReport.of_all(reports, time.perf_counter() - start)
            if rebuild:
                report = dataclasses.replace(report, rebuilt=True, reason="rebuild requested")
            for leaf in leaves:
                state = self._state(leaf)
                with self._lock:
                    state.ready = True
        finally:
            for lock in reversed(locks):
                lock.release()
        return report

    def building(self) -> list[Snapshot]:
        """The syncs running now that write texts (done, total, time left), for a page to show."""
        with self._lock:
            running = [s.progress for s in self._leaves.values() if s.progress is not None]
        return [snap for snap in (p.snapshot() for p in running) if snap.total]

    def indexing(self) -> dict[str, int]:
        """Entries indexed so far by each background sync running now (index name -> count)."""
        with self._lock:
            return {leaf.name: s.indexed for leaf, s in self._leaves.items() if s.indexed is not None}

    def workers(self) -> list[Worker]:
        """The workers of every index (to wait for)."""
        with self._lock:
            return [s.worker for s in self._leaves.values()]
