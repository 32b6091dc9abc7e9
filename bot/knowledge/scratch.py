"""A scratch copy of the knowledge folder, to apply an edit to without touching the real one (dry runs)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.knowledge.store import RETIRED, KnowledgeStore


@contextmanager
def scratch_store(store: KnowledgeStore) -> Iterator[KnowledgeStore]:
    """A store over a temporary copy of ``store``'s folder (its own lock and history), removed afterwards.

    The same validation, ids and key numbering as the real store, and nothing written where the real one keeps
    anything.
    """
    with tempfile.TemporaryDirectory(prefix="kbbot-dry-run-") as tmp:
        folder = Path(tmp) / "knowledge"
        if store.folder.is_dir():
            shutil.copytree(store.folder, folder, ignore=shutil.ignore_patterns(".*"))
        else:
            folder.mkdir()
        retired = store.history_dir / RETIRED  # new numbers go above deleted ones, as in the real store
        history = Path(tmp) / "history"
        history.mkdir()
        if retired.is_file():
            shutil.copy(retired, history / retired.name)
        yield KnowledgeStore(folder, Path(tmp) / "lock", history_dir=history, history_versions=0)
