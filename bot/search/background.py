"""Background work for the indexes: one worker thread per index runs its jobs one at a time, off the request path.

A job submitted while an equal one (same key) still waits is merged into it: the caller gets the waiting job's
future. Jobs read what they need (the latest entries) when they start, so ten saves in a row cost one or two
syncs, not ten. The thread exists only while there is work: an idle worker holds no thread.

Requests come first (BENCHMARKS.md "Write while serving"). A worker thread runs at a lower CPU priority (Linux
keeps a nice value per thread; the processes it starts, fastText's training and the jieba pool, inherit it), so a
chat request is not queued behind indexing on a busy CPU. And while any worker runs, the interpreter's switch
interval is 0.5 ms instead of 5 ms: a request thread that wants the GIL while a worker runs Python (fastText's
vocabulary and SIF sums, tantivy's document loop) gets it within 0.5 ms, and a chat turn asks for it again after
every tantivy call (which releases it).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)

NICE = 10  # added to the process's nice value for worker threads (CFS weight 110 vs 1024: ~9:1 for requests)
SWITCH_INTERVAL = 0.0005  # seconds, sys.setswitchinterval() while a worker runs (CPython's default is 0.005)
_running = 0  # worker threads alive
_saved_interval: float | None = None  # the switch interval before the first of them started
_our_interval: float | None = None  # the one set then (as sys.getswitchinterval() reports it)
_interval_lock = threading.Lock()


def _lower_priority() -> None:
    """Give the calling worker thread (only it: Linux keeps a nice value per thread) a lower CPU priority."""
    if not sys.platform.startswith("linux"):  # elsewhere a thread id is no process id: setpriority could hit another
        return
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + NICE)
        tid = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
    except OSError as exc:  # not permitted here (a sandbox): run at the normal priority
        log.debug("background thread priority unchanged: %s", exc)


def _started() -> None:
    """A worker thread starts: the first one shortens the switch interval."""
    global _running, _saved_interval, _our_interval
    with _interval_lock:
        _running += 1
        if _running == 1:
            _saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved_interval, SWITCH_INTERVAL))
            _our_interval = sys.getswitchinterval()


def _stopped() -> None:
    """A worker thread ends: the last one restores the switch interval (unless someone else changed it since)."""
    global _running, _saved_interval, _our_interval
    with _interval_lock:
        _running -= 1
        if _running == 0 and _saved_interval is not None:
            if sys.getswitchinterval() == _our_interval:
                sys.setswitchinterval(_saved_interval)
            _saved_interval = _our_interval = None


class Worker:
    """Runs submitted jobs one at a time on its own daemon thread; equal waiting jobs are merged."""

    def __init__(self, name: str):
        self.name = name
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, tuple[Callable[[], Any], Future]] = OrderedDict()
        self._running: str | None = None
        self._thread: threading.Thread | None = None

    def submit(self, key: str, job: Callable[[], Any]) -> Future:
        """Queue ``job`` under ``key`` (or join the waiting job with that key); returns its future."""
        with self._cond:
            if key in self._queue:
                return self._queue[key][1]
            future: Future = Future()
            self._queue[key] = (job, future)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"kbbot-{self.name}", daemon=True)
                self._thread.start()
            return future

    def busy(self, key: str | None = None) -> bool:
        """True while a job (with ``key``, when given) waits or runs."""
        with self._cond:
            if key is None:
                return bool(self._queue) or self._running is not None
            return key in self._queue or self._running == key

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no job waits or runs; False when ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _run(self) -> None:
        _lower_priority()
        _started()
        try:
            self._loop()
        finally:
            _stopped()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._thread = None
                    self._cond.notify_all()
                    return
                key, (job, future) = self._queue.popitem(last=False)
                self._running = key
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as exc:
                    log.debug("background job %s/%s failed: %s", self.name, key, exc)
                    future.set_exception(exc)
            with self._cond:
                self._running = None
                self._cond.notify_all()
