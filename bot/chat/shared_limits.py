"""Rate limits and admin logouts that hold across replicas, in PostgreSQL (``limits.backend: postgres``).

Behind a load balancer each replica's in-memory limiter (bot/chat/ratelimit.py) counts only what reached it, so a
client hitting three replicas gets three times its limit. Here the events of every replica are rows of one table
in the conversation log's database (``log.postgres.dsn_env``): the same sliding window, exact, on the database's
clock (replicas' clocks may differ). A key's check-and-count runs under a transaction-scoped advisory lock on that
key, so two replicas cannot both take the last slot. Keys are stored hashed: they are tokens, sessions and client
addresses. When the database cannot be reached the limiter lets the message through and logs it (the chat keeps
working, as the conversation log does), retrying the connection at most every ``RETRY_SECONDS``.

Login throttling (bot/chat/shared_logins.py) keeps its failures here as well. An admin's logout is a row of
``revoked_sessions``, so a copy of the logged-out cookie is refused by every
replica that shares the signing key (``ui.admin.session_key_env``), not only the one that saw the logout.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import Any

from bot.conversations.pg_log import pg_dsn, psycopg_module
from bot.errors import ConfigError

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0  # after a failed connection, limiters let messages through this long before trying again
PRUNE_EVERY = 500  # checks between deletions of events older than the longest window
FORGET_LOGIN_FAILURES = 900.0  # seconds: an idle, unlocked pair's failures are forgotten (the longest lockout)
SCHEMA_LOCK = 7_402_417  # advisory lock id: replicas starting at once create the table one at a time
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rate_events (limiter text NOT NULL, key text NOT NULL, "
    "at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX IF NOT EXISTS rate_events_key ON rate_events (limiter, key, at)",
    "CREATE TABLE IF NOT EXISTS revoked_sessions (session text PRIMARY KEY, expires timestamptz NOT NULL)",
    # bot/chat/shared_logins.py: wrong passwords per username + address (hashed), and its lockouts
    "CREATE TABLE IF NOT EXISTS login_failures (pair text PRIMARY KEY, count int NOT NULL, lockouts int NOT NULL, "
    "locked_until timestamptz NOT NULL, last timestamptz NOT NULL)",
)


class RateStore:
    """One PostgreSQL connection holding every shared limiter's events (one per process and DSN)."""

    def __init__(self, dsn: str, where: str, connect_timeout: int):
        self.psycopg = psycopg_module("limits.backend", ConfigError)
        self._dsn, self.where, self.connect_timeout = dsn, where, connect_timeout
        self._conn: Any = None
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._checks = 0
        self.longest = 60.0  # the longest window of a limiter using this store: older events are pruned

    def _connection(self) -> Any:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._conn = self.psycopg.connect(
            self._dsn, autocommit=True, connect_timeout=self.connect_timeout, application_name="kbbot-limits"
        )
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in SCHEMA:
                self._conn.execute(statement)
        return self._conn

    def allow(self, limiter: str, key: str, max_events: int, window: float) -> bool:
        """Count one event of ``key`` for ``limiter`` when fewer than ``max_events`` happened in the last ``window``
        seconds on any replica; True when it was counted. True (and an error logged) when the database is down."""
        hashed = hashlib.sha256(key.encode()).hexdigest()[:32]
        with self._lock:
            if time.monotonic() < self._down_until:
                return True
            try:
                conn = self._connection()
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{limiter}/{hashed}",))
                    (count,) = conn.execute(
                        "SELECT count(*) FROM rate_events WHERE limiter = %s AND key = %s "
                        "AND at > clock_timestamp() - make_interval(secs => %s)",
                        (limiter, hashed, window),
                    ).fetchone()
                    if count >= max_events:
                        return False
                    conn.execute("INSERT INTO rate_events (limiter, key) VALUES (%s, %s)", (limiter, hashed))
                self._prune(conn)
                return True
            except self.psycopg.Error as exc:
                self._down_until = time.monotonic() + RETRY_SECONDS
                log.error(
                    "shared rate limits in %s unreachable (%s); messages are let through for %g s",
                    self.where,
                    type(exc).__name__,
                    RETRY_SECONDS,
                )
                return True

    def revoke(self, session: str, expires: float) -> bool:
        """Record that ``session`` was logged out (its cookie expires at the epoch time ``expires``); False when the
        database is down (the logout then holds on this replica only, and that is logged)."""
        return self.run(
            "admin logout",
            lambda conn: conn.execute(
                "INSERT INTO revoked_sessions VALUES (%s, to_timestamp(%s)) ON CONFLICT (session) DO NOTHING",
                (session, expires),
            ),
        )

    def revoked(self, session: str) -> bool | None:
        """True when any replica logged ``session`` out; None when the database cannot say (down)."""
        found: list[bool] = []
        ok = self.run(
            "admin logout check",
            lambda conn: found.append(
                conn.execute("SELECT 1 FROM revoked_sessions WHERE session = %s", (session,)).fetchone() is not None
            ),
        )
        return found[0] if ok else None

    def run(self, what: str, statement: Any) -> bool:
        """Run ``statement(conn)`` on the store's connection; False (and an error logged) when the database is
        down."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return False
            try:
                statement(self._connection())
                return True
            except self.psycopg.Error as exc:
                self._down_until = time.monotonic() + RETRY_SECONDS
                log.error("shared %s in %s failed (%s)", what, self.where, type(exc).__name__)
                return False

    def _prune(self, conn: Any) -> None:
        self._checks += 1
        if self._checks % PRUNE_EVERY == 0:
            conn.execute(
                "DELETE FROM rate_events WHERE at < clock_timestamp() - make_interval(secs => %s)", (self.longest,)
            )
            conn.execute("DELETE FROM revoked_sessions WHERE expires < clock_timestamp()")
            conn.execute(
                "DELETE FROM login_failures WHERE locked_until < clock_timestamp() "
                "AND last < clock_timestamp() - make_interval(secs => %s)",
                (FORGET_LOGIN_FAILURES,),
            )

    def close(self) -> None:
        """Close the connection (a later check opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None


class SharedLimiter:
    """A per-key sliding-window limit (the in-memory limiter's contract) counted in a :class:`RateStore`."""

    def __init__(self, store: RateStore, name: str, max_events: int, window: float = 60.0):
        self.store, self.name, self.max_events, self.window = store, name, max_events, window
        store.longest = max(store.longest, window)

    def allow(self, key: str) -> bool:
        """Record one event for ``key`` and say whether it is within the limit (0 disables the limit)."""
        return self.max_events <= 0 or self.store.allow(self.name, key, self.max_events, self.window)


_stores: dict[str, RateStore] = {}
_stores_lock = threading.Lock()


def rate_store(dsn_env: str, connect_timeout: int) -> RateStore:
    """The process's store for the DSN in ``dsn_env`` (opened on its first check)."""
    dsn = pg_dsn(dsn_env, "limits.backend", ConfigError)
    with _stores_lock:
        if dsn not in _stores:
            _stores[dsn] = RateStore(dsn, f"PostgreSQL (${dsn_env})", connect_timeout)
        return _stores[dsn]
