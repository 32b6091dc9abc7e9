"""What an IM channel remembers, shared by every replica (``limits.backend: postgres``): each conversation's last
messages and the events already taken, as rows of the channel's tables in the database the replicas' limits use
(bot/serving/shared_limits.py: ``wecom_history`` / ``wecom_seen``, ``feishu_history`` / ``feishu_seen``).

Behind a load balancer the platform's next message, or its retry of a slow callback, may reach another replica:
kept in one process, the reply "2" to a clarify question would lose the question it answers, and a retried message
would be answered twice. Users are stored as their log session (a keyed hash) and questions masked as the
conversation log masks them. While the database cannot be reached each replica falls back to its own memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from bot.api.im.memory import Histories
from bot.messages import Message, said
from bot.serving.shared_limits import RateStore, hashed_key

Channel = Literal["wecom", "feishu"]  # the channels with tables in the shared schema
LABELS: dict[str, str] = {"wecom": "WeCom", "feishu": "Feishu"}


class LocalSeen(Protocol):
    """What a replica keeps of the events it took when the database is down: :class:`bot.api.im.memory.Seen`, or a
    channel's own store that outlives a restart."""

    ttl: float

    def first(self, key: str) -> bool: ...


def meanwhile(channel: Channel) -> str:
    """What the channel does while the shared database is down (for the store's log line)."""
    return f"{LABELS[channel]} messages are remembered in this replica's memory"


class SharedHistories:
    """:class:`Histories` in the shared database: the last ``size`` messages of a user within ``ttl`` seconds."""

    def __init__(
        self,
        store: RateStore,
        local: Histories,
        mask: Callable[[str], str | None],
        user_key: Callable[[str], str],
        channel: Channel,
    ):
        """``user_key``: the stored name of a user (the channel's keyed hash); ``mask``: the log's masking."""
        self.store, self.local, self.mask, self.user_key = store, local, mask, user_key
        self.table, self.meanwhile = f"{channel}_history", meanwhile(channel)  # a name from the schema, never input
        if local.ttl:  # expired messages are deleted by the store's periodic prune
            store.expiring[self.table] = local.ttl

    def get(self, user: str) -> list[Message]:
        """The user's recent messages, oldest first ([] when none or expired)."""
        local = self.local
        rows = self.store.transact(
            lambda conn: conn.execute(
                f"SELECT question, reply FROM {self.table} WHERE user_key = %s "
                "AND (%s = 0 OR at > clock_timestamp() - make_interval(secs => %s)) ORDER BY at DESC LIMIT %s",
                (self.user_key(user), local.ttl, local.ttl, (local.size + 1) // 2),
            ).fetchall(),
            self.meanwhile,
        )
        if rows is None:
            return local.get(user)
        turns: list[Message] = [m for q, r in reversed(rows) for m in (said("user", q), said("assistant", r))]
        return turns[-local.size :] if local.size else []

    def add(self, user: str, question: str, reply: str) -> None:
        """Remember one exchange of ``user`` (the question masked as the log stores it)."""
        if not self.local.size:
            return
        stored = self.mask(question) or ""

        def write(conn: Any) -> bool:
            conn.execute(
                f"INSERT INTO {self.table} (user_key, question, reply) VALUES (%s, %s, %s)",
                (self.user_key(user), stored, reply),
            )
            return True

        if self.store.transact(write, self.meanwhile) is None:
            self.local.add(user, question, reply)


class SharedSeen:
    """Events taken, in the shared database: a key is taken by one replica only, within ``ttl`` seconds."""

    def __init__(self, store: RateStore, local: LocalSeen, channel: Channel):
        self.store, self.local = store, local
        self.table, self.meanwhile = f"{channel}_seen", meanwhile(channel)
        store.expiring[self.table] = local.ttl  # expired keys are deleted by the store's periodic prune

    def first(self, key: str) -> bool:
        """True the first time any replica offers ``key`` (within ``ttl``), False for a repeat."""
        hashed = hashed_key(key)

        def take(conn: Any) -> bool:
            conn.execute(
                f"DELETE FROM {self.table} WHERE key = %s AND at < clock_timestamp() - make_interval(secs => %s)",
                (hashed, self.local.ttl),
            )
            row = conn.execute(
                f"INSERT INTO {self.table} (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING 1", (hashed,)
            ).fetchone()
            return row is not None

        first = self.store.transact(take, self.meanwhile)
        return self.local.first(key) if first is None else first
