"""Login throttling shared by replicas (``limits.backend: postgres``): wrong passwords tried on several replicas add
up to one lockout, on a real PostgreSQL server; usernames and addresses stored hashed; a database that is down makes
each replica throttle on its own instead of letting every attempt through."""

from __future__ import annotations

import logging

import psycopg
import pytest

from bot.config.variants import update
from bot.serving import shared_limits
from bot.serving.logins import ThrottledLogin, credentials_check
from bot.serving.shared_limits import RateStore
from bot.serving.shared_logins import SharedThrottledLogin, login_throttle

pytestmark = pytest.mark.e2e

RIGHT = ("boss", "s3cret-pass")


def replicas(dsn: str, address_failures: int = 20) -> list[SharedThrottledLogin]:
    """The admin login as two replicas hold it: each its own store and connection; 3 failures lock for 30 s."""
    check = credentials_check(*RIGHT)
    return [SharedThrottledLogin(RateStore(dsn, "test", 5), check, 3, 30.0, address_failures) for _ in range(2)]


def test_wrong_passwords_on_two_replicas_add_up_to_one_lockout(pg_dsn):
    a, b = replicas(pg_dsn)
    for replica in (a, b, a):
        assert not replica.attempt("boss", "guess", "10.0.0.7")
    assert not b.attempt(*RIGHT, "10.0.0.7")  # locked on every replica, even with the right password
    assert 25 < a.retry_after("boss", "10.0.0.7") <= 30 and b.retry_after("boss", "10.0.0.8") == 0
    assert b.attempt(*RIGHT, "10.0.0.8")  # another address is not locked out
    with psycopg.connect(pg_dsn) as conn:
        stored = [str(row) for row in conn.execute("SELECT * FROM login_failures")]
        stored += [str(row) for row in conn.execute("SELECT * FROM rate_events")]
    assert stored and not any("boss" in row or "10.0.0" in row for row in stored)


def test_a_success_on_any_replica_clears_the_count(pg_dsn):
    a, b = replicas(pg_dsn)
    assert not a.attempt("boss", "guess", "10.0.0.7") and not a.attempt("boss", "guess", "10.0.0.7")
    assert b.attempt(*RIGHT, "10.0.0.7")
    assert not b.attempt("boss", "guess", "10.0.0.7") and not a.attempt("boss", "guess", "10.0.0.7")
    assert a.attempt(*RIGHT, "10.0.0.7")  # two failures since the success: not locked


def test_password_spraying_from_one_address_is_capped_across_replicas(pg_dsn):
    a, b = replicas(pg_dsn, address_failures=4)
    for n, replica in enumerate((a, b, a, b)):
        assert not replica.attempt(f"user{n}", "guess", "10.0.0.9")
    assert not a.attempt(*RIGHT, "10.0.0.9")  # the address is refused for the rest of the minute
    assert 55 < b.retry_after("anyone", "10.0.0.9") <= 60


def test_a_database_that_is_down_throttles_each_replica_on_its_own(own_pg, monkeypatch, caplog):
    monkeypatch.setattr(shared_limits, "RETRY_SECONDS", 0.0)
    (a, _) = replicas(own_pg.dsn())
    assert not a.attempt("boss", "guess", "10.0.0.7")
    own_pg.stop("immediate")
    with caplog.at_level(logging.ERROR, logger="bot.serving.shared_limits"):
        for _ in range(3):
            assert not a.attempt("boss", "guess", "10.0.0.7")
    assert not a.attempt(*RIGHT, "10.0.0.7")  # locked in this replica's memory: not let through
    assert "logins are throttled per replica" in caplog.text and own_pg.dsn() not in caplog.text
    own_pg.start()


def test_postgres_limits_make_the_login_throttle_shared(settings, pg_dsn, monkeypatch):
    monkeypatch.setenv("KBBOT_TEST_LOGIN_DSN", pg_dsn)
    check = credentials_check(*RIGHT)
    assert type(login_throttle(check, settings)) is ThrottledLogin
    shared = update(settings, {"limits.backend": "postgres", "log.postgres.dsn_env": "KBBOT_TEST_LOGIN_DSN"})
    throttle = login_throttle(check, shared)
    assert isinstance(throttle, SharedThrottledLogin) and throttle.failures == shared.limits.login_failures
    for store in list(shared_limits._stores.values()):
        store.close()
    shared_limits._stores.clear()
