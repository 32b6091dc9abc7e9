"""Login throttling that holds across replicas (``limits.backend: postgres``): the wrong passwords of a username +
address pair and of an address are rows in the shared database, so an attacker who spreads guesses over several
replicas meets one lockout, not one per replica.

The policy is :class:`bot.chat.logins.ThrottledLogin`'s (a lockout per pair after ``failures`` wrong passwords,
doubling up to ``MAX_LOCKOUT``; an address refused for the rest of the minute after ``address_failures``); this
module only keeps its state in PostgreSQL, on the database's clock. Pairs and addresses are stored hashed. Every
method returns None when the database cannot be reached, and the caller then throttles in its own memory.
"""

from __future__ import annotations

import hashlib
from typing import Any

from bot.chat.shared_limits import RateStore

ADDRESS_LIMITER = "login-address"  # the rate_events rows of wrong passwords per address
WINDOW = 60.0  # seconds: the address cap's window (bot.chat.logins.ADDRESS_WINDOW)


def _hashed(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


class SharedLogins:
    """The failures of every replica's logins, in a :class:`RateStore`'s database."""

    def __init__(self, store: RateStore):
        self.store = store

    def wait(self, username: str, address: str, address_failures: int) -> float | None:
        """Seconds until ``username`` may try again from ``address`` (0: now); None when the database is down."""
        found: list[float] = []

        def read(conn: Any) -> None:
            (pair_wait,) = conn.execute(
                "SELECT COALESCE(max(extract(epoch FROM locked_until - clock_timestamp())), 0) "
                "FROM login_failures WHERE pair = %s",
                (_hashed(username, address),),
            ).fetchone()
            address_wait = 0.0
            if address_failures > 0:
                # the address waits until the address_failures-th most recent failure leaves the window
                row = conn.execute(
                    "SELECT extract(epoch FROM at + make_interval(secs => %s) - clock_timestamp()) FROM rate_events "
                    "WHERE limiter = %s AND key = %s AND at > clock_timestamp() - make_interval(secs => %s) "
                    "ORDER BY at DESC OFFSET %s LIMIT 1",
                    (WINDOW, ADDRESS_LIMITER, _hashed(address), WINDOW, address_failures - 1),
                ).fetchone()
                address_wait = float(row[0]) if row else 0.0
            found.append(max(float(pair_wait), address_wait, 0.0))

        return found[0] if self.store.run("login check", read) else None

    def failed(self, username: str, address: str, failures: int, lockout: float, max_lockout: float) -> float | None:
        """Count one wrong password of the pair and the address; the seconds of the lockout it starts (0: none),
        or None when the database is down."""
        locked: list[float] = []
        pair = _hashed(username, address)

        def count(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"login/{pair}",))
                (tries, lockouts) = conn.execute(
                    "INSERT INTO login_failures AS f VALUES (%s, 1, 0, to_timestamp(0), clock_timestamp()) "
                    "ON CONFLICT (pair) DO UPDATE SET count = f.count + 1, last = clock_timestamp() "
                    "RETURNING count, lockouts",
                    (pair,),
                ).fetchone()
                seconds = 0.0
                if tries >= failures:
                    seconds = min(lockout * 2**lockouts, max_lockout)
                    conn.execute(
                        "UPDATE login_failures SET count = 0, lockouts = lockouts + 1, "
                        "locked_until = clock_timestamp() + make_interval(secs => %s) WHERE pair = %s",
                        (seconds, pair),
                    )
                conn.execute(
                    "INSERT INTO rate_events (limiter, key) VALUES (%s, %s)", (ADDRESS_LIMITER, _hashed(address))
                )
            locked.append(seconds)

        return locked[0] if self.store.run("login failure", count) else None

    def succeeded(self, username: str, address: str) -> None:
        """Forget the pair's failures (a right password)."""
        pair = _hashed(username, address)
        self.store.run(
            "login success", lambda conn: conn.execute("DELETE FROM login_failures WHERE pair = %s", (pair,))
        )
