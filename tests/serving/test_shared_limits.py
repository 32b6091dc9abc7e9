"""Rate limits shared by replicas (``limits.backend: postgres``): counted in one real PostgreSQL server, so a client
cannot multiply its limit by hitting several replicas; keys stored hashed; a database that is down lets messages
through (logged) instead of stopping the chat."""

from __future__ import annotations

import logging

import openai
import psycopg
import pytest

from bot.config.variants import update
from bot.errors import ConfigError
from bot.serving import shared_limits
from bot.serving.ratelimit import SlidingWindowLimiter, rate_limiter
from bot.serving.shared_limits import RateStore, SharedLimiter
from tests.support.serving import client

pytestmark = pytest.mark.e2e

QUESTION = "怎么添加知识？"


def replicas(dsn: str, name: str = "api-chat", max_events: int = 3) -> list[SharedLimiter]:
    """The same limiter as two replicas hold it: each its own store and connection."""
    return [SharedLimiter(RateStore(dsn, "test", 5), name, max_events, 60.0) for _ in range(2)]


def test_two_replicas_share_one_limit_per_key_and_store_no_key(pg_dsn):
    a, b = replicas(pg_dsn)
    taken = [limiter.allow("token-secret-1") for limiter in (a, b, a, b, a, b)]
    assert taken == [True, True, True, False, False, False]  # three in all, not three each
    assert a.allow("another-client") and b.allow("another-client")  # keys are counted apart
    other = SharedLimiter(a.store, "widget-chat", 3, 60.0)
    assert other.allow("token-secret-1")  # so are limiters
    with psycopg.connect(pg_dsn) as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM rate_events")]
    assert keys and not any("secret" in k or "client" in k for k in keys)  # tokens and addresses are hashed


def test_a_zero_limit_is_off_and_memory_is_the_default(settings, pg_dsn):
    (off, _) = replicas(pg_dsn, max_events=0)
    assert all(off.allow("k") for _ in range(5))
    assert isinstance(rate_limiter(settings, "api-chat", 2), SlidingWindowLimiter)


def test_postgres_limits_without_a_valid_dsn_are_a_config_error_naming_the_variable(settings, monkeypatch):
    monkeypatch.delenv("KBBOT_PG_DSN", raising=False)
    shared = update(settings, {"limits.backend": "postgres"})
    with pytest.raises(ConfigError, match="KBBOT_PG_DSN is empty"):
        rate_limiter(shared, "api-chat", 2)
    monkeypatch.setenv("KBBOT_PG_DSN", "host=db password=pw-QX7 port")
    with pytest.raises(ConfigError, match="KBBOT_PG_DSN is not a valid PostgreSQL DSN") as err:
        rate_limiter(shared, "api-chat", 2)
    assert "QX7" not in str(err.value)


def test_a_database_that_is_down_lets_messages_through_and_is_tried_again(own_pg, monkeypatch, caplog):
    monkeypatch.setattr(shared_limits, "RETRY_SECONDS", 0.0)
    limiter = SharedLimiter(RateStore(own_pg.dsn(), "test", 2), "api-chat", 1, 60.0)
    assert limiter.allow("k") and not limiter.allow("k")
    own_pg.stop("immediate")
    with caplog.at_level(logging.ERROR, logger="bot.serving.shared_limits"):
        assert limiter.allow("k")  # let through, not refused: the chat keeps working
    assert "unreachable" in caplog.text and own_pg.dsn() not in caplog.text
    own_pg.start()
    assert not limiter.allow("k")  # counted again once it is back: the earlier event is still in the window


def ask(v1: str) -> None:
    """One chat message through the OpenAI-compatible API at ``v1``."""
    client(v1).chat.completions.create(model="kbbot", messages=[{"role": "user", "content": QUESTION}])


def test_the_api_limit_holds_across_two_served_replicas(pg_settings, serve_api, own_stores):
    shared = update(pg_settings, {"limits.backend": "postgres", "limits.chat_per_minute": 2})
    first = serve_api(shared)
    shared_limits._stores.clear()  # the second replica opens its own connection, as another process would
    second = serve_api(shared)
    ask(first)
    ask(second)
    for replica in (first, second):  # the third message of this token within a minute, whichever replica
        with pytest.raises(openai.RateLimitError):
            ask(replica)


# Two app processes sharing the limit, the log and the knowledge: tests/test_replicas.py.


def admin_replicas(pg_settings, monkeypatch) -> list:
    """Two replicas' admin logins: one signing key, logouts in the shared database."""
    from bot.ui.admin import AdminAuth

    monkeypatch.setenv(pg_settings.ui.admin.username_env, "boss")
    monkeypatch.setenv(pg_settings.ui.admin.password_env, "s3cret-pass")
    monkeypatch.setenv(pg_settings.ui.admin.session_key_env, "k" * 40)
    shared = update(pg_settings, {"limits.backend": "postgres"})
    return [AdminAuth.from_settings(shared) for _ in range(2)]


