"""What the WeCom channel remembers: each user's last messages, in memory (WeCom sends no history, and a reply "2"
needs the question it answers), and the messages already taken (WeCom retries a slow callback with the same MsgId;
a captured callback may be replayed), also kept in a file of the state folder so a restart does not forget them.
Both are bounded in size and time."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path

from bot.chat.shared_limits import hashed_key

log = logging.getLogger(__name__)


class Histories:
    """The last ``size`` messages of each user, forgotten ``ttl`` seconds after their last message; at most
    ``max_users`` users (the least recently active is dropped first)."""

    def __init__(self, size: int, ttl: float, max_users: int, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl, self.max_users, self.clock = size, ttl, max_users, clock
        self._users: OrderedDict[str, tuple[float, deque[dict[str, str]]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user: str) -> list[dict[str, str]]:
        """The user's recent messages, oldest first ([] when none or expired)."""
        with self._lock:
            found = self._users.get(user)
            if found is None:
                return []
            if self.ttl and self.clock() - found[0] > self.ttl:
                del self._users[user]
                return []
            return list(found[1])

    def add(self, user: str, question: str, reply: str) -> None:
        """Remember one exchange of ``user``."""
        if not self.size:
            return
        with self._lock:
            now = self.clock()
            found = self._users.pop(user, None)
            turns = found[1] if found and not (self.ttl and now - found[0] > self.ttl) else deque(maxlen=self.size)
            turns.append({"role": "user", "content": question})
            turns.append({"role": "assistant", "content": reply})
            self._users[user] = (now, turns)
            while len(self._users) > self.max_users:
                self._users.popitem(last=False)

    def __len__(self) -> int:
        return len(self._users)


class Seen:
    """Message keys taken in the last ``ttl`` seconds (at most ``limit``): a retried or replayed message is taken
    once. With ``path`` the keys (hashed) and when they were taken are appended to that file and read back at start,
    so a callback replayed after a restart is still refused; the file keeps only the keys within ``ttl``."""

    def __init__(
        self, ttl: float, limit: int = 100_000, clock: Callable[[], float] = time.time, path: Path | None = None
    ):
        self.ttl, self.limit, self.clock, self.path = ttl, limit, clock, path
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._appended = 0
        if path is not None:
            self._load(path)

    def first(self, key: str) -> bool:
        """True the first time ``key`` is offered (within ``ttl``), False for a repeat."""
        hashed = hashed_key(key)
        with self._lock:
            now = self.clock()
            self._expire(now)
            if hashed in self._keys:
                return False
            self._keys[hashed] = now
            self._append(hashed, now)
            return True

    def _expire(self, now: float) -> None:
        while self._keys and (now - next(iter(self._keys.values())) > self.ttl or len(self._keys) >= self.limit):
            self._keys.popitem(last=False)

    def _load(self, path: Path) -> None:
        """The keys of ``path`` still within ``ttl``; the file rewritten with only those."""
        try:
            lines = path.read_text(encoding="ascii").splitlines()
        except FileNotFoundError:
            lines = []
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("WeCom's taken messages in %s are unreadable (%s); starting without them", path, exc)
            lines = []
        for line in lines:
            when, _, hashed = line.partition(" ")
            try:
                self._keys[hashed] = float(when)
            except ValueError:
                continue  # a line cut by a crash
        self._expire(self.clock())
        self._rewrite()

    def _append(self, hashed: str, now: float) -> None:
        """Note one taken key in the file; rewrite it once it holds many more lines than live keys."""
        if self.path is None:
            return
        try:
            with self.path.open("a", encoding="ascii") as out:
                out.write(f"{now:.3f} {hashed}\n")
        except OSError as exc:
            log.warning(
                "cannot note a taken WeCom message in %s (%s); a replay after a restart may be answered", self.path, exc
            )
            return
        self._appended += 1
        if self._appended > max(1000, 2 * len(self._keys)):
            self._rewrite()

    def _rewrite(self) -> None:
        """The file replaced (atomically) by the live keys."""
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            temp.write_text("".join(f"{at:.3f} {k}\n" for k, at in self._keys.items()), encoding="ascii")
            os.replace(temp, self.path)
            self._appended = 0
        except OSError as exc:
            log.warning("cannot write WeCom's taken messages to %s (%s)", self.path, exc)
