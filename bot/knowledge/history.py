"""Earlier versions of knowledge files, kept by every store write under ``state_dir/history/<file>/``."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.fsutil import write_bytes_atomic

_STAMP = "%Y%m%dT%H%M%S%fZ"
_VERSION = re.compile(r"(\d{8}T\d{12}Z)-([0-9a-f]{12})")


@dataclass(frozen=True)
class FileVersion:
    """One kept version of a knowledge file: its id ('<timestamp>-<hash>'), when it was replaced, size."""

    version: str
    time: str
    entries: int | None
    size: int

    def to_dict(self) -> dict:
        """The version as a plain dict (for JSON output)."""
        return {"version": self.version, "time": self.time, "entries": self.entries, "size": self.size}


def count_entries(data: bytes) -> int | None:
    """How many entries a knowledge file's content holds (None when it is not a JSON object or list)."""
    try:
        data = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return len(data) if isinstance(data, (dict, list)) else None


class History:
    """The kept versions of every knowledge file, newest ``keep`` per file (0 keeps none)."""

    def __init__(self, folder: str | Path, keep: int):
        self.folder = Path(folder)
        self.keep = keep

    def keep_version(self, rel: str, data: bytes) -> str | None:
        """Keep ``data`` (the file's bytes, as they were) as the newest version of ``rel``; returns its version id.

        Only called under the folder lock. Content equal to the newest kept version is not stored twice; None
        when history is off.
        """
        if self.keep <= 0:
            return None
        folder = self._dir(rel)
        digest = hashlib.sha256(data).hexdigest()[:12]
        existing = self._names(folder)
        if existing and existing[-1].endswith(f"-{digest}"):
            return existing[-1]
        now = datetime.now(UTC)
        if existing:  # names must sort in write order, even if the clock steps back
            last = datetime.strptime(existing[-1].split("-")[0], _STAMP).replace(tzinfo=UTC)
            now = max(now, last + timedelta(microseconds=1))
        version = f"{now.strftime(_STAMP)}-{digest}"
        write_bytes_atomic(folder / f"{version}.json", data)
        for old in existing[: max(len(existing) + 1 - self.keep, 0)]:
            (folder / f"{old}.json").unlink(missing_ok=True)
        return version

    def versions(self, rel: str) -> list[FileVersion]:
        """The kept versions of ``rel``, newest first."""
        folder = self._dir(rel)
        out = []
        for name in reversed(self._names(folder)):
            path = folder / f"{name}.json"
            try:
                data = path.read_bytes()
            except OSError:
                continue
            stamp = datetime.strptime(name.split("-")[0], _STAMP).replace(tzinfo=UTC)
            out.append(FileVersion(name, stamp.isoformat(timespec="seconds"), count_entries(data), len(data)))
        return out

    def content(self, rel: str, version: str) -> bytes | None:
        """The bytes of one kept version (``version`` as listed, '.json' optional), None when there is none."""
        version = version.strip().removesuffix(".json")
        if not _VERSION.fullmatch(version):
            return None
        try:
            return (self._dir(rel) / f"{version}.json").read_bytes()
        except OSError:
            return None

    def _dir(self, rel: str) -> Path:
        return self.folder.joinpath(*rel.split("/"))

    @staticmethod
    def _names(folder: Path) -> list[str]:
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if p.is_file() and _VERSION.fullmatch(p.stem))
