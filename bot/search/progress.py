"""How far an index sync has got: texts written of how many, and the time left at the rate so far.

A sync reports through ``Progress`` callables (texts done since the last call); an object with a ``start(total)``
method also hears how many texts the sync will write (the entries added or changed, long ones as their passages),
so that done and total count the same things.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Snapshot:
    """One index's build as the header shows it."""

    name: str
    done: int
    total: int
    seconds_left: float | None

    def describe(self) -> str:
        """E.g. 'faiss 120/342 (35%), about 40 s left'."""
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        left = f", about {format_seconds(self.seconds_left)} left" if self.seconds_left is not None else ""
        return f"{self.name} {self.done:,}/{self.total:,}{pct}{left}"


def format_seconds(seconds: float) -> str:
    """'40 s', '3 min'."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


class BuildProgress:
    """A Progress callable that remembers done/total and when the sync started (thread-safe reads); every report
    (and the total) also goes on to ``relay`` when given (the CLI's progress bar)."""

    def __init__(
        self, name: str, relay: Callable[[int], None] | None = None, clock: Callable[[], float] = time.monotonic
    ):
        self.name = name
        self.relay = relay
        self.clock = clock
        self.total = 0
        self.done = 0
        self.started = clock()
        self._lock = threading.Lock()

    def start(self, total: int) -> None:
        """The sync will write ``total`` texts."""
        with self._lock:
            self.total, self.done, self.started = total, 0, self.clock()
        announce(self.relay, total)

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
        if self.relay is not None:
            self.relay(n)

    def snapshot(self) -> Snapshot:
        """Done, total and the time left at the rate so far (None before the first texts are done)."""
        with self._lock:
            done, total, elapsed = min(self.done, self.total), self.total, self.clock() - self.started
        left = elapsed * (total - done) / done if done and total else None
        return Snapshot(self.name, done, total, left)


def announce(progress: object, total: int) -> None:
    """Tell ``progress`` the sync's total, when it wants to know (see the module docstring)."""
    start = getattr(progress, "start", None)
    if callable(start):
        start(total)
