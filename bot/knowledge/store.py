"""Safe edits of the knowledge folder: one lock per file, whole-file validation, atomic replace."""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from filelock import FileLock, Timeout

from bot.errors import BotError, KnowledgeError, KnowledgeProblem
from bot.fsutil import write_text_atomic
from bot.knowledge.entries import JSON_ERRORS, Entry, json_problem, knowledge_files, parse_keywords, parse_text

LOCK_TIMEOUT = 10.0
_INDEX = re.compile(r"0|[1-9][0-9]*")


class KnowledgeWriteError(BotError):
    """An edit was refused: bad file name, unknown file or entry, existing upload, or another edit holds the lock."""


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _strict_object(pairs: list[tuple[str, Any]]) -> dict:
    # A rewrite would silently keep only the last copy of a repeated key, so such files are refused.
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _next_key(data: dict) -> str:
    # max + 1 rather than the lowest gap, so a freshly deleted id is not handed to a different entry.
    numbers = [int(k) for k in data if _INDEX.fullmatch(k)]
    return str(max(numbers, default=0) + 1)


def _stems_may_clash(a: str, b: str) -> bool:
    # Ids are "<stem>:<key>", so "a" + "b:c" equals "a:b" + "c"; only such stems can share an id.
    return a == b or a.startswith(b + ":") or b.startswith(a + ":")


