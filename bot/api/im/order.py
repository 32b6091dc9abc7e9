"""One conversation's messages answered in the order they came, on a shared pool of answering threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")


class InOrder:
    """Runs each job on ``pool`` once the job submitted before it under the same key is done."""

    def __init__(self, pool: ThreadPoolExecutor):
        self.pool = pool
        self._lock = threading.Lock()
        self._last: dict[str, Future] = {}  # each key's latest job, until it is done

    def submit(self, key: str, job: Callable[[], T]) -> Future[T]:
        """Queue ``job`` behind ``key``'s earlier job (a conversation's next turn reads the history the last one
        wrote, and its reply must not overtake the last reply)."""
        # The pool takes jobs in the order submitted, so the job waited for was taken first: it runs, or is done.
        with self._lock:
            before = self._last.get(key)
            future = self.pool.submit(_after, before, job)
            self._last[key] = future
        future.add_done_callback(lambda done: self._forget(key, done))
        return future

    def _forget(self, key: str, done: Future) -> None:
        with self._lock:
            if self._last.get(key) is done:
                del self._last[key]


def _after(before: Future | None, job: Callable[[], T]) -> T:
    if before is not None:
        wait([before])
    return job()
