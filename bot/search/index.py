"""Keeps every searcher in step with the knowledge folder; a bad edit never replaces the last good index.

A façade over three parts that own their state: :class:`~bot.search.loading.KnowledgeSource` reads the folder,
:class:`~bot.search.writer.IndexWriter` syncs each on-disk index, :class:`~bot.search.serving.ModeServer` decides
what each mode serves. Scripts and the CLI (``background=False``) sync inline. A server (``background=True``) never
makes a request wait for writing: :meth:`KnowledgeIndex.refresh` schedules the reload, and searches keep using the
last good snapshot (or another mode standing in, with a notice) until the indexes are ready.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path

from bot.errors import ConfigError, KnowledgeError
from bot.knowledge.entries import Entry
from bot.knowledge.rules import NO_RULES, RuleSet
from bot.search.aliases import Alias
from bot.search.background import Worker, wait_for
from bot.search.base import ModeSearcher, Progress, SyncReport
from bot.search.loading import KnowledgeSource
from bot.search.passages import Passages
from bot.search.serving import ModeServer
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import Tokenizer
from bot.search.writer import IndexWriter

log = logging.getLogger(__name__)

# Seconds the message that notices an edit on disk waits for it (the reload and the syncs it starts): a small edit is
# in the index within that, so docs/knowledge.md's "the next message" holds; a longer one goes on behind the last good
# snapshot.
FRESH_WAIT = 2.0


class KnowledgeIndex:
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
        self.source = KnowledgeSource(folder, tokenizer, passages, pull, synonyms)
        self.tokenizer = tokenizer  # the knowledge's keywords are added to it
        self.check_interval = check_interval  # seconds between looks at the folder for edits
        self.synonyms = synonyms  # the searchers' synonyms, which mine each loaded knowledge's aliases
        self.writer = IndexWriter(lambda: self.source.current)
        self.server = ModeServer(factories, self.writer, lambda: self.source.current, background, passages)
        self.background = background
        self.modes = list(factories)  # the retrieval modes this index can serve
        self._loader = Worker("knowledge")  # reloads scheduled by refresh(), one at a time
        self._on_load: list[Callable[[], None]] = []  # called after each good read of the folder
        # The parts' public methods are the index's own: callers do not see the split.
        self.searcher, self.served, self.built = self.server.searcher, self.server.served, self.server.built
        self.wait_ready = self.server.wait_ready
        self.building, self.indexing = self.writer.building, self.writer.indexing

    @property
    def entries(self) -> list[Entry]:
        """The last good knowledge's entries ([] before one was read)."""
        return self.source.current.entries if self.source.current is not None else []

    @property
    def units(self) -> list[Entry]:
        """What the indexes hold: the entries, long ones cut into passages."""
        return self.source.current.units if self.source.current is not None else []

    @property
    def rules(self) -> RuleSet:
        """The last good knowledge's exact-match rules (none before one was read)."""
        return self.source.current.rules if self.source.current is not None else NO_RULES

    @property
    def passages(self) -> Passages | None:
        """How long documents are cut into passages (None: every entry whole), for a staging index cut the same."""
        return self.source.passages

    @property
    def error(self) -> KnowledgeError | None:
        """Why the last read of the folder failed (the last good knowledge serves), or None."""
        return self.source.error

    def aliases(self) -> tuple[tuple[Alias, bool], ...]:
        """The aliases the loaded knowledge defines, each with whether the synonym file drops it (for the linter)."""
        return self.synonyms.listed() if self.synonyms is not None else ()

    def load(
        self, progress: Progress | None = None, signature: tuple | None = None, wait: bool | None = None
    ) -> dict[str, SyncReport]:
        """Read the folder and sync the indexes built so far (one report per index); KnowledgeError on a bad file.

        In the background mode without ``wait`` the syncs are only scheduled (no reports).
        """
        wait = not self.background if wait is None else wait
        with self.source.lock:  # one load at a time; requests (searcher()) do not wait for it
            self.source.read(signature)
            leaves = self.server.leaves()
            if not self.background:
                reports = {leaf.name: self.writer.sync(leaf, progress) for leaf in leaves}
        if not self.background:
            self._loaded()
            return reports
        futures = {leaf.name: self.writer.schedule(leaf) for leaf in leaves}
        if wait:
            reports = {name: f.result() for name, f in futures.items()}
            self._loaded()
            return reports
        self._loaded_after(list(futures.values()))
        return {}

    def on_load(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after each good read of the folder and the index syncs it started (in the thread that
        finished the last of them: keep it short)."""
        self._on_load.append(callback)

    def _loaded(self) -> None:
        for callback in self._on_load:
            callback()

    def _loaded_after(self, syncs: list[Future]) -> None:
        """Call the load callbacks once every one of ``syncs`` is done (failed ones too: they logged why)."""
        # A callback that searches (the replay's warm-up) would otherwise read the indexes before the sync,
        # and what it computed would belong to a version of the knowledge that is already gone.
        left = [len(syncs)]
        lock = threading.Lock()

        def done(_: Future) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                self._loaded()

        if not syncs:
            self._loaded()
        for sync in syncs:
            sync.add_done_callback(done)

    def refresh(self, force: bool = False, wait: bool | None = None) -> bool:
        """Reload when the files changed on disk; True if the index changed.

        In the background mode without ``wait``, True when a reload was scheduled. A malformed edit is logged and kept in
        ``error``.
        """
        wait = not self.background if wait is None else wait
        signature = self.source.changed(force, self.check_interval)
        if signature is None:
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
        wait_for(self.writer.workers, max(0.0, deadline - time.monotonic()), once=True)

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

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no reload, build or sync is scheduled or running; False when ``timeout`` passed first."""
        return wait_for(lambda: [self._loader, self.server.builder, *self.writer.workers()], timeout)

    def sync(self, mode: str, progress: Progress | None = None, rebuild: bool = False) -> SyncReport:
        """Build ``mode``'s searcher if needed and sync it in the calling thread (from scratch with ``rebuild``)."""
        if self.source.current is None:  # syncing now would make the index match nothing and lose the last good one
            raise self.error or ConfigError("the knowledge was not loaded yet; call load() first")
        return self.server.sync(mode, progress, rebuild)
