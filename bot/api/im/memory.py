"""What an IM channel remembers in memory: each conversation's last messages (WeCom and Feishu send no history, and
a reply "2" needs the question it answers) and the events already taken (both platforms retry a callback they got
no timely answer to, with the same id). Both are bounded in size and time; nothing here is written to disk."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from bot.messages import Message


class Histories:
    """The last ``size`` messages of each user, forgotten ``ttl`` seconds after their last message; at most
    ``max_users`` users (the least recently active is dropped first)."""

    def __init__(self, size: int, ttl: float, max_users: int, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl, self.max_users, self.clock = size, ttl, max_users, clock
        self._users: OrderedDict[str, tuple[float, deque[Message]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user: str) -> list[Message]:
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
    """Message keys taken in the last ``ttl`` seconds (at most ``limit``): a retried message is taken once."""

    def __init__(self, ttl: float, limit: int = 100_000, clock: Callable[[], float] = time.monotonic):
        self.ttl, self.limit, self.clock = ttl, limit, clock
        self._keys: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first(self, key: str) -> bool:
        """True the first time ``key`` is offered (within ``ttl``), False for a repeat."""
        with self._lock:
            now = self.clock()
            while self._keys and (now - next(iter(self._keys.values())) > self.ttl or len(self._keys) >= self.limit):
                self._keys.popitem(last=False)
            if key in self._keys:
                return False
            self._keys[key] = now
            return True
