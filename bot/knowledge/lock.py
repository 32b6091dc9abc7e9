"""The one writer lock of a knowledge folder: a thread lock plus an exclusive flock on one lock file.

Every write of the knowledge store holds it, so the cross-file checks (duplicate ids) and the write are one
step for every writer: threads of this process, other processes, and external scripts that take the same
lock (docs/knowledge.md "Knowledge"). Readers never take it: writes replace files atomically.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: filelock's msvcrt lock
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "knowledge.lock"


class LockTimeout(Exception):
    """The folder lock stayed held by another writer for longer than the timeout."""


class _Shared:
    """Per lock file and process: a thread lock, and the flocked descriptor while held."""

    def __init__(self) -> None:
        self.thread_lock = threading.Lock()
        self.fd: int | None = None
        self.fallback = None


_SHARED: dict[str, _Shared] = {}
_REGISTRY = threading.Lock()


def _reset_after_fork() -> None:
    # A forked child inherits no thread of the parent, so a lock one of them held must not block the child.
    global _REGISTRY
    _SHARED.clear()
    _REGISTRY = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _shared(path: Path) -> _Shared:
    key = os.path.abspath(path)
    with _REGISTRY:
        return _SHARED.setdefault(key, _Shared())


def _flock(path: Path, deadline: float) -> int | None:
    """An open descriptor of ``path`` holding an exclusive flock, or None when the deadline passed first.

    A busy lock is waited for by a blocking flock in a helper thread, so the kernel hands the lock over as soon
    as it is released (polling could lose every time to a writer that re-takes it at once).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        pass
    except BaseException:
        os.close(fd)
        raise
    guard = threading.Lock()
    got = threading.Event()
    state: dict = {"cancelled": False, "error": None}

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            state["error"] = exc
        with guard:
            if state["cancelled"]:  # the caller gave up: this thread owns fd now
                os.close(fd)
                return
            got.set()

    threading.Thread(target=wait, name="knowledge-lock-wait", daemon=True).start()
    got.wait(max(deadline - time.monotonic(), 0))
    with guard:
        if not got.is_set():
            state["cancelled"] = True
            return None
    if state["error"] is not None:
        os.close(fd)
        raise state["error"]
    return fd


class FolderLock:
    """Exclusive lock over ``lock_dir/knowledge.lock`` (not reentrant); never deletes the file."""

    def __init__(self, lock_dir: str | Path, timeout: float):
        self.path = Path(lock_dir) / LOCK_FILE
        self.timeout = timeout

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the body; raises LockTimeout when it is not free within the timeout."""
        deadline = time.monotonic() + self.timeout
        shared = _shared(self.path)
        if not shared.thread_lock.acquire(timeout=max(self.timeout, 0)):
            raise LockTimeout(str(self.path))
        try:
            self._acquire_os(shared, deadline)
            try:
                yield
            finally:
                self._release_os(shared)
        finally:
            shared.thread_lock.release()

    def _acquire_os(self, shared: _Shared, deadline: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows
            from filelock import FileLock, Timeout

            lock = FileLock(self.path, timeout=max(deadline - time.monotonic(), 0))
            try:
                lock.acquire()
            except Timeout:
                raise LockTimeout(str(self.path)) from None
            shared.fallback = lock
            return
        fd = _flock(self.path, deadline)
        if fd is None:
            raise LockTimeout(str(self.path))
        shared.fd = fd

    @staticmethod
    def _release_os(shared: _Shared) -> None:
        if shared.fallback is not None:  # pragma: no cover - Windows
            shared.fallback.release()
            shared.fallback = None
        if shared.fd is not None:
            fd, shared.fd = shared.fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
