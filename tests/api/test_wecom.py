"""The WeCom callback over real HTTP, driven by a simulator that encrypts and signs WeCom's documented fixtures:
URL verification, the passive reply, forged / stale / foreign / malformed callbacks refused before the bot is asked,
retries answered once, events and non-text messages, a clarify question answered with "2", and slow answers sent
through a local stand-in of the send API (a zero budget, a slow LLM, the API down, an expired token)."""

from __future__ import annotations

import logging
import os
import time

import psycopg
import pytest

from bot.config.variants import replace, update
from bot.conversations.inbox import TurnRecord
from bot.conversations.turn_log import turn_log_from_settings
from bot.serving import shared_limits
from bot.texts import ONLY_TEXT, PICK_HINT
from tests.support.knowledge import FEES, shared_by_replicas, with_cutoffs, with_fees
from tests.support.llm_server import Fault
from tests.support.wecom import CORP_ID, SECRET, WeComSimulator, enter_agent, image_message, text_message

pytestmark = pytest.mark.e2e


def start(serve_api, settings) -> WeComSimulator:
    """Serve the app; the simulator pointed at its callback URL."""
    base = serve_api(settings).removesuffix("/v1")
    return WeComSimulator(base + settings.wecom.path)


def turns(settings) -> list[TurnRecord]:
    log = turn_log_from_settings(settings)
    return [] if log is None else log.recent(50)


@pytest.fixture
def wecom(wecom_settings, serve_api):
    """(simulator, settings) of a served app with the WeCom channel on and the tiny knowledge."""
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    return start(serve_api, wecom_settings), wecom_settings


