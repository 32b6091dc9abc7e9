"""The IM events already taken, in a SQLite file of the state folder: Feishu retries an event for hours (5 s, 5 min,
1 h, 6 h), WeCom retries a slow callback, and a signed request can be replayed within the clock window, so an event
id must be remembered across a restart, not only in memory. Ids older than the window are deleted now and then.

While the file cannot be written (a full or read-only disk) the ids are kept in memory, and that is logged.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bot.api.im.memory import Seen
from bot.serving.shared_limits import hashed_key

log = logging.getLogger(__name__)

PRUNE_EVERY = 200  # takes between deletions of the expired ids


class SeenFile:
    """Event ids taken in the last ``ttl`` seconds, kept in the SQLite file ``path``: each is taken once. ``channel``
    names the platform in log lines."""

    def __init__(self, path: Path, ttl: float, channel: str, clock: Callable[[], float] = time.time):
        self.path, self.ttl, self.clock = path, ttl, clock  # wall-clock time: it must mean the same after a restart
        self.channel = channel
        self.memory = Seen(ttl)  # while the file cannot be written
        self._connection: sqlite3.Connection | None = None
        self._takes = 0
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False)
            connection.execute("CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY, at REAL NOT NULL)")
            self._connection = connection
        return self._connection

    def first(self, key: str) -> bool:
        """True the first time ``key`` is offered (within ``ttl``, across restarts), False for a repeat."""
        key = hashed_key(key)  # a WeCom event key holds the member's UserID: the file keeps none
        with self._lock:
            now = self.clock()
            try:
                connection = self._open()
                with connection:  # one transaction: a concurrent replica on the same file waits for it
                    connection.execute("DELETE FROM seen WHERE key = ? AND at < ?", (key, now - self.ttl))
                    taken = connection.execute("INSERT OR IGNORE INTO seen VALUES (?, ?)", (key, now)).rowcount == 1
                    self._takes += 1
                    if self._takes % PRUNE_EVERY == 0:
                        connection.execute("DELETE FROM seen WHERE at < ?", (now - self.ttl,))
                return taken
            except (sqlite3.Error, OSError) as exc:
                log.error(
                    "%s events taken cannot be kept in %s (%s); kept in memory meanwhile", self.channel, self.path, exc
                )
                self.close()
                return self.memory.first(key)

    def close(self) -> None:
        """Close the file (the next event opens it again)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
