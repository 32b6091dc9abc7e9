"""Background work for the indexes: one worker thread per index runs its jobs one at a time, off the request path.

A job submitted while an equal one (same key) still waits is merged into it: the caller gets the waiting job's
future. Jobs read what they need (the latest entries) when they start, so ten saves in a row cost one or two
syncs, not ten. The thread exists only while there is work: an idle worker holds no thread.

Requests come first (BENCHMARKS.md "Write while serving"). The processes a worker starts (fastText's training, the
jieba pool) run at a lower CPU priority (:func:`child_nice`), so a chat request is not queued behind them on a busy
CPU; the worker thread itself keeps its priority, since what it runs while holding the GIL (Python code, a garbage
collection) is what requests wait for. And while any worker runs, the interpreter's switch interval is 0.5 ms
instead of 5 ms: a request thread that wants the GIL while a worker runs Python (fastText's vocabulary and SIF
sums, tantivy's document loop) gets it within 0.5 ms, and a chat turn asks for it again after every tantivy call
(which releases it).
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

NICE = 10  # added to the nice value of the processes a worker starts (CFS weight 110 vs 1024: ~9:1 for requests)
SWITCH_INTERVAL = 0.0005  # seconds, sys.setswitchinterval() while a worker runs (CPython's default is 0.005)
_running = 0  # worker threads alive
_saved_interval: float | None = None  # the switch interval before the first of them started
_our_interval: float | None = None  # the one set then (as sys.getswitchinterval() reports it)
_interval_lock = threading.Lock()
_thread = threading.local()  # .worker is True on a worker's thread


def child_nice() -> int:
    """What a process started from the calling thread adds to its nice value: :data:`NICE` on a worker's thread
    (the app's background indexing), 0 elsewhere (the CLI, scripts)."""
    return NICE if getattr(_thread, "worker", False) else 0


def lower_priority(nice: int) -> None:
    """In a child process: add ``nice`` to its nice value (quietly keeps it where that is not permitted)."""
    if nice > 0:
        try:
            os.nice(nice)
        except OSError:
            pass


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


def wait_for(workers: Callable[[], list[Worker]], timeout: float | None = None, once: bool = False) -> bool:
    """Wait until none of ``workers()`` has a job, asked again as jobs start others (unless ``once``: the workers
    there are now, one pass); False when ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        current = workers()
        if not once and not any(w.busy() for w in current):
            return True
        for worker in current:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not worker.wait_idle(left):
                return False
        if once:
            return True


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
        _thread.worker = True
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
