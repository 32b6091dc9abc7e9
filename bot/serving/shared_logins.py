"""Login throttling that holds across replicas (``limits.backend: postgres``): the failures of every replica counted
in the shared limits' database, so that an attacker cannot multiply the wrong passwords allowed by trying several
replicas behind the load balancer.

The same rules as :class:`bot.serving.logins.ThrottledLogin` (a doubling lockout per username + address, a cap of wrong
passwords per address per minute), on the database's clock: a username + address pair is one row of
``login_failures`` (updated under its row lock), a wrong password of an address one ``rate_events`` row. Usernames
and addresses are stored hashed. While the database cannot be reached each replica throttles in its own memory
(logged), so logins never stop and are never unthrottled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.config.settings import Settings
from bot.serving.logins import ADDRESS_FAILURES_PER_MINUTE, ADDRESS_WINDOW, ThrottledLogin
from bot.serving.ratelimit import shared_store
from bot.serving.shared_limits import RateStore, hashed_key

log = logging.getLogger(__name__)

LIMITER = "login-address"  # the rate_events rows of wrong passwords per address
MEANWHILE = "logins are throttled per replica"


class SharedThrottledLogin(ThrottledLogin):
    """A :class:`ThrottledLogin` whose failures and lockouts are shared by every replica through ``store``."""

    def __init__(
        self,
        store: RateStore,
        check: Callable[[str, str], bool],
        failures: int,
        lockout: float,
        address_failures: int = ADDRESS_FAILURES_PER_MINUTE,
    ):
        super().__init__(check, failures, lockout, address_failures=address_failures)
        self.store = store
        store.longest = max(store.longest, ADDRESS_WINDOW)

    def retry_after(self, username: str, address: str) -> float:
        """Seconds until ``username`` may try again from ``address`` on any replica; 0 when not locked out."""
        wait = self.store.transact(lambda conn: self._wait_in(conn, username, address), MEANWHILE)
        return super().retry_after(username, address) if wait is None else wait

    def _refused(self, username: str, address: str) -> bool:
        wait = self.store.transact(lambda conn: self._wait_in(conn, username, address), MEANWHILE)
        return super()._refused(username, address) if wait is None else wait > 0

    def _succeeded(self, username: str, address: str) -> None:
        pair = _pair(username, address)
        done = self.store.transact(
            lambda conn: conn.execute("DELETE FROM login_failures WHERE pair = %s", (pair,)) is not None, MEANWHILE
        )
        if done is None:
            super()._succeeded(username, address)

    def _failed(self, username: str, address: str) -> None:
        if self.store.transact(lambda conn: self._count_failure(conn, username, address), MEANWHILE) is None:
            super()._failed(username, address)

    def _wait_in(self, conn: Any, username: str, address: str) -> float:
        """Seconds the pair or the address is still locked out, from the shared rows."""
        (wait,) = conn.execute(
            "SELECT GREATEST(0, "
            "(SELECT EXTRACT(EPOCH FROM locked_until - clock_timestamp()) FROM login_failures WHERE pair = %s), "
            "(SELECT EXTRACT(EPOCH FROM min(at) + make_interval(secs => %s) - clock_timestamp()) FROM rate_events "
            " WHERE limiter = %s AND key = %s AND at > clock_timestamp() - make_interval(secs => %s) "
            " HAVING %s > 0 AND count(*) >= %s))",
            (
                _pair(username, address),
                ADDRESS_WINDOW,
                LIMITER,
                hashed_key(address),
                ADDRESS_WINDOW,
                self.address_failures,
                self.address_failures,
            ),
        ).fetchone()
        return float(wait)

    def _count_failure(self, conn: Any, username: str, address: str) -> bool:
        """Count one wrong password of the pair (locking it out at ``failures``) and of the address."""
        pair = _pair(username, address)
        failures, lockouts = conn.execute(
            "INSERT INTO login_failures (pair, failures) VALUES (%s, 1) ON CONFLICT (pair) DO UPDATE "
            "SET failures = login_failures.failures + 1, last = clock_timestamp() RETURNING failures, lockouts",
            (pair,),
        ).fetchone()
        if failures >= self.failures:
            seconds = self._lockout_seconds(lockouts + 1)
            conn.execute(
                "UPDATE login_failures SET failures = 0, lockouts = lockouts + 1, "
                "locked_until = clock_timestamp() + make_interval(secs => %s) WHERE pair = %s",
                (seconds, pair),
            )
            log.warning("login locked for %g s after %d failed attempts from %s", seconds, self.failures, address)
        conn.execute("INSERT INTO rate_events (limiter, key) VALUES (%s, %s)", (LIMITER, hashed_key(address)))
        return True


def _pair(username: str, address: str) -> str:
    return hashed_key(f"{username}\0{address}")


def login_throttle(check: Callable[[str, str], bool], settings: Settings) -> ThrottledLogin:
    """``check`` throttled by ``limits.login_failures`` and ``limits.login_lockout_seconds``, counted in this
    process or (``limits.backend: postgres``) in the database every replica shares."""
    limits = settings.limits
    store = shared_store(settings)
    if store is not None:
        return SharedThrottledLogin(store, check, limits.login_failures, limits.login_lockout_seconds)
    return ThrottledLogin(check, limits.login_failures, limits.login_lockout_seconds)
