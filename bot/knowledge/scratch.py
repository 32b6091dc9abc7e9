"""A scratch copy of the knowledge folder, to apply an edit to without touching the real one (dry runs)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.knowledge.store import RETIRED, KnowledgeStore, KnowledgeWriteError


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


def restore_edit(store: KnowledgeStore, file: str, version: str) -> Callable[[KnowledgeStore], list[str]]:
    """The restore of a kept version of ``file`` as an edit of another store (a replay's scratch copy).

    The kept bytes are read from ``store`` now (KnowledgeWriteError when there is no such version) and written over
    the file of the store the edit is applied to; it publishes no draft.
    """
    content = store.kept(file, version)
    if content is None:
        raise KnowledgeWriteError(
            f"{file} has no kept version {version!r}; list them with `python -m bot knowledge history {file}`"
        )

    def restoring(scratch: KnowledgeStore) -> list[str]:
        scratch.replace_file(file, content)
        return []

    return restoring
