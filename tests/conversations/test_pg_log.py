"""The conversation log on PostgreSQL where it can fail: a bad or missing DSN, no driver, a server down at start or
killed mid-run (the chat still answers, the log says which turns were not recorded, and recording resumes), and
the app served with ``log.backend: postgres``: a chat turn over HTTP lands in the table and in the admin's inbox."""

from __future__ import annotations

import logging
import sys
import time

import psycopg
import pytest
from pydantic import ValidationError

from bot.chat.recorder import TurnRecorder, row_of
from bot.config.settings import LogSettings
from bot.config.variants import replace
from bot.conversations.log_store import TurnLogError
from bot.conversations.pg_log import PgTurnLog
from bot.conversations.turn_log import turn_log_from_settings
from bot.factory import build_bot, build_knowledge_base, build_recorder
from tests.support.answers import answered
from tests.support.knowledge import with_cutoffs
from tests.support.postgres import PASSWORD
from tests.support.serving import ADMIN_LOGIN, login, serve_in_process
from tests.support.serving import call_event as call

pytestmark = pytest.mark.e2e


def postgres_settings(settings, monkeypatch, dsn: str | None):
    """``settings`` with ``log.backend: postgres``, the DSN (None: unset) in KBBOT_PG_DSN."""
    settings = replace(settings, "log.backend", "postgres")
    if dsn is None:
        monkeypatch.delenv("KBBOT_PG_DSN", raising=False)
    else:
        monkeypatch.setenv("KBBOT_PG_DSN", dsn)
    return settings


def test_a_missing_dsn_is_an_error_naming_the_variable_and_the_app_runs_without_a_log(settings, monkeypatch, caplog):
    settings = postgres_settings(settings, monkeypatch, None)
    with pytest.raises(TurnLogError, match="environment variable KBBOT_PG_DSN is empty"):
        turn_log_from_settings(settings)
    with caplog.at_level(logging.ERROR, logger="bot.factory"):
        assert not build_recorder(settings).enabled
    assert "KBBOT_PG_DSN" in caplog.text


def test_a_malformed_dsn_names_the_variable_and_not_its_password(settings, monkeypatch):
    settings = postgres_settings(settings, monkeypatch, f"host=db password={PASSWORD} port")
    with pytest.raises(TurnLogError, match="KBBOT_PG_DSN is not a valid PostgreSQL DSN") as caught:
        turn_log_from_settings(settings)
    assert PASSWORD not in str(caught.value) and caught.value.__cause__ is None


def test_a_missing_driver_says_how_to_install_it(settings, monkeypatch):
    settings = postgres_settings(settings, monkeypatch, "postgresql://kbbot@127.0.0.1/kbbot")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed: import fails
    with pytest.raises(TurnLogError, match=r"log.backend: postgres needs the psycopg package.*pip install"):
        turn_log_from_settings(settings)


def test_unknown_postgres_settings_are_refused():
    with pytest.raises(ValidationError, match="dsn"):
        LogSettings.model_validate({"backend": "postgres", "postgres": {"dsn": "postgresql://x"}})
    with pytest.raises(ValidationError):
        LogSettings.model_validate({"backend": "mysql"})


def test_a_log_from_a_newer_kbbot_is_refused_with_the_fix(pg_dsn, caplog):
    PgTurnLog(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with caplog.at_level(logging.ERROR, logger="bot.conversations.pg_log"):
        log = PgTurnLog(pg_dsn, dsn_env="KBBOT_PG_DSN")
    assert "has schema version 99, newer than this version of kbbot understands (2); upgrade kbbot" in caplog.text
    with pytest.raises(TurnLogError, match="schema version 99"):
        log.record(row_of(answered()), "s")
    log.close()


def test_a_server_down_at_start_loses_turns_loudly_then_records_once_it_is_up(own_pg, caplog):
    own_pg.stop()
    with caplog.at_level(logging.DEBUG, logger="bot"):
        log = PgTurnLog(own_pg.dsn(), dsn_env="KBBOT_PG_DSN", connect_timeout=2)
        recorder = TurnRecorder(log)
        for _ in range(2):
            assert recorder.record(answered(), "s").turn_id is None  # answered, not recorded
        own_pg.start()
        time.sleep(log.retry_after)
        assert recorder.record(answered(), "s").turn_id == 1
    text = caplog.text
    assert "cannot connect to the conversation log in PostgreSQL ($KBBOT_PG_DSN)" in text
    assert "this turn and the next ones are NOT recorded" in text
    assert "works again; 2 turns were not recorded" in text and PASSWORD not in text
    assert log.count() == 1
    log.close()


def test_a_server_killed_mid_run_keeps_the_chat_answering_and_recording_resumes(own_pg, caplog):
    log = PgTurnLog(own_pg.dsn(), dsn_env="KBBOT_PG_DSN", connect_timeout=2)
    recorder = TurnRecorder(log)
    assert recorder.record(answered(), "s").turn_id == 1
    own_pg.stop("immediate")  # no clean shutdown: the connection just dies
    with caplog.at_level(logging.ERROR, logger="bot.chat.recorder"):
        lost = recorder.record(answered("断线时的问题"), "s")
        assert lost.turn_id is None and lost.text == "八点到十点。"
        assert not recorder.feedback(1, -1)
    assert "recording a turn failed; this turn and the next ones are NOT recorded" in caplog.text
    own_pg.start()
    time.sleep(log.retry_after)
    assert recorder.record(answered(), "s").turn_id is not None  # the same thread, on a new connection
    assert [t["question"] for t in log.recent()] == ["图书馆几点开门？", "图书馆几点开门？"]
    own_pg.stop("immediate")
    own_pg.start()  # a restart between two turns costs none: the write retries once on a fresh connection
    assert recorder.record(answered(), "s").turn_id is not None and log.count() == 3
    log.close()


def test_the_served_app_logs_a_web_turn_in_postgres_and_the_admin_inbox_shows_it(pg_settings, pg_dsn, monkeypatch):
    monkeypatch.setenv(pg_settings.ui.admin.username_env, ADMIN_LOGIN[0])
    monkeypatch.setenv(pg_settings.ui.admin.password_env, ADMIN_LOGIN[1])
    served = with_cutoffs(pg_settings, "sparse", 0.5)
    bot = build_bot(served)
    kb = build_knowledge_base(served, bot)
    assert isinstance(kb.recorder.log, PgTurnLog)
    demo, base = serve_in_process(served, kb)
    try:
        _chat_turn_lands_in_postgres_and_the_inbox(f"{base}/", pg_dsn)
    finally:
        demo.close()


def _chat_turn_lands_in_postgres_and_the_inbox(url: str, pg_dsn: str) -> None:
    question = "火星上有几座城市"
    assert call(url, "chat", [question, [], "follow"])[0] == "complete"
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT question, source, strategy FROM turns").fetchall()
    assert rows == [(question, "web", "last_resort")]
    event, data = call(url, "inbox", ["latest"], cookies=login(url))
    assert event == "complete" and question in data[0]
    assert call(url, "inbox", ["latest"])[0] == "error"  # not for chat users
