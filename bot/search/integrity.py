"""Integrity checks of index files, a probe of a suspect index, and stale temporary files removed.

The temporary files are those a killed process left behind.

- tantivy writes a footer with the CRC32 of each file's body; :func:`tantivy_problem` checks every file of the
  segments ``meta.json`` lists (tantivy itself only checks footers when it opens a file, so random bytes in a
  body used to surface as a panic in the middle of a chat).
- FAISS and fastText files get a digest (:func:`file_digest`) stored beside them and checked before loading.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import struct
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from bot.knowledge.entries import Entry
from bot.search.base import Retriever, Searcher

log = logging.getLogger(__name__)

_STARTED = time.time()  # files named with our own pid but older than this were left by an earlier process
_FOOTER_MAGIC = 1337
# Temporary names we create: ".<file>.<pid>[.<thread>].tmp", ".corpus-<pid>-*.txt", ".kbbot-ft-<pid>-*" (folders).
_TEMP = [
    re.compile(r"^\..+?\.(\d+)(?:\.\d+)?\.tmp$"),
    re.compile(r"^\.corpus-(\d+)-.*\.txt$"),
    re.compile(r"^\.kbbot-ft-(\d+)-.+$"),
]
_OLD_CORPUS = re.compile(r"^\.corpus-[^-]+\.txt$")  # from before pids were in the name: removed after an hour


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tantivy_problem(path: Path) -> str | None:
    """Why the tantivy index at ``path`` is damaged (a file whose body does not match its footer's CRC32), or None."""
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    for segment in meta.get("segments", []):
        stem = segment["segment_id"].replace("-", "")
        deletes = segment.get("deletes") or {}
        for file in path.glob(f"{stem}.*"):
            if file.suffix == ".del" and file.name != f"{stem}.{deletes.get('opstamp')}.del":
                continue  # deletes of an older commit: not read
            data = file.read_bytes()
            if len(data) < 8:
                return f"{file.name} is cut short"
            size, magic = struct.unpack("<II", data[-8:])
            if magic != _FOOTER_MAGIC or size + 8 > len(data):
                return f"{file.name} has no valid footer"
            try:
                crc = json.loads(data[-8 - size : -8])["crc"]
            except (ValueError, KeyError, TypeError):
                return f"{file.name} has an unreadable footer"
            if zlib.crc32(data[: -8 - size]) != crc:
                return f"{file.name} does not match its checksum"
    return None


def probe(searcher: Retriever, entries: Sequence[Entry], samples: int = 3) -> str | None:
    """Search a few entries' questions; the error as text when the index cannot answer them, else None."""
    step = max(1, len(entries) // samples)
    sampled: list[Entry | None] = [*list(entries)[::step][:samples]]
    for entry in sampled or [None]:
        try:
            searcher.search(entry.query if entry else "知识 knowledge", 3)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def index_damage(leaf: Searcher, entries: Sequence[Entry]) -> str | None:
    """Why ``leaf``'s index cannot serve after a search failed on it, or None when the failure was not its own.

    Its ``check()`` (no index, a file not matching its checksum), else a probe search that fails.
    """
    try:
        reason = leaf.check()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return reason or probe(leaf, entries)


def _pid_gone(pid: int, mtime: float) -> bool:
    if pid == os.getpid():
        return mtime < _STARTED
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def clean_stale_temp(folders: Iterable[Path]) -> int:
    """Remove temporary files and folders under ``folders`` whose owning process is gone; returns bytes freed."""
    freed = 0
    for folder in folders:
        if not Path(folder).is_dir():
            continue
        for root, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                found = next((m for m in (p.match(name) for p in _TEMP) if m), None)
                path = Path(root) / name
                try:
                    mtime = path.stat().st_mtime
                    stale = (
                        _pid_gone(int(found.group(1)), mtime)
                        if found
                        else bool(_OLD_CORPUS.match(name)) and time.time() - mtime > 3600
                    )
                    if not stale:
                        continue
                    if path.is_dir():
                        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
                        shutil.rmtree(path)
                        dirs.remove(name)
                    else:
                        size = path.stat().st_size
                        path.unlink()
                except OSError as exc:
                    log.warning("could not remove the temporary %s: %s", path, exc)
                    continue
                freed += size
                log.info("removed %s, left by a process that is gone (%d bytes)", path, size)
    return freed
