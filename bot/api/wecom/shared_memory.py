"""What the WeCom channel remembers, shared by every replica (``limits.backend: postgres``): each user's last messages
and the messages already taken, as rows in the database the replicas' limits use (bot/chat/shared_limits.py).

Behind a load balancer WeCom's next message, or its retry of a slow callback, may reach another replica: kept in one
process, the reply "2" to a clarify question would lose the question it answers, and a retried message would be
answered twice. Users are stored as their log session (an HMAC of the UserID) and questions masked as the
conversation log masks them. While the database cannot be reached each replica falls back to its own memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from bot.api.wecom.memory import Histories, Seen
from bot.chat.shared_limits import RateStore

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS wecom_history (user_key text NOT NULL, at timestamptz NOT NULL "
    "DEFAULT clock_timestamp(), question text NOT NULL, reply text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS wecom_history_user ON wecom_history (user_key, at)",
    "CREATE TABLE IF NOT EXISTS wecom_seen (key text PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())",
)
PRUNE_EVERY = 200  # writes between deletions of expired rows


class _Tables:
    """Creates the channel's tables once per store, before its first statement."""

    def __init__(self, store: RateStore):
        self.store, self.ready, self.writes = store, False, 0

    def run(self, what: str, statement: Callable[[Any], None]) -> bool:
        def with_schema(conn: Any) -> None:
            if not self.ready:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('kbbot-wecom-schema', 0))")
                    for create in SCHEMA:
                        conn.execute(create)
                self.ready = True
            statement(conn)

        return self.store.run(f"WeCom {what}", with_schema)

    def due(self) -> bool:
        """True every PRUNE_EVERY writes: time to delete expired rows."""
        self.writes += 1
        return self.writes % PRUNE_EVERY == 0


class SharedHistories:
    """:class:`Histories` in the shared database: the last ``size`` messages of a user within ``ttl`` seconds."""

    def __init__(
        self, store: RateStore, local: Histories, mask: Callable[[str], str | None], user_key: Callable[[str], str]
    ):
        """``user_key``: the stored name of a UserID (the channel's keyed hash); ``mask``: the log's masking."""
        self.tables, self.local, self.mask, self.user_key = _Tables(store), local, mask, user_key

    def get(self, user: str) -> list[dict[str, str]]:
        """The user's recent messages, oldest first ([] when none or expired)."""
        rows: list[tuple[str, str]] = []
        local = self.local

        def read(conn: Any) -> None:
            rows.extend(
                conn.execute(
                    "SELECT question, reply FROM wecom_history WHERE user_key = %s "
                    "AND (%s = 0 OR at > clock_timestamp() - make_interval(secs => %s)) ORDER BY at DESC LIMIT %s",
                    (self.user_key(user), local.ttl, local.ttl, (local.size + 1) // 2),
                ).fetchall()
            )

        if not self.tables.run("history", read):
            return local.get(user)
        turns = [
            m for q, r in reversed(rows) for m in ({"role": "user", "content": q}, {"role": "assistant", "content": r})
        ]
        return turns[-local.size :] if local.size else []

    def add(self, user: str, question: str, reply: str) -> None:
        """Remember one exchange of ``user`` (the question masked as the log stores it)."""
        if not self.local.size:
            return
        stored = self.mask(question) or ""

        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO wecom_history (user_key, question, reply) VALUES (%s, %s, %s)",
                (self.user_key(user), stored, reply),
            )
            if self.tables.due() and self.local.ttl:
                conn.execute(
                    "DELETE FROM wecom_history WHERE at < clock_timestamp() - make_interval(secs => %s)",
                    (self.local.ttl,),
                )

        if not self.tables.run("history", write):
            self.local.add(user, question, reply)


class SharedSeen:
    """:class:`Seen` in the shared database: a message key is taken by one replica only, within ``ttl`` seconds."""

    def __init__(self, store: RateStore, local: Seen):
        self.tables, self.local = _Tables(store), local

    def first(self, key: str) -> bool:
        """True the first time any replica offers ``key`` (within ``ttl``), False for a repeat."""
        taken: list[bool] = []
        hashed = _key(key)

        def take(conn: Any) -> None:
            with conn.transaction():
                conn.execute(
                    "DELETE FROM wecom_seen WHERE key = %s AND at < clock_timestamp() - make_interval(secs => %s)",
                    (hashed, self.local.ttl),
                )
                row = conn.execute(
                    "INSERT INTO wecom_seen (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING 1", (hashed,)
                ).fetchone()
            taken.append(row is not None)
            if self.tables.due():
                conn.execute(
                    "DELETE FROM wecom_seen WHERE at < clock_timestamp() - make_interval(secs => %s)", (self.local.ttl,)
                )

        return taken[0] if self.tables.run("message check", take) else self.local.first(key)


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