class KnowledgeStore:
    """Entry- and file-level edits of a knowledge folder; each is a locked read-modify-write that only
    replaces a file when the whole result passes the loader's own validation."""

    def __init__(self, folder: str | Path, lock_dir: str | Path, timeout: float = LOCK_TIMEOUT):
        self.folder = Path(folder)
        self.lock_dir = Path(lock_dir)
        self.timeout = timeout
        if self.lock_dir.resolve().is_relative_to(self.folder.resolve()):
            raise KnowledgeWriteError(
                f"lock folder {self.lock_dir} is inside the knowledge folder {self.folder}; "
                "put it elsewhere (e.g. under the state folder) so the knowledge folder holds only knowledge"
            )

    def files(self) -> list[str]:
        """The knowledge files, as '/'-separated paths relative to the folder, in loading order."""
        if not self.folder.is_dir():
            return []
        return [p.relative_to(self.folder).as_posix() for p in knowledge_files(self.folder)]

    def entries(self, file: str) -> list[tuple[str, dict]]:
        """(key, raw entry as decoded) of one file in file order; the key of a list entry is its index."""
        path, rel = self._resolve(file)
        data = self._read(path, rel)
        if data is None:
            raise KnowledgeWriteError(f"{rel}: no such knowledge file")
        if isinstance(data, dict):
            return list(data.items())
        return [(str(i), value) for i, value in enumerate(data)]

    def upsert_entry(self, file: str, key: str | None, query: str, document: str, metadata: str | list[str]) -> str:
        """Edit entry ``key`` of ``file`` or add it (at the end); returns its id '<stem>:<key>'.

        A missing file is created in object form. In object form a ``key`` of None gets the next free
        integer (1 + the largest all-digit key, "1" when there is none). In list form the key is the index;
        None (or the index one past the end) appends. Extra fields of an edited entry are kept; metadata is
        stored as a comma-separated string unless the edited entry already held a list.
        """
        path, rel = self._resolve(file)
        with self._locked(rel):
            data = self._read(path, rel)
            if data is None:
                data = {}
            if isinstance(data, dict):
                key = _next_key(data) if key is None else key
                if not key or key != key.strip():
                    raise KnowledgeWriteError(f"{rel}: entry key {key!r} must be non-empty without surrounding spaces")
                old = data.get(key)
            else:
                key = str(len(data)) if key is None else key
                index = self._index(rel, key, len(data) + 1)
                old = data[index] if index < len(data) else None
            entry = dict(old) if isinstance(old, dict) else {}
            entry["query"] = query.strip()
            entry["document"] = document.strip()
            words = parse_keywords(metadata or "")
            entry["metadata"] = list(words) if isinstance(entry.get("metadata"), list) else ",".join(words)
            if isinstance(data, dict):
                data[key] = entry
            elif index < len(data):
                data[index] = entry
            else:
                data.append(entry)
            self._write(path, data)
        return f"{path.stem}:{key}"

    def delete_entry(self, file: str, key: str) -> None:
        """Remove entry ``key`` from ``file`` (the file stays, possibly empty).

        In list form the later entries move up one index, so their ids ('<stem>:<index>') change too.
        """
        path, rel = self._resolve(file)
        with self._locked(rel):
            data = self._read(path, rel)
            if data is None:
                raise KnowledgeWriteError(f"{rel}: no such knowledge file")
            if isinstance(data, dict):
                if key not in data:
                    raise KnowledgeWriteError(f"{rel} has no entry {key!r}; reload the list, it may have been deleted")
                del data[key]
            else:
                del data[self._index(rel, key, len(data))]
            self._write(path, data)

    def import_file(self, name: str, text: str, overwrite: bool = False) -> list[str]:
        """Store an uploaded knowledge file under the bare ``name``; returns its entry ids.

        An existing file is refused unless ``overwrite``. The content is re-serialised (indent 2).
        """
        if "/" in name or "\\" in name:
            why = "give a plain file name like faq.json, without folders"
            raise KnowledgeWriteError(f"upload name {name!r} refused: {why}")
        path, rel = self._resolve(name)
        with self._locked(rel):
            if path.exists() and not overwrite:
                raise KnowledgeWriteError(f"{rel} already exists; choose another name or allow overwriting")
            text = text.removeprefix("\ufeff")
            problems: list[KnowledgeProblem] = []
            # Validate the upload as sent, so line/column numbers in messages match the user's file.
            parse_text(text, path.stem, str(path), problems)
            if problems:
                raise KnowledgeError(problems)
            return [e.id for e in self._write(path, json.loads(text))]

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
        path = self.folder.joinpath(*parts) if parts else self.folder
        if not why and not path.resolve().is_relative_to(self.folder.resolve()):
            why = "it leads outside the knowledge folder"
        if why:
            raise KnowledgeWriteError(f"file name {file!r} refused: {why}")
        return path, "/".join(parts)

    @staticmethod
    def _index(rel: str, key: str, size: int) -> int:
        if not _INDEX.fullmatch(key) or int(key) >= size:
            raise KnowledgeWriteError(f"{rel} has no entry {key!r}; reload the list, it may have changed")
        return int(key)

    @contextmanager
    def _locked(self, rel: str) -> Iterator[None]:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        # Readable prefix for humans, hash so "a/b.json" and "a_b.json" never share a lock.
        digest = hashlib.sha256(rel.encode("utf-8")).hexdigest()[:16]
        lock_path = self.lock_dir / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', rel)[:60]}.{digest}.lock"
        # A fresh FileLock per call: each has its own descriptor, so threads exclude each other too.
        lock = FileLock(lock_path, timeout=self.timeout)
        try:
            lock.acquire()
        except Timeout:
            raise KnowledgeWriteError(
                f"{rel} is being changed by another edit (lock {lock_path} held for over {self.timeout:g} s); "
                "try again in a moment"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _read(self, path: Path, rel: str) -> dict | list | None:
        """The decoded file (None when missing); only a file that cannot be rewritten faithfully is refused."""
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise KnowledgeError([KnowledgeProblem(str(path), None, f"cannot read as UTF-8 text: {exc}")]) from None
        try:
            data = json.loads(text, object_pairs_hook=_strict_object)
        except JSON_ERRORS as exc:
            why = f"{json_problem(exc)}; fix it by hand or re-upload it"
            raise KnowledgeError([KnowledgeProblem(str(path), None, why)]) from None
        except _DuplicateKey as dup:
            why = f"key {dup.key!r} appears twice; fix it by hand (a rewrite would silently drop one copy)"
            raise KnowledgeError([KnowledgeProblem(str(path), None, why)]) from None
        if not isinstance(data, (dict, list)):
            why = "top level must be an object {id: entry} or a list of entries"
            raise KnowledgeError([KnowledgeProblem(str(path), None, why)])
        return data

    def _write(self, path: Path, data: dict | list) -> list[Entry]:
        """Validate the whole new file like the loader does, then replace it atomically; returns its entries."""
        text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
        problems: list[KnowledgeProblem] = []
        entries = parse_text(text, path.stem, str(path), problems)
        problems += self._duplicates(path, entries)
        if problems:
            raise KnowledgeError(problems)
        write_text_atomic(path, text)
        return entries

    def _duplicates(self, path: Path, entries: list[Entry]) -> list[KnowledgeProblem]:
        """Ids of ``entries`` that another knowledge file already defines (only same-stem files can clash)."""
        if not self.folder.is_dir():
            return []
        problems: list[KnowledgeProblem] = []
        ids = {e.id for e in entries}
        for other in knowledge_files(self.folder):
            if not _stems_may_clash(path.stem, other.stem) or other.resolve() == path.resolve():
                continue
            try:
                text = other.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError):
                continue  # the loader reports unreadable files itself; they define no ids
            for entry in parse_text(text, other.stem, str(other), []):
                if entry.id in ids:
                    problems.append(KnowledgeProblem(str(path), entry.id, f"duplicate id, also defined in {other}"))
        return problems
