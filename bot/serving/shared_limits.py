"""Rate limits that hold across replicas: every limiter's events counted in PostgreSQL (``limits.backend: postgres``),
beside the other state the replicas share there: login failures, admin logouts, the IM channels' short histories.

Behind a load balancer each replica's in-memory limiter (bot/serving/ratelimit.py) counts only what reached it, so a
client hitting three replicas gets three times its limit. Here the events of every replica are rows of one table
in the conversation log's database (``log.postgres.dsn_env``): the same sliding window, exact, on the database's
clock (replicas' clocks may differ). A key's check-and-count runs under a transaction-scoped advisory lock on that
key, so two replicas cannot both take the last slot. Keys are stored hashed: they are tokens, sessions and client
addresses. When the database cannot be reached the limiter lets the message through and logs it (the chat keeps
working, as the conversation log does), retrying the connection at most every ``RETRY_SECONDS``.

An admin's logout is a row of ``revoked_sessions``, so a copy of the logged-out cookie is refused by every replica
that shares the signing key (``ui.admin.session_key_env``), not only by the one that saw the logout.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from bot.errors import ConfigError
from bot.storage.postgres import SchemaConnection, pg_dsn, psycopg_module

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_SECONDS = 2.0  # after a failed connection, limiters let messages through this long before trying again
LOGIN_MEMORY = 900.0  # seconds an idle login record is kept (bot/serving/logins.py MAX_LOCKOUT)
PRUNE_EVERY = 500  # checks between deletions of events older than the longest window
IM_CHANNELS = ("wecom", "feishu")  # bot/api/im/shared_memory.py Channel: one pair of tables each
SCHEMA_LOCK = 7_402_417  # advisory lock id: replicas starting at once create the table one at a time
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rate_events (limiter text NOT NULL, key text NOT NULL, "
    "at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX IF NOT EXISTS rate_events_key ON rate_events (limiter, key, at)",
    # login throttling (bot/serving/shared_logins.py): per hashed username + address, failures towards the lockout
    "CREATE TABLE IF NOT EXISTS login_failures (pair text PRIMARY KEY, failures integer NOT NULL DEFAULT 0, "
    "lockouts integer NOT NULL DEFAULT 0, locked_until timestamptz NOT NULL DEFAULT 'epoch', "
    "last timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE TABLE IF NOT EXISTS revoked_sessions (session text PRIMARY KEY, expires timestamptz NOT NULL)",
    # the IM channels (bot/api/im/shared_memory.py): members' last messages, callbacks already taken, per channel
    *(
        statement
        for channel in IM_CHANNELS
        for statement in (
            f"CREATE TABLE IF NOT EXISTS {channel}_history (user_key text NOT NULL, at timestamptz NOT NULL "
            "DEFAULT clock_timestamp(), question text NOT NULL, reply text NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {channel}_history_user ON {channel}_history (user_key, at)",
            f"CREATE TABLE IF NOT EXISTS {channel}_seen (key text PRIMARY KEY, at timestamptz NOT NULL "
            "DEFAULT clock_timestamp())",
        )
    ),
)


def hashed_key(key: str) -> str:
    """How a key (a token, a session, an address) is stored: hashed, never as given."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class RateStore:
    """One PostgreSQL connection holding every shared limiter's events (one per process and DSN)."""

    def __init__(self, dsn: str, where: str, connect_timeout: int):
        self.psycopg = psycopg_module("limits.backend", ConfigError)
        self.where = where
        self._connection = SchemaConnection(self.psycopg, dsn, connect_timeout, "kbbot-limits", SCHEMA_LOCK, SCHEMA)
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._checks = 0
        self.longest = 60.0  # the longest window of a limiter using this store: older events are pruned
        # tables whose rows expire a number of seconds after their ``at`` (the WeCom memories): pruned with the rest
        self.expiring: dict[str, float] = {}

    def allow(self, limiter: str, key: str, max_events: int, window: float) -> bool:
        """Count one event of ``key`` for ``limiter`` when fewer than ``max_events`` happened in the last ``window``
        seconds on any replica; True when it was counted. True (and an error logged) when the database is down."""
        hashed = hashed_key(key)

        def count(conn: Any) -> bool:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{limiter}/{hashed}",))
            (events,) = conn.execute(
                "SELECT count(*) FROM rate_events WHERE limiter = %s AND key = %s "
                "AND at > clock_timestamp() - make_interval(secs => %s)",
                (limiter, hashed, window),
            ).fetchone()
            if events >= max_events:
                return False
            conn.execute("INSERT INTO rate_events (limiter, key) VALUES (%s, %s)", (limiter, hashed))
            return True

        allowed = self.transact(count, "messages are let through")
        return True if allowed is None else allowed

    def transact(self, work: Callable[[Any], T], meanwhile: str) -> T | None:
        """``work(connection)`` in one transaction, one caller at a time; None when the database cannot be reached
        (logged with what happens ``meanwhile``; not tried again for RETRY_SECONDS)."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return None
            try:
                conn = self._connection.get()
                with conn.transaction():
                    result = work(conn)
                self._prune(conn)
                return result
            except self.psycopg.Error as exc:
                self._down_until = time.monotonic() + RETRY_SECONDS
                log.error(
                    "shared rate limits in %s unreachable (%s); %s for %g s",
                    self.where,
                    type(exc).__name__,
                    meanwhile,
                    RETRY_SECONDS,
                )
                return None

    def revoke(self, session: str, expires: float) -> bool:
        """Record that ``session`` was logged out (its cookie expires at the epoch time ``expires``); False when the
        database is down (the logout then holds on this replica only, and that is logged)."""

        def insert(conn: Any) -> bool:
            conn.execute(
                "INSERT INTO revoked_sessions VALUES (%s, to_timestamp(%s)) ON CONFLICT (session) DO NOTHING",
                (session, expires),
            )
            return True

        return self.transact(insert, "admin logouts hold on the replica that took them") is not None

    def revoked(self, session: str) -> bool | None:
        """True when any replica logged ``session`` out; None when the database cannot say (down)."""
        return self.transact(
            lambda conn: (
                conn.execute("SELECT 1 FROM revoked_sessions WHERE session = %s", (session,)).fetchone() is not None
            ),
            "admin logouts hold on the replica that took them",
        )

    def _prune(self, conn: Any) -> None:
        self._checks += 1
        if self._checks % PRUNE_EVERY == 0:
            conn.execute(
                "DELETE FROM rate_events WHERE at < clock_timestamp() - make_interval(secs => %s)", (self.longest,)
            )
            conn.execute(
                "DELETE FROM login_failures WHERE locked_until < clock_timestamp() "
                "AND last < clock_timestamp() - make_interval(secs => %s)",
                (LOGIN_MEMORY,),
            )
            conn.execute("DELETE FROM revoked_sessions WHERE expires < clock_timestamp()")
            for table, seconds in self.expiring.items():  # names the code registered, never user input
                conn.execute(
                    f"DELETE FROM {table} WHERE at < clock_timestamp() - make_interval(secs => %s)", (seconds,)
                )

    def close(self) -> None:
        """Close the connection (a later check opens a new one)."""
        with self._lock:
            self._connection.close()


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
