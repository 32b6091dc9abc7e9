"""Crash-safe file writes shared by the knowledge store and the on-disk indexes."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so readers (and crashes) see the old file or the new one, never half."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`write_text_atomic`)."""
    # Hidden name: knowledge_files skips it, so a temp file left by a crash never breaks loading.
    tmp = temp_beside(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def temp_beside(path: Path) -> Path:
    """A hidden temporary name next to ``path`` (same folder, so :func:`commit_file` is a rename) for a writer
    that needs a path of its own (faiss.write_index, fastText training)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def commit_file(tmp: Path, path: Path) -> None:
    """Make the finished file ``tmp`` become ``path`` durably: its data synced, renamed over ``path`` (readers see
    the old file or the new one), the rename synced. ``tmp`` is removed if that fails."""
    try:
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_json_atomic(path: Path, data: object) -> None:
    """Write JSON atomically (see :func:`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False))
