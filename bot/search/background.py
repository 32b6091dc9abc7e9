"""Background work for the indexes: one worker thread per index runs its jobs one at a time, off the request path.

A job submitted while an equal one (same key) still waits is merged into it: the caller gets the waiting job's
future. Jobs read what they need (the latest entries) when they start, so ten saves in a row cost one or two
syncs, not ten. The thread exists only while there is work: an idle worker holds no thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)


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
