"""Keeps every searcher in step with the knowledge folder; a bad edit never replaces the last good index."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.errors import ConfigError, KnowledgeError
from bot.knowledge.entries import Entry, folder_signature, load_entries
from bot.search.base import Progress, Searcher, SyncReport
from bot.search.tokenizer import Tokenizer

log = logging.getLogger(__name__)


class KnowledgeIndex:
    """The knowledge entries plus one lazily built searcher per retrieval mode."""

    def __init__(
        self,
        folder: str | Path,
        tokenizer: Tokenizer,
        factories: Mapping[str, Callable[[], Searcher]],
        check_interval: float = 1.0,
    ):
        self.folder = Path(folder)
        self.tokenizer = tokenizer
        self._factories = dict(factories)
        self._searchers: dict[str, Searcher] = {}
        self._lock = threading.RLock()
        self._signature: tuple | None = None
        self._last_check = 0.0
        self.check_interval = check_interval
        self.entries: list[Entry] = []
        self.error: KnowledgeError | None = None
        self._loaded = False  # True once a load succeeded: before that, `entries` is not the knowledge

    @property
    def modes(self) -> list[str]:
        """The retrieval modes this index can serve."""
        return list(self._factories)

    def load(self, progress: Progress | None = None, signature: tuple | None = None) -> dict[str, SyncReport]:
        """Read the knowledge folder and sync the searchers built so far; raises KnowledgeError on bad files.

        Returns a report per index (searcher name): a hybrid mode shares the sparse and dense indexes, and
        each is synced once.
        """
        with self._lock:
            signature = folder_signature(self.folder) if signature is None else signature
            try:
                entries = load_entries(self.folder)
            except KnowledgeError as exc:
                self._signature, self.error = signature, exc
                raise
            self.tokenizer.add_words(w for e in entries for w in e.metadata)
            self.entries, self._signature, self.error, self._loaded = entries, signature, None, True
            leaves = {id(leaf): leaf for s in self._searchers.values() for leaf in s.leaves()}
            return {leaf.name: leaf.sync(entries, progress) for leaf in leaves.values()}

    def sync(self, mode: str, progress: Progress | None = None, rebuild: bool = False) -> SyncReport:
        """Build ``mode``'s searcher if needed and bring it in step with the entries (from scratch with ``rebuild``)."""
        with self._lock:
            if not self._loaded:
                # Syncing now would make the on-disk index match an empty list and lose the last good one.
                raise self.error or ConfigError("the knowledge was not loaded yet; call load() first")
            searcher = self._searchers.get(mode) or self._create(mode)
            if rebuild:
                searcher.reset("rebuild requested")
            report = searcher.sync(self.entries, progress)
            if rebuild:
                report = dataclasses.replace(report, rebuilt=True, reason="rebuild requested")
            self._searchers[mode] = searcher
            return report

    def _create(self, mode: str) -> Searcher:
        if mode not in self._factories:
            raise ConfigError(f"unknown retrieval mode {mode!r}; choose one of: {', '.join(self._factories)}")
        return self._factories[mode]()

    def built(self, mode: str) -> Searcher | None:
        """``mode``'s searcher when it was built already, else None; never builds (for status pages)."""
        return self._searchers.get(mode)

    def searcher(self, mode: str) -> Searcher:
        """The searcher for ``mode``, built and synced on first use.

        Before any load succeeded (a malformed file at start) it is opened as it is on disk, unsynced:
        the last good index keeps serving.
        """
        with self._lock:
            if mode not in self._searchers:
                if self._loaded:
                    self.sync(mode)
                else:
                    self._searchers[mode] = self._create(mode)
            return self._searchers[mode]

    def refresh(self, force: bool = False) -> bool:
        """Reload when the knowledge files changed on disk; returns True if the index changed.

        A malformed edit is logged and kept in ``error``; the searchers keep the last good entries.
        """
        now = time.monotonic()
        if not force and now - self._last_check < self.check_interval:
            return False
        self._last_check = now
        signature = folder_signature(self.folder)
        if not force and signature == self._signature:
            return False
        try:
            reports = self.load(signature=signature)
        except KnowledgeError as exc:
            log.error("knowledge not reloaded, still serving the last good index: %s", exc)
            return False
        changed = any(r.changed for r in reports.values())
        if changed:
            log.info("knowledge reloaded: %s", {m: (r.added, r.updated, r.removed) for m, r in reports.items()})
        return changed