def test_a_logout_on_one_replica_ends_the_session_on_every_replica(pg_settings, monkeypatch, own_stores):
    a, b = admin_replicas(pg_settings, monkeypatch)
    cookie, other = a.token(), a.token()
    assert a.valid(cookie) and b.valid(cookie)  # one key: the login holds on both
    a.revoke(cookie)
    assert not a.valid(cookie) and not b.valid(cookie)  # the copy on replica B is refused too
    assert b.valid(other)  # only that session ended


def test_with_the_database_down_a_logout_still_holds_where_it_was_made(own_pg, settings, monkeypatch, caplog):
    from bot.ui.admin import AdminAuth

    monkeypatch.setattr(shared_limits, "RETRY_SECONDS", 0.0)
    monkeypatch.setenv(settings.ui.admin.username_env, "boss")
    monkeypatch.setenv(settings.ui.admin.password_env, "s3cret-pass")
    monkeypatch.setenv(settings.ui.admin.session_key_env, "k" * 40)
    a, b = AdminAuth.from_settings(settings), AdminAuth.from_settings(settings)
    a.shared_logouts, b.shared_logouts = RateStore(own_pg.dsn(), "test", 2), RateStore(own_pg.dsn(), "test", 2)
    cookie = a.token()
    assert b.valid(cookie)
    own_pg.stop("immediate")
    with caplog.at_level(logging.ERROR, logger="bot.serving.shared_limits"):
        a.revoke(cookie)
        assert not a.valid(cookie)  # this replica saw the logout
        assert b.valid(cookie)  # the other cannot know it while the database is down (logged)
    assert "admin logouts hold on the replica" in caplog.text and own_pg.dsn() not in caplog.text
    own_pg.start()
    a.shared_logouts.revoke(cookie.split(".")[1], int(cookie.split(".")[0]))  # a later logout reaches everyone
    assert not b.valid(cookie)


def test_wecom_memory_falls_back_to_the_replica_s_own_while_the_database_is_down(own_pg, monkeypatch, caplog):
    from bot.api.im.memory import Histories, Seen
    from bot.api.im.shared_memory import SharedHistories, SharedSeen

    monkeypatch.setattr(shared_limits, "RETRY_SECONDS", 0.0)
    store = RateStore(own_pg.dsn(), "test", 2)
    histories = SharedHistories(
        store, Histories(4, 600, 10), lambda text: text.replace("138", "[phone]"), str.upper, "wecom"
    )
    seen = SharedSeen(store, Seen(600), "wecom")
    histories.add("zhangsan", "我的电话138", "好的")
    assert seen.first("m1") and not seen.first("m1")
    with psycopg.connect(own_pg.dsn()) as conn:
        assert conn.execute("SELECT user_key, question FROM wecom_history").fetchall() == [
            ("ZHANGSAN", "我的电话[phone]")
        ]
    own_pg.stop("immediate")
    with caplog.at_level(logging.ERROR, logger="bot.serving.shared_limits"):
        assert histories.get("zhangsan") == []  # the replica's own memory: nothing said here yet
        histories.add("zhangsan", "学费是多少？", "1. ... 2. ...")
        assert histories.get("zhangsan")[-1]["content"] == "1. ... 2. ..."  # kept locally meanwhile
        assert seen.first("m2") and not seen.first("m2")
    assert "WeCom messages are remembered in this replica" in caplog.text and own_pg.dsn() not in caplog.text
    own_pg.start()
    assert histories.get("zhangsan") == [
        {"role": "user", "content": "我的电话[phone]"},
        {"role": "assistant", "content": "好的"},
    ]


def test_the_store_s_prune_deletes_expired_wecom_memories_and_keeps_fresh_ones(pg_dsn, monkeypatch):
    from bot.api.im.memory import Histories, Seen
    from bot.api.im.shared_memory import SharedHistories, SharedSeen

    monkeypatch.setattr(shared_limits, "PRUNE_EVERY", 1)  # every transaction prunes
    store = RateStore(pg_dsn, "test", 2)
    histories = SharedHistories(store, Histories(4, 600, 10), lambda text: text, str.upper, "wecom")
    seen = SharedSeen(store, Seen(600), "wecom")
    histories.add("zhangsan", "学费是多少？", "1. ... 2. ...")
    assert seen.first("m1")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # an hour ago: older than both memories keep
        conn.execute("UPDATE wecom_history SET at = at - interval '1 hour'")
        conn.execute("UPDATE wecom_seen SET at = at - interval '1 hour'")
    histories.add("lisi", "校歌是什么", "……")  # a write: the prune runs after it
    with psycopg.connect(pg_dsn) as conn:
        assert [r[0] for r in conn.execute("SELECT user_key FROM wecom_history")] == ["LISI"]
        assert conn.execute("SELECT count(*) FROM wecom_seen").fetchone() == (0,)
