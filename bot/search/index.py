"""Keeps every searcher in step with the knowledge folder; a bad edit never replaces the last good index.

Two ways to run. Scripts and the CLI (``background=False``) sync inline: a call returns when the index is done.
A server (``background=True``) never makes a request wait for writing: :meth:`KnowledgeIndex.refresh` schedules
the reload, one worker per index (tantivy, FAISS, ...) syncs it, and searches keep using the last good snapshot
meanwhile. :meth:`KnowledgeIndex.searcher` then returns a :class:`ServedSearcher`: the mode's own searcher once
its indexes are ready, else another mode's (or none) with a notice, and a search error heals the index in the
background instead of failing the chat. ``refresh(wait=True)`` and :meth:`wait_idle` wait for the workers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

from bot.errors import ConfigError, KnowledgeError
from bot.knowledge.entries import Entry, folder_signature, load_entries
from bot.search.aliases import Alias
from bot.search.background import Worker
from bot.search.base import ModeSearcher, Progress, SyncReport
from bot.search.healing import ServedSearcher
from bot.search.index_sync import IndexSyncing
from bot.search.passages import Passages
from bot.search.progress import BuildProgress, Snapshot
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import Tokenizer
from bot.texts import BUILDING_ALONE, BUILDING_NOTICE, HEALING_ALONE, HEALING_NOTICE, PARTIAL_NOTICE

log = logging.getLogger(__name__)

SPARSE = "sparse"  # the mode built first in the background: it stands in for the others until they are ready
RETRY_FAILED_BUILD = 30.0  # seconds a mode whose build failed reports that error before it is tried again
# Seconds the message that notices an edit on disk waits for it (the reload and the index syncs it starts): a small
# edit is in the index within that, so docs/knowledge.md's "the next message" holds; a longer rebuild goes on behind the
# last good snapshot.
FRESH_WAIT = 2.0


class KnowledgeIndex(IndexSyncing):
    """The knowledge entries plus one lazily built searcher per retrieval mode."""

    def __init__(
        self,
        folder: str | Path,
        tokenizer: Tokenizer,
        factories: Mapping[str, Callable[[], ModeSearcher]],
        check_interval: float = 0.0,
        background: bool = False,
        passages: Passages | None = None,
        pull: Callable[[], bool] | None = None,
        synonyms: Synonyms | None = None,
    ):
        self.folder = Path(folder)
        # Replicas sharing the knowledge (bot/knowledge/shared.py): brings their edits into the folder before each
        # check; True when a file changed.
        self.pull = pull
        self.tokenizer = tokenizer
        # The searchers' synonyms: told each loaded knowledge, whose aliases they mine (bot/search/aliases.py).
        self.synonyms = synonyms
        self._factories = dict(factories)
        self._searchers: dict[str, ModeSearcher] = {}
        self._lock = threading.RLock()
        self._loading = threading.RLock()  # held while the knowledge files are read (one load at a time)
        self._signature: tuple | None = None
        self._last_check = 0.0
        self.check_interval = check_interval
        self.background = background
        self.entries: list[Entry] = []
        # Long documents reach the indexes as passage units (bot/search/passages.py); None = every entry whole.
        self.passages = passages
        self.units: list[Entry] = []  # what the indexes hold: `entries`, long ones cut into passages
        self.error: KnowledgeError | None = None
        self._loaded = False  # True once a load succeeded: before that, `entries` is not the knowledge
        self._indexing: dict[str, int] = {}  # entries indexed so far by each running background sync
        self._loader, self._builder = Worker("knowledge"), Worker("build")
        self._workers: dict[int, Worker] = {}  # id(leaf) -> the worker that writes that index
        self._writing: dict[int, threading.RLock] = {}  # id(leaf) -> held while that index is written
        self._ready: set[int] = set()  # leaves holding a usable index (the last good snapshot serves)
        self._broken: dict[int, str] = {}  # leaves a search failed on, until checked (and rebuilt)
        self._failed: dict[str, tuple[BaseException, float]] = {}  # mode -> why its build failed, when
        self._retry_at: dict[int, float] = {}  # id(leaf) -> when a broken index may be healed again
        self._building: dict[int, BuildProgress] = {}  # id(leaf) -> how far its running sync has got

    @property
    def modes(self) -> list[str]:
        """The retrieval modes this index can serve."""
        return list(self._factories)

    # -- loading -------------------------------------------------------------
    def load(
        self, progress: Progress | None = None, signature: tuple | None = None, wait: bool | None = None
    ) -> dict[str, SyncReport]:
        """Read the knowledge folder and sync the searchers built so far; raises KnowledgeError on bad files.

        Returns a report per index (searcher name): a hybrid mode shares the sparse and dense indexes, and
        each is synced once. In the background mode without ``wait`` the syncs are only scheduled (no reports).
        """
        wait = not self.background if wait is None else wait
        with self._loading:  # one load at a time, parsed outside ``_lock``: requests (searcher()) do not wait for it
            signature = folder_signature(self.folder) if signature is None else signature
            try:
                entries = load_entries(self.folder)
            except KnowledgeError as exc:
                with self._lock:
                    self._signature, self.error = signature, exc
                raise
            self.tokenizer.add_words(w for e in entries for w in e.metadata)
            if self.synonyms is not None:  # before any sync: an alias may join jieba's words, as keywords do
                self.synonyms.learn(entries)
            units = self.passages.expand(entries) if self.passages is not None else entries
            with self._lock:
                self.entries, self.units, self._signature, self.error, self._loaded = (
                    entries,
                    units,
                    signature,
                    None,
                    True,
                )
                leaves = list({id(leaf): leaf for s in self._searchers.values() for leaf in s.leaves()}.values())
                if not self.background:
                    return {leaf.name: self._sync_leaf(leaf, progress) for leaf in leaves}
        futures = {leaf.name: self._schedule(leaf) for leaf in leaves}
        return {name: f.result() for name, f in futures.items()} if wait else {}

    def refresh(self, force: bool = False, wait: bool | None = None) -> bool:
        """Reload when the knowledge files changed on disk; returns True if the index changed (or, in the
        background mode without ``wait``, when a reload was scheduled).

        A malformed edit is logged and kept in ``error``; the searchers keep the last good entries.
        """
        wait = not self.background if wait is None else wait
        now = time.monotonic()
        # Another replica's edit is in the folder from here on; it is read now, whatever check_interval says.
        pulled = self.pull() if self.pull is not None else False
        if not force and not pulled and now - self._last_check < self.check_interval:
            return False
        self._last_check = now
        signature = folder_signature(self.folder)
        if not force and signature == self._signature:
            return False
        if not wait:
            self._catch_up(self._loader.submit("load", lambda: self._reload(None, False)))
            return True
        return self._reload(signature, True)

    def _catch_up(self, reload: Future) -> None:
        """Wait up to FRESH_WAIT for a scheduled reload and the index syncs it started (background mode)."""
        deadline = time.monotonic() + FRESH_WAIT
        try:
            reload.result(timeout=FRESH_WAIT)
        except Exception:  # still parsing (a huge folder), or failed (logged by _reload): serve what there is
            return
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            if not worker.wait_idle(max(0.0, deadline - time.monotonic())):
                return

    def _reload(self, signature: tuple | None, wait: bool) -> bool:
        try:
            reports = self.load(signature=signature, wait=wait)
        except KnowledgeError as exc:
            log.error("knowledge not reloaded, still serving the last good index: %s", exc)
            return False
        changed = any(r.changed for r in reports.values())
        if changed:
            log.info("knowledge reloaded: %s", {m: (r.added, r.updated, r.removed) for m, r in reports.items()})
        return changed

    def aliases(self) -> tuple[tuple[Alias, bool], ...]:
        """The aliases the loaded knowledge defines, each with whether the synonym file drops it (for the linter)."""
        return self.synonyms.listed() if self.synonyms is not None else ()

    def building(self) -> list[Snapshot]:
        """The index syncs running now that write texts (done, total, time left), for a page to show."""
        with self._lock:
            running = list(self._building.values())
        return [snap for snap in (p.snapshot() for p in running) if snap.total]

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no reload, build or sync is scheduled or running; False when ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            workers = [self._loader, self._builder, *list(self._workers.values())]
            if not any(w.busy() for w in workers):
                return True
            for w in workers:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not w.wait_idle(left):
                    return False

    # -- syncing -----------------------------------------------------------
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

    # -- serving -------------------------------------------------------------
    def built(self, mode: str) -> ModeSearcher | None:
        """``mode``'s searcher when it was built (or, in the background mode, is being built), else None; never
        builds (for status pages)."""
        if not self.background:
            return self._searchers.get(mode)
        if mode not in self._searchers and not self._builder.busy(mode):
            return None
        return self._served(mode)

    def searcher(self, mode: str) -> ModeSearcher:
        """The searcher for ``mode``, built and synced on first use (in the background mode: scheduled, and
        served by a stand-in until ready).

        Before any load succeeded (a malformed file at start) it is opened as it is on disk, unsynced:
        the last good index keeps serving.
        """
        if mode not in self._factories:
            raise ConfigError(f"unknown retrieval mode {mode!r}; choose one of: {', '.join(self._factories)}")
        if not self.background:
            with self._lock:
                if mode not in self._searchers:
                    if self._loaded:
                        self.sync(mode)
                    else:
                        self._searchers[mode] = self._create(mode)
                return self._searchers[mode]
        if not self._loaded and mode not in self._searchers:
            self._build(mode)  # nothing to sync against: open what is on disk, now
        with self._lock:
            failed = self._failed.get(mode)
            if failed is not None and mode not in self._searchers:
                if time.monotonic() - failed[1] < RETRY_FAILED_BUILD:
                    raise failed[0]
                self._failed.pop(mode, None)
            own = self._searchers.get(mode)
            now = time.monotonic()
            for leaf in own.leaves() if own is not None else []:
                # a heal that failed (e.g. its backend was down) is tried again, at most every RETRY_FAILED_BUILD s
                if id(leaf) in self._broken and now >= self._retry_at.get(id(leaf), 0.0):
                    self._retry_at[id(leaf)] = now + RETRY_FAILED_BUILD
                    if not self._workers.get(id(leaf), self._builder).busy("sync"):
                        self._schedule(leaf)
            if mode not in self._searchers:
                if mode != SPARSE and SPARSE in self._factories and SPARSE not in self._searchers:
                    # the cheap index first: it answers (with a notice) while the mode's own index builds
                    self._builder.submit(SPARSE, lambda: self._build(SPARSE))
                self._builder.submit(mode, lambda: self._build(mode))
        return self._served(mode)

    def served(self, mode: str) -> ServedSearcher:
        """What ``mode`` serves now, as :meth:`searcher`, always wrapped so that :meth:`ServedSearcher.find` reports
        what answered each search (scripts and the CLI get the mode's own searcher, whose errors are raised)."""
        searcher = self.searcher(mode)
        return searcher if isinstance(searcher, ServedSearcher) else ServedSearcher(mode, searcher)

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
            fresh = [leaf for leaf in searcher.leaves() if id(leaf) not in self._writing]
            for leaf in fresh:
                self._writing.setdefault(id(leaf), threading.RLock())
        for leaf in fresh:
            try:
                usable = leaf.indexed_hashes() is not None  # opens (and checks) the index on disk
            except Exception as exc:
                log.warning("%s index cannot be opened (%s); it will be rebuilt", leaf.name, exc)
                usable = False
            if usable:
                with self._lock:
                    self._ready.add(id(leaf))
        if self._loaded:
            for leaf in searcher.leaves():
                self._schedule(leaf)

    def _serves(self, searcher: ModeSearcher) -> bool:
        return all(id(leaf) in self._ready and id(leaf) not in self._broken for leaf in searcher.leaves())

    def _serves_partly(self, searcher: ModeSearcher) -> bool:
        """True when each index is ready or searchable part-way through its first build (questions before passages)."""
        return all(
            (id(leaf) in self._ready or leaf.partial) and id(leaf) not in self._broken for leaf in searcher.leaves()
        )

    def _served(self, mode: str) -> ServedSearcher:
        """``mode``'s own searcher when its indexes are ready; part-way through a first build it stands in for itself
        (with a notice, and a stand-in's cutoffs); else the first ready mode's with a notice."""
        with self._lock:
            own = self._searchers.get(mode)
            if own is not None and self._serves(own):
                return ServedSearcher(mode, own, None, self._heal)
            if own is not None and self._serves_partly(own):
                return ServedSearcher(mode, own, PARTIAL_NOTICE, self._heal)
            healing = own is not None and any(id(leaf) in self._broken for leaf in own.leaves())
            other = next(
                (m for m in self._factories if m != mode and m in self._searchers and self._serves(self._searchers[m])),
                None,
            )
        if other is None:
            return ServedSearcher(mode, None, HEALING_ALONE if healing else BUILDING_ALONE, self._heal)
        notice = (HEALING_NOTICE if healing else BUILDING_NOTICE).format(mode=other)
        return ServedSearcher(mode, self._searchers[other], notice, self._heal)

    def _heal(self, searcher: ModeSearcher | None, exc: BaseException) -> None:
        """A search failed on ``searcher``: stop serving its indexes, then check (and rebuild) each in the background."""
        if searcher is None:
            return
        leaves = searcher.leaves()
        with self._lock:
            for leaf in leaves:
                self._broken.setdefault(id(leaf), f"{type(exc).__name__}: {exc}")
                self._retry_at[id(leaf)] = time.monotonic() + RETRY_FAILED_BUILD
        for leaf in leaves:
            self._schedule(leaf)
