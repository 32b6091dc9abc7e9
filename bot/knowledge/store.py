"""Safe edits of the knowledge folder: one writer at a time, whole-file validation, history, atomic replace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from bot.config.settings import KnowledgeSettings, default_of
from bot.errors import BotError, KnowledgeError, KnowledgeProblem
from bot.fsutil import write_bytes_atomic
from bot.knowledge.entries import Entry, knowledge_files, parse_keywords, parse_text
from bot.knowledge.entry_ids import entry_id
from bot.knowledge.files import (
    INDEX,
    broken_related,
    dump_like,
    duplicate_ids,
    entry_version,
    items,
    lookup,
    read_data,
)
from bot.knowledge.history import FileVersion, History
from bot.knowledge.lock import FolderLock, LockTimeout
from bot.knowledge.names import unsafe_characters, unsafe_path
from bot.knowledge.shared import KnowledgeSync, LocalOnly
from bot.knowledge.validity import Publication

LOCK_TIMEOUT = 10.0
HISTORY_VERSIONS: int = default_of(KnowledgeSettings, "history_versions")
ABSENT = "absent"  # expected_version of an entry that must not exist yet: an add that never overwrites


class KnowledgeWriteError(BotError):
    """An edit was refused: bad file name, unknown file or entry, existing upload, or another edit holds the lock."""


class StaleEditError(KnowledgeWriteError):
    """The entry on disk is not the version the edit started from; nothing was written."""


RETIRED = ".retired-keys.json"  # in the history folder (hidden: no knowledge file has its name): per file, the highest deleted number


def _next_key(data: dict, retired: int = 0) -> str:
    # max + 1 rather than the lowest gap, and above every deleted number (``retired``), so that an id the log and
    # its hit counts know is never handed to a different entry.
    numbers = [int(k) for k in data if INDEX.fullmatch(k)]
    return str(max([*numbers, retired], default=0) + 1)


class KnowledgeStore:
    """Entry- and file-level edits of a knowledge folder; each is a read-modify-write under the folder's one
    writer lock that only replaces a file when the whole result passes the loader's own validation, after
    keeping the file's previous version in the history folder."""

    def __init__(
        self,
        folder: str | Path,
        lock_dir: str | Path,
        timeout: float = LOCK_TIMEOUT,
        *,
        history_dir: str | Path | None = None,
        history_versions: int = HISTORY_VERSIONS,
        sync: KnowledgeSync | None = None,
    ):
        self.folder = Path(folder)
        self.lock_dir = Path(lock_dir)
        self.timeout = timeout
        self.history_dir = Path(history_dir) if history_dir is not None else self.lock_dir.parent / "history"
        for what, place in (("lock", self.lock_dir), ("history", self.history_dir)):
            if place.resolve().is_relative_to(self.folder.resolve()):
                raise KnowledgeWriteError(
                    f"{what} folder {place} is inside the knowledge folder {self.folder}; "
                    "put it elsewhere (e.g. under the state folder) so the knowledge folder holds only knowledge"
                )
        self.lock = FolderLock(self.lock_dir, timeout)
        self._history = History(self.history_dir, history_versions)
        # Replicas sharing the knowledge (bot/knowledge/shared.py): edits go through it, reads pull first.
        self.sync: KnowledgeSync = sync if sync is not None else LocalOnly()

    @property
    def lock_path(self) -> Path:
        """The file every writer of this folder flocks (docs/knowledge.md "Knowledge")."""
        return self.lock.path

    def files(self) -> list[str]:
        """The knowledge files, as '/'-separated paths relative to the folder, in loading order."""
        self.sync.pull()
        if not self.folder.is_dir():
            return []
        return [p.relative_to(self.folder).as_posix() for p in knowledge_files(self.folder)]

    def entries(self, file: str) -> list[tuple[str, dict]]:
        """(key, raw entry as decoded) of one file in file order; the key of a list entry is its index."""
        path, rel = self._resolve(file)
        self.sync.pull()
        data = read_data(path)
        if data is None:
            raise KnowledgeWriteError(f"{rel}: no such knowledge file")
        return items(data)

    def version(self, file: str, key: str) -> str | None:
        """The current version of entry ``key`` of ``file`` (see :func:`entry_version`), None when there is none."""
        path, _ = self._resolve(file)
        self.sync.pull()
        data = read_data(path)
        raw = None if data is None else lookup(data, key)
        return None if raw is None else entry_version(raw)

    def upsert_entry(
        self,
        file: str,
        key: str | None,
        query: str,
        document: str,
        metadata: str | list[str],
        *,
        expected_version: str | None = None,
        questions: list[str] | None = None,
        publication: Publication | None = None,
    ) -> str:
        """Edit entry ``key`` of ``file`` or add it (at the end); returns its id '<stem>:<key>'.

        A missing file is created in object form. In object form a ``key`` of None gets the next free
        integer (1 + the largest all-digit key, "1" when there is none). In list form the key is the index;
        None (or the index one past the end) appends. Extra fields of an edited entry are kept; metadata is
        stored as a comma-separated string unless the edited entry already held a list. With
        ``expected_version`` (the version the edit started from, or ABSENT for a new entry) a different
        entry on disk raises StaleEditError. ``publication`` sets the draft flag and validity dates (None keeps the
        entry's).
        """
        path, rel = self._resolve(file)
        with self._locked(rel):
            data = read_data(path)
            if data is None:
                data = {}
            if isinstance(data, dict):
                key = _next_key(data, self._retired(rel)) if key is None else key
                if not key or key != key.strip() or unsafe_characters(key):
                    raise KnowledgeWriteError(
                        f"{rel}: entry key {key!r} must be non-empty without surrounding spaces, "
                        f"control or formatting characters"
                    )
            else:
                key = str(len(data)) if key is None else key
            old = lookup(data, key)
            self._check_version(rel, data, key, old, expected_version)
            entry = dict(old) if isinstance(old, dict) else {}
            entry["query"] = query.strip()
            entry["document"] = document.strip()
            words = parse_keywords(metadata or "")
            entry["metadata"] = list(words) if isinstance(entry.get("metadata"), list) else ",".join(words)
            if questions is not None:  # other phrasings of the question; None keeps what the entry has
                kept = [q.strip() for q in questions if q.strip()]
                if kept:
                    entry["questions"] = kept
                else:
                    entry.pop("questions", None)
            if publication is not None:
                publication.apply(entry)
            if isinstance(data, dict):
                data[key] = entry
            else:
                index = self._index(rel, key, len(data) + 1)
                if index < len(data):
                    data[index] = entry
                else:
                    data.append(entry)
            self._write(path, rel, data)
        return entry_id(path.stem, key)

    def delete_entry(self, file: str, key: str, *, expected_version: str | None = None) -> None:
        """Remove entry ``key`` from ``file`` (the file stays, possibly empty).

        In list form the later entries move up one index, so their ids ('<stem>:<index>') change too. With
        ``expected_version`` a different (or missing) entry on disk raises StaleEditError.
        """
        path, rel = self._resolve(file)
        with self._locked(rel):
            data = read_data(path)
            if data is None:
                raise KnowledgeWriteError(f"{rel}: no such knowledge file")
            self._check_version(rel, data, key, lookup(data, key), expected_version)
            if isinstance(data, dict):
                if key not in data:
                    raise KnowledgeWriteError(f"{rel} has no entry {key!r}; reload the list, it may have been deleted")
                del data[key]
            else:
                del data[self._index(rel, key, len(data))]
            self._write(path, rel, data)
            if isinstance(data, dict) and INDEX.fullmatch(key):
                self._retire(rel, int(key))

    def import_file(self, name: str, text: str, overwrite: bool = False, *, merge: bool = False) -> list[str]:
        """Store an uploaded knowledge file under the bare ``name``; returns the file's entry ids afterwards.

        An existing file is refused unless ``overwrite`` (replace it) or ``merge`` (object form: the upload's
        keys replace or join the file's; list form: appended; a list into an object file gets fresh keys).
        The content is re-serialised (laid out like the file it merges into, else indent 2); the replaced version is kept in the history.
        """
        if "/" in name or "\\" in name:
            why = "give a plain file name like faq.json, without folders"
            raise KnowledgeWriteError(f"upload name {name!r} refused: {why}")
        path, rel = self._resolve(name)
        text = text.removeprefix("\ufeff")
        problems: list[KnowledgeProblem] = []
        # Validate the upload as sent, so line/column numbers in messages match the user's file.
        parse_text(text, path.stem, str(path), problems)
        if problems:
            raise KnowledgeError(problems)
        incoming = json.loads(text)
        for key in incoming if isinstance(incoming, dict) else ():
            if unsafe_characters(key):
                raise KnowledgeWriteError(f"{rel}: entry key {key!r} refused: {unsafe_characters(key)}")
        with self._locked(rel):
            current = read_data(path) if merge else None
            if path.exists() and not (overwrite or merge):
                raise KnowledgeWriteError(f"{rel} already exists; choose another name or allow overwriting")
            if isinstance(current, dict):
                if isinstance(incoming, dict):
                    current.update(incoming)
                else:
                    for raw in incoming:
                        current[_next_key(current, self._retired(rel))] = raw
                incoming = current
            elif isinstance(current, list):
                if isinstance(incoming, dict):
                    raise KnowledgeWriteError(
                        f"{rel} is a list of entries; an object-form file cannot be merged "
                        "into it (its keys would be lost): convert one of them first"
                    )
                incoming = current + incoming
            return [e.id for e in self._write(path, rel, incoming)]

    def _retired(self, rel: str) -> int:
        """The highest numbered key deleted from ``rel`` (0 for none): new numbers go above it."""
        try:
            return int(json.loads((self.history_dir / RETIRED).read_text(encoding="utf-8")).get(rel, 0))
        except (OSError, ValueError, AttributeError):
            return 0

    def _retire(self, rel: str, number: int) -> None:
        path = self.history_dir / RETIRED
        try:
            known = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        known = known if isinstance(known, dict) else {}
        if number > int(known.get(rel, 0)):
            known[rel] = number
            write_bytes_atomic(path, json.dumps(known, ensure_ascii=False, indent=1).encode("utf-8"))

    def history(self, file: str) -> list[FileVersion]:
        """The kept earlier versions of ``file``, newest first (time it was replaced, entries, size)."""
        _, rel = self._resolve(file)
        self.sync.pull()
        return self._history.versions(rel)

    def kept(self, file: str, version: str) -> bytes | None:
        """The bytes of one kept earlier version of ``file`` (None when there is none)."""
        _, rel = self._resolve(file)
        return self._history.content(rel, version)

    def restore(self, file: str, version: str) -> list[str]:
        """Bring back a kept version of ``file`` byte for byte (the current one is kept first); returns its ids."""
        path, rel = self._resolve(file)
        with self._locked(rel):  # read under the lock: another replica's kept versions are in the mirror by then
            return [e.id for e in self._replace(path, rel, self._kept(rel, version))]

    def replace_file(self, file: str, content: bytes) -> list[str]:
        """Write ``content`` as the whole of ``file``, validated as a restore is (the current one is kept first)."""
        path, rel = self._resolve(file)
        with self._locked(rel):
            return [e.id for e in self._replace(path, rel, content)]

    def _kept(self, rel: str, version: str) -> bytes:
        content = self._history.content(rel, version)
        if content is None:
            raise KnowledgeWriteError(
                f"{rel} has no kept version {version!r}; list them with `python -m bot knowledge history {rel}`"
            )
        return content

    def _resolve(self, file: str) -> tuple[Path, str]:
        """The absolute path of a relative knowledge file name, refusing anything the loader would not read."""
        parts = PurePosixPath(file).parts if file and "\\" not in file and "\0" not in file else ()
        why = ""
        if not parts or PurePosixPath(file).is_absolute():
            why = "give a relative path inside the knowledge folder"
        elif any(p in ("..", "") or p.startswith(".") for p in parts):
            why = "no '..' and no hidden (dot) names"
        elif not parts[-1].endswith(".json"):
            why = "knowledge files must end in .json"
        else:
            why = unsafe_path(parts) or ""
        path = self.folder.joinpath(*parts) if parts else self.folder
        if not why and not path.resolve().is_relative_to(self.folder.resolve()):
            why = "it leads outside the knowledge folder"
        if why:
            raise KnowledgeWriteError(f"file name {file!r} refused: {why}")
        return path, "/".join(parts)

    @staticmethod
    def _index(rel: str, key: str, size: int) -> int:
        if not INDEX.fullmatch(key) or int(key) >= size:
            raise KnowledgeWriteError(f"{rel} has no entry {key!r}; reload the list, it may have changed")
        return int(key)

    @contextmanager
    def _locked(self, rel: str = "") -> Iterator[None]:
        """Hold the folder's one writer lock, and the shared one of replicas (``rel`` only names the file in the
        error)."""
        try:
            with self.lock.hold(), self.sync.editing():
                yield
        except LockTimeout:
            raise KnowledgeWriteError(
                f"{rel or self.folder} is being changed by another edit (lock {self.lock.path} held for over "
                f"{self.timeout:g} s); try again in a moment"
            ) from None

    def _check_version(self, rel: str, data: dict | list, key: str, old: Any, expected: str | None) -> None:
        """Refuse the edit when the entry on disk is not the version it started from."""
        if expected is None:
            return
        actual = ABSENT if old is None else entry_version(old)
        if actual == expected:
            return
        if expected == ABSENT:
            raise StaleEditError(
                f"该条目已存在 / {rel} already has an entry {key!r} (version {actual}); "
                "load it and edit it instead. Nothing was written."
            )
        now = "it was deleted" if old is None else f"it is now version {actual}"
        # List entries move when an earlier one is deleted: say where the loaded one went.
        moved = [k for k, raw in items(data) if entry_version(raw) == expected] if isinstance(data, list) else []
        where = f"; the entry you loaded is now at key {moved[0]!r}" if moved else ""
        raise StaleEditError(
            f"该条目已被他人修改，请重新加载后再编辑 / The entry changed since you loaded it: {rel} entry {key!r} — "
            f"your edit started from version {expected}, {now}{where}. Reload it and edit again; nothing was written."
        )

    def _write(self, path: Path, rel: str, data: dict | list) -> list[Entry]:
        """Serialise ``data`` laid out like the file now (indent 2 when new) and :meth:`_replace` the file with it."""
        try:
            previous = path.read_bytes()
        except FileNotFoundError:
            previous = None
        return self._replace(path, rel, dump_like(data, previous))

    def _replace(self, path: Path, rel: str, content: bytes) -> list[Entry]:
        """Validate the whole new file like the loader does, keep the current version in the history, then
        replace the file atomically; returns its entries. Call only under the lock."""
        problems: list[KnowledgeProblem] = []
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise KnowledgeError([KnowledgeProblem(str(path), None, f"cannot read as UTF-8 text: {exc}")]) from None
        entries = parse_text(text, path.stem, str(path), problems)
        problems += duplicate_ids(self.folder, path, entries)
        if not problems:
            problems += broken_related(self.folder, path, entries)
        if problems:
            raise KnowledgeError(problems)
        try:
            previous = path.read_bytes()
        except FileNotFoundError:
            previous = None
        if previous != content:
            if previous is not None:
                self._history.keep_version(rel, previous)
            write_bytes_atomic(path, content)
        return entries