def test_a_text_message_gets_an_encrypted_signed_passive_reply_and_one_logged_turn(wecom):
    sim, settings = wecom
    r = sim.post(text_message("怎么添加知识？", user="lisi"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/xml")
    reply = sim.reply(r)  # checks the signature and the receiveid
    assert reply["ToUserName"] == "lisi" and reply["FromUserName"] == CORP_ID and reply["MsgType"] == "text"
    assert "knowledge 文件夹" in reply["Content"] and "**" not in reply["Content"]
    [row] = turns(settings)
    assert row["source"] == "wecom" and row["question"] == "怎么添加知识？"
    assert "lisi" not in (row["session"] or "")  # the log keeps a hash of the UserID, not the UserID


def test_url_verification_echoes_the_echostr_and_forged_signatures_are_401_and_nothing_is_asked(wecom, qyapi):
    sim, settings = wecom
    verified = sim.verify_url("8917304522613358")
    assert verified.status_code == 200 and verified.text == "8917304522613358"
    assert sim.verify_url(forge=True).status_code == 401
    r = sim.post(text_message("怎么添加知识？"), forge=True)
    assert r.status_code == 401 and r.text == "wrong msg_signature"
    assert turns(settings) == [] and qyapi.calls == []
    # the same message, signed, is then taken: the forged one did not mark its MsgId as seen
    assert sim.post(text_message("怎么添加知识？")).status_code == 200 and len(turns(settings)) == 1


def test_stale_foreign_and_malformed_callbacks_are_clear_4xx(wecom):
    sim, settings = wecom
    stale = sim.post(text_message("怎么添加知识？", msg_id="1"), timestamp=1_476_422_779)
    assert stale.status_code == 403 and "timestamp" in stale.text
    foreign = sim.post(text_message("怎么添加知识？", msg_id="2"), receive_id="ww-another-corp")
    assert foreign.status_code == 403 and "corp id" in foreign.text
    assert sim.post_raw(b"not xml at all", {}).status_code == 400
    no_encrypt = sim.post_raw(b"<xml><ToUserName>x</ToUserName></xml>", {})
    assert no_encrypt.status_code == 400 and "Encrypt" in no_encrypt.text
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xml><Encrypt>&a;</Encrypt></xml>'
    assert sim.post_raw(bomb, sim.query("aaaa")).status_code == 400
    unsigned = sim.post_raw(b"<xml><Encrypt>abcd</Encrypt></xml>", {"timestamp": "1"})
    assert unsigned.status_code == 400 and "msg_signature" in unsigned.text
    assert sim.post_raw(b"<xml>" + b"x" * 70_000 + b"</xml>", {}).status_code == 413
    garbage = sim.post_raw(b"<xml><Encrypt>!!not base64!!</Encrypt></xml>", sim.query("!!not base64!!"))
    assert garbage.status_code == 400 and "base64" in garbage.text
    assert turns(settings) == []


def test_a_retried_msgid_is_answered_once_events_get_an_empty_200_and_images_a_notice(wecom):
    sim, settings = wecom
    message = text_message("怎么添加知识？", msg_id="7777")
    first, retry = sim.post(message), sim.post(message)
    assert "knowledge 文件夹" in sim.reply(first)["Content"]
    assert retry.status_code == 200 and retry.content == b""
    event = sim.post(enter_agent())
    assert event.status_code == 200 and event.content == b""
    assert sim.reply(sim.post(image_message()))["Content"] == ONLY_TEXT
    assert len(turns(settings)) == 1  # the first message only


def test_a_callback_replayed_after_a_restart_is_not_answered_again(wecom_settings, serve_api):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    message = text_message("怎么添加知识？", msg_id="8888")
    first = start(serve_api, wecom_settings)
    captured = first.signed(message)  # what an attacker on the path keeps: the body and its signed query
    assert "knowledge 文件夹" in first.reply(first.post_raw(*captured))["Content"]
    restarted = start(serve_api, wecom_settings)  # a new process over the same state folder
    replay = restarted.post_raw(*captured)
    assert replay.status_code == 200 and replay.content == b""
    assert len(turns(wecom_settings)) == 1


def test_a_clarify_question_then_2_answers_the_second_option(wecom_settings, serve_api, tmp_path):
    wecom_settings = with_fees(wecom_settings, tmp_path / "fees")
    sim = start(serve_api, wecom_settings)
    asked = sim.reply(sim.post(text_message("学费是多少？", msg_id="1")))["Content"]
    lines = [line for line in asked.splitlines() if line[:2] in ("1.", "2.", "3.")]
    assert len(lines) == 2 and asked.count("1.") == 1 and asked.endswith(PICK_HINT)  # numbered once
    second = lines[1].split(".", 1)[1].strip()
    answered = sim.reply(sim.post(text_message("2", msg_id="2")))["Content"]
    expected = next(e["document"] for e in FEES.values() if e["query"] == second)
    assert expected in answered
    row = turns(wecom_settings)[0]
    assert row["question"] == "2" and row["hits"][0]["id"] in {
        f"faq:{k}" for k, e in FEES.items() if e["query"] == second
    }
    # another user saying "2" has no question to answer: the histories are per user
    assert expected not in sim.reply(sim.post(text_message("2", user="zhaoliu", msg_id="3")))["Content"]


def test_a_slow_answer_is_sent_through_the_send_api_with_one_cached_token(wecom_settings, serve_api, qyapi):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    wecom_settings = replace(wecom_settings, "wecom.reply_budget_seconds", 0)  # always the send API
    sim = start(serve_api, wecom_settings)
    for n, question in enumerate(["怎么添加知识？", "你好"]):
        r = sim.post(text_message(question, user="wangwu", msg_id=f"90{n}"))
        assert r.status_code == 200 and r.content == b""  # at once, not the answer
    sent = qyapi.wait_sent(2)
    assert [m["touser"] for m in sent] == ["wangwu", "wangwu"] and {m["agentid"] for m in sent} == {1000002}
    assert "knowledge 文件夹" in sent[0]["text"]["content"] and {m["msgtype"] for m in sent} == {"text"}  # in order
    assert qyapi.tokens_issued == 1  # gettoken once; the token is cached until it expires


def test_an_expired_token_is_renewed_and_the_message_still_sent(wecom_settings, serve_api, qyapi):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    wecom_settings = replace(wecom_settings, "wecom.reply_budget_seconds", 0)
    sim = start(serve_api, wecom_settings)
    qyapi.expire_next = True
    sim.post(text_message("怎么添加知识？"))
    [sent] = qyapi.wait_sent(1)
    assert qyapi.tokens_issued == 2 and sent["access_token"] == "access-token-2"


def test_the_send_api_down_is_logged_retried_and_never_crashes(wecom_settings, serve_api, qyapi, caplog):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    wecom_settings = update(
        wecom_settings,
        {"wecom.reply_budget_seconds": 0, "wecom.send_attempts": 3, "wecom.send_retry_seconds": 0.05},
    )
    sim = start(serve_api, wecom_settings)
    qyapi.down = True
    with caplog.at_level(logging.WARNING, logger="bot.api.wecom"):
        assert sim.post(text_message("怎么添加知识？", msg_id="1")).status_code == 200
        for _ in range(200):
            if any("not delivered" in r.getMessage() for r in caplog.records):
                break
            time.sleep(0.05)
    assert qyapi.calls.count("/cgi-bin/gettoken") == 3  # three attempts
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("bot.api.wecom")]
    assert sum("failed:" in m for m in messages) == 3 and any("not delivered" in m for m in messages)
    assert not any(SECRET in m or "access-token" in m for m in caplog.text.splitlines())
    qyapi.down = False  # the channel still works: the next answer goes out
    sim.post(text_message("你好", msg_id="2"))
    assert qyapi.wait_sent(1)[0]["touser"] == "zhangsan"


def test_without_its_secrets_in_the_environment_the_callback_refuses_with_503(
    wecom_settings, serve_api, monkeypatch, caplog
):
    monkeypatch.delenv(wecom_settings.wecom.aes_key_env)
    with caplog.at_level(logging.WARNING, logger="bot.api.wecom"):
        sim = start(serve_api, wecom_settings)
    assert wecom_settings.wecom.aes_key_env in caplog.text  # the log names what to set
    r = sim.post(text_message("怎么添加知识？"))
    assert r.status_code == 503 and "not configured" in r.text


@pytest.mark.slow
def test_a_slow_llm_misses_the_budget_and_its_answer_follows_through_the_send_api(
    wecom_settings, llm_settings, llm_server, serve_api, qyapi
):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    # both fixtures are variants of the same settings: the LLM's block joins the WeCom one
    wecom_settings = update(wecom_settings, {"llm": llm_settings.llm, "wecom.reply_budget_seconds": 0.5})
    sim = start(serve_api, wecom_settings)
    llm_server.fail(Fault(sleep=2.0))  # the model takes 2 s: past the budget, within the LLM's timeout
    began = time.monotonic()
    r = sim.post(text_message("怎么添加知识？", user="sunqi"))
    assert r.status_code == 200 and r.content == b"" and time.monotonic() - began < 1.5  # WeCom is not kept waiting
    [sent] = qyapi.wait_sent(1)
    assert sent["touser"] == "sunqi" and sent["text"]["content"].startswith("模型回答")  # the LLM's answer
    assert len(llm_server.requests) == 1 and turns(wecom_settings)[0]["source"] == "wecom"


def test_a_quick_reply_waits_for_the_slow_answer_to_the_message_before_it(
    wecom_settings, llm_settings, llm_server, serve_api, qyapi
):
    wecom_settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    # a budget a busy machine answers small talk within, and a model slower than two budgets
    wecom_settings = update(wecom_settings, {"llm": llm_settings.llm, "wecom.reply_budget_seconds": 1.0})
    sim = start(serve_api, wecom_settings)
    llm_server.fail(Fault(sleep=2.5))  # the first answer misses the budget, and so does the greeting behind it
    first = sim.post(text_message("怎么添加知识？", user="sunqi", msg_id="801"))
    greeting = sim.post(text_message("你好", user="sunqi", msg_id="802"))  # small talk: no model call
    other = sim.reply(sim.post(text_message("你好", user="zhouba", msg_id="803")))  # another user is not held up
    assert first.content == b"" and greeting.content == b"" and other["Content"]
    sent = qyapi.wait_sent(2)
    assert [m["touser"] for m in sent] == ["sunqi", "sunqi"]
    assert sent[0]["text"]["content"].startswith("模型回答") and not sent[1]["text"]["content"].startswith("模型回答")


def test_behind_two_replicas_a_2_on_one_answers_the_question_asked_on_the_other(
    wecom_settings, pg_settings, serve_api, tmp_path, own_stores
):
    shared = shared_by_replicas(with_fees(wecom_settings, tmp_path / "fees"), pg_settings)
    a = start(serve_api, shared)
    shared_limits._stores.clear()  # replica B opens its own connection, as another process would
    b = start(serve_api, shared)
    asked = a.reply(a.post(text_message("学费是多少？", msg_id="11")))["Content"]
    second = next(line for line in asked.splitlines() if line.startswith("2.")).split(".", 1)[1].strip()
    answered = b.reply(b.post(text_message("2", msg_id="12")))["Content"]  # the next message reaches replica B
    assert next(e["document"] for e in FEES.values() if e["query"] == second) in answered
    retry = b.post(text_message("2", msg_id="12"))  # WeCom's retry of it, on either replica, is taken once
    assert retry.status_code == 200 and retry.content == b""
    with psycopg.connect(os.environ[pg_settings.log.postgres.dsn_env]) as conn:
        stored = [row[0] for row in conn.execute("SELECT user_key FROM wecom_history")]
    assert len(stored) == 2 and not any("zhangsan" in key for key in stored)  # users by their keyed hash
