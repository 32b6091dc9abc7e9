"""Healing instead of failing: integrity checks of the files we read, a stand-in while an index is (re)built, and
the removal of temporary files that a killed process left behind.

- tantivy writes a footer with the CRC32 of each file's body; :func:`tantivy_problem` checks every file of the
  segments ``meta.json`` lists (tantivy itself only checks footers when it opens a file, so random bytes in a
  body used to surface as a panic in the middle of a chat).
- FAISS and fastText files get a digest (:func:`file_digest`) stored beside them and checked before loading.
- :class:`ServedSearcher` is what a mode serves in a server: its own searcher, or another mode's while its index
  builds or heals, with a visible notice; a search error marks the mode for healing and never reaches the chat.
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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from bot.errors import ConfigError
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search.base import Composite, Found, Hit, ModeSearcher, Retriever, Searcher
from bot.texts import HEALING_ALONE

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
    """Why ``leaf``'s index cannot serve after a search failed on it (its ``check()``: no index, a file not matching
    its checksum; else a probe search that fails), or None: then the failure was not the index's."""
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


class ServedSearcher(Composite):
    """What a mode serves now: its own searcher, or a stand-in (another mode's searcher, or none) with a notice.

    Resolved once per request and never changed after: :meth:`find` reports each search's facts (the system whose
    thresholds apply, the notices, a failure) in a :class:`Found`. A search error is reported through ``on_error``
    (which schedules the healing) and answered with no hits.
    """

    def __init__(
        self,
        mode: str,
        target: ModeSearcher | None,
        notice: str | None = None,
        on_error: Callable[[ModeSearcher, BaseException], None] | None = None,
    ):
        self.mode, self.target, self.notice, self._on_error = mode, target, notice, on_error
        self.name = target.name if target is not None else "none"
        self.system = target.system if target is not None else "sparse"

    @property
    def standing_in(self) -> bool:
        """True when this is not the mode's own searcher (building, healing or missing)."""
        return self.notice is not None

    def notices(self) -> tuple[str, ...]:
        """The stand-in notice and those its indexes were built with (e.g. Elasticsearch down), once each."""
        built = [self.target, *self.leaves()] if self.target is not None else []
        found = [self.notice, *(s.notice for s in built)]
        return tuple(n for n in dict.fromkeys(found) if n)

    def find(self, query: str, top_k: int, within: EntryFilter | None = None) -> Found:
        """The target's hits and what answered them; no hits and ``failed`` (healing scheduled) when it raised."""
        if self.target is None:
            return Found((), self.system, self.name, self.notices(), standing_in=self.standing_in)
        try:
            hits = self.target.search(query, top_k, within)
        except (KeyboardInterrupt, SystemExit, ConfigError):
            raise
        except BaseException as exc:
            if self._on_error is None:  # nothing heals it (scripts, the CLI): the caller sees the error
                raise
            log.error(
                "search failed in mode %s (%s): %s; healing the index in the background",
                self.mode,
                type(exc).__name__,
                exc,
            )
            self._on_error(self.target, exc)
            return Found(
                (), self.system, self.name, (*self.notices(), HEALING_ALONE), failed=True, standing_in=self.standing_in
            )
        return Found(tuple(hits), self.system, self.name, self.notices(), standing_in=self.standing_in)

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The hits of :meth:`find` (for callers that only rank, e.g. the linter)."""
        return list(self.find(query, top_k, within).hits)

    def leaves(self) -> list[Searcher]:
        """The target's leaves (their notices show too)."""
        return self.target.leaves() if self.target is not None else []

    def check(self) -> str | None:
        """The target's (no searcher: none can serve)."""
        return self.target.check() if self.target is not None else "no searcher"
