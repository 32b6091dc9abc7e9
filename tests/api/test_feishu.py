"""The Feishu event route over real HTTP, driven by a simulator that signs and encrypts Feishu's documented payloads,
answering through a local stand-in of the open platform: the URL check (plain and encrypted), a message answered
through the IM API, forged / stale / unsigned / foreign / malformed / oversize requests refused before the bot is
asked, retries and replays answered once (also after a restart), groups answered only when the bot is @mentioned,
other kinds of message, the token renewed before it expires and when refused, and the API down (retried, logged)."""

from __future__ import annotations

import json
import logging
import os
import time

import psycopg
import pytest

from bot.config.variants import update
from bot.conversations.inbox import TurnRecord
from bot.conversations.turn_log import turn_log_from_settings
from bot.serving import shared_limits
from bot.texts import ONLY_TEXT, PICK_HINT, TOO_FAST
from tests.support.feishu import (
    APP_SECRET,
    GROUP_CHAT,
    P2P_CHAT,
    USER,
    FeishuSimulator,
    at_bot,
    encrypt,
    message_event,
    text_event,
    url_verification,
)
from tests.support.knowledge import FEES, shared_by_replicas, with_cutoffs, with_fees

pytestmark = pytest.mark.e2e

ADD_KNOWLEDGE = "怎么添加知识？"
ANSWERED = "knowledge 文件夹"  # in the tiny knowledge's answer to it


def start(serve_api, settings) -> FeishuSimulator:
    """Serve the app; the simulator pointed at its event route."""
    return FeishuSimulator(serve_api(settings).removesuffix("/v1") + settings.feishu.path)


def turns(settings) -> list[TurnRecord]:
    log = turn_log_from_settings(settings)
    return [] if log is None else log.recent(50)


def settle(seconds: float = 0.5) -> None:
    """Give the answer threads time to do what they should not (asserting that nothing happened)."""
    time.sleep(seconds)


@pytest.fixture
def feishu(feishu_settings, serve_api):
    """(simulator, settings) of a served app with the Feishu channel on and the tiny knowledge."""
    feishu_settings = with_cutoffs(feishu_settings, "sparse", 0.5)
    return start(serve_api, feishu_settings), feishu_settings


def test_the_url_check_echoes_its_challenge_plain_or_encrypted_and_only_with_the_token(feishu):
    sim, _ = feishu
    for encrypted in (False, True):  # Feishu does not sign the check; the token (and the key) prove it
        r = sim.post(url_verification("1b6aef1a-401f-406a"), encrypted=encrypted, signed=False)
        assert r.status_code == 200 and r.json() == {"challenge": "1b6aef1a-401f-406a"}
    wrong = sim.post(url_verification(token="another-apps-token"), signed=False)
    assert wrong.status_code == 403 and "Verification Token" in wrong.text and "challenge" not in wrong.text


def test_a_p2p_message_is_acknowledged_at_once_and_answered_through_the_im_api(feishu, open_platform):
    sim, settings = feishu
    began = time.monotonic()
    r = sim.post(text_event(ADD_KNOWLEDGE))
    assert r.status_code == 200 and r.json() == {"msg": "ok"} and time.monotonic() - began < 3  # Feishu's limit
    sim.post(text_event("你好"))
    sent = open_platform.wait_sent(2)
    assert {(m["receive_id_type"], m["receive_id"], m["msg_type"]) for m in sent} == {("chat_id", P2P_CHAT, "text")}
    assert ANSWERED in sent[0]["text"] and "**" not in sent[0]["text"]
    assert all(m["uuid"].startswith("kbbot-") for m in sent) and len({m["uuid"] for m in sent}) == 2
    assert open_platform.tokens_issued == 1  # the tenant token is cached
    row = next(t for t in turns(settings) if t["question"] == ADD_KNOWLEDGE)
    assert row["source"] == "feishu" and USER not in (row["session"] or "")  # the log keeps a keyed hash


def test_forged_stale_unsigned_foreign_and_malformed_requests_are_refused_before_the_bot(feishu, open_platform):
    sim, settings = feishu
    event = text_event(ADD_KNOWLEDGE)
    forged = sim.post(event, forge=True)
    assert forged.status_code == 401 and forged.text == "wrong X-Lark-Signature"
    stale = sim.post(event, timestamp=int(time.time()) - 3600)
    assert stale.status_code == 403 and "X-Lark-Request-Timestamp" in stale.text
    unsigned = sim.post(event, signed=False)
    assert unsigned.status_code == 401 and "Encrypt Key" in unsigned.text
    assert sim.post(text_event(ADD_KNOWLEDGE, token="another-apps-token")).status_code == 403
    half = sim.body(event)
    incomplete = sim.post_raw(half, {"X-Lark-Signature": sim.headers(half)["X-Lark-Signature"]})
    assert incomplete.status_code == 400 and "come together" in incomplete.text
    for body, reason in [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"encrypt": "!!not base64!!"}', "base64"),
        (b'{"encrypt": "YWJj"}', "whole AES blocks"),
        (b'{"encrypt": 42}', "not a string"),
        (json.dumps({"encrypt": encrypt(json.dumps(event), key="another-apps-key")}).encode(), "Encrypt Key"),
        (b'{"schema": "2.0", "header": {}}', "event_id"),
        (json.dumps({"encrypt": encrypt('{"type": "event_callback"}')}).encode(), "neither"),
    ]:
        r = sim.post_raw(body, sim.headers(body))
        assert r.status_code == 400 and reason in r.text, (body, r.text)
    huge = b'{"encrypt": "' + b"A" * 300_000 + b'"}'
    assert sim.post_raw(huge, sim.headers(huge)).status_code == 413
    settle()
    assert turns(settings) == [] and open_platform.sent == [] and open_platform.calls == []
    # the same event, signed: the refused copies did not mark its event_id as taken
    assert sim.post(event).status_code == 200
    assert ANSWERED in open_platform.wait_sent(1)[0]["text"]


def test_a_retried_or_replayed_event_is_answered_once_also_after_a_restart(feishu_settings, serve_api, open_platform):
    settings = with_cutoffs(feishu_settings, "sparse", 0.5)
    first = start(serve_api, settings)
    event = text_event(ADD_KNOWLEDGE)
    assert first.post(event).status_code == 200
    retry = first.post(event)  # Feishu's retry: the same event_id, signed afresh
    assert retry.status_code == 200 and retry.json() == {"msg": "ok"}
    open_platform.wait_sent(1)
    restarted = start(serve_api, settings)  # a new process's memory: only the state folder knows the event
    assert restarted.post(event).status_code == 200
    settle()
    assert len(open_platform.sent) == 1 and len(turns(settings)) == 1
    assert restarted.post(text_event("你好")).status_code == 200 and len(open_platform.wait_sent(2)) == 2


def test_in_a_group_only_a_message_mentioning_the_bot_is_answered_as_a_reply_without_the_mention(feishu, open_platform):
    sim, settings = feishu
    sim.post(text_event(ADD_KNOWLEDGE, chat_type="group"))  # no mention: people talking among themselves
    sim.post(text_event(f"@_user_1 {ADD_KNOWLEDGE}", chat_type="group", mentions=(("@_user_1", USER, "张三"),)))
    sim.post(message_event("image", {"image_key": "img_v2_041b"}, chat_type="group"))
    settle()
    assert open_platform.sent == [] and turns(settings) == []
    event = at_bot(ADD_KNOWLEDGE)
    sim.post(event)
    [sent] = open_platform.wait_sent(1)
    assert sent["reply_to"] == event["event"]["message"]["message_id"] and ANSWERED in sent["text"]
    [row] = turns(settings)
    assert row["question"] == ADD_KNOWLEDGE  # "@_user_1 " left out
    assert open_platform.calls.count("GET /open-apis/bot/v3/info") == 1  # the bot's open_id, asked once
    sim.post(at_bot("你好"))
    open_platform.wait_sent(2)
    assert open_platform.calls.count("GET /open-apis/bot/v3/info") == 1 and GROUP_CHAT not in (row["session"] or "")


def test_other_kinds_get_the_bilingual_note_and_rich_text_is_read_as_its_text(feishu, open_platform):
    sim, settings = feishu
    sim.post(message_event("image", {"image_key": "img_v2_041b"}))
    assert open_platform.wait_sent(1)[0]["text"] == ONLY_TEXT
    post = {"title": "", "content": [[{"tag": "text", "text": ADD_KNOWLEDGE, "style": []}]]}
    sim.post(message_event("post", post), encrypted=False)  # a signed plain body is read as well
    assert ANSWERED in open_platform.wait_sent(2)[1]["text"]
    assert [t["question"] for t in turns(settings)] == [ADD_KNOWLEDGE]


def test_a_member_over_the_per_minute_limit_is_told_to_wait_and_others_are_not(
    feishu_settings, serve_api, open_platform
):
    sim = start(serve_api, update(with_cutoffs(feishu_settings, "sparse", 0.5), {"limits.chat_per_minute": 2}))
    for _ in range(3):
        sim.post(text_event("你好"))
    sim.post(text_event("你好", sender="ou_another_member"))
    sent = open_platform.wait_sent(4)
    assert sum(m["text"] == TOO_FAST for m in sent) == 1  # the third of the first member's messages


def test_a_clarify_question_then_2_answers_the_second_option(feishu_settings, serve_api, open_platform, tmp_path):
    sim = start(serve_api, with_fees(feishu_settings, tmp_path / "fees"))
    sim.post(text_event("学费是多少？"))
    asked = open_platform.wait_sent(1)[0]["text"]
    assert asked.endswith(PICK_HINT)
    second = next(line for line in asked.splitlines() if line.startswith("2.")).split(".", 1)[1].strip()
    sim.post(text_event("2"))
    answered = open_platform.wait_sent(2)[1]["text"]
    assert next(e["document"] for e in FEES.values() if e["query"] == second) in answered


def test_the_token_is_renewed_before_it_expires_and_at_once_when_feishu_refuses_it(feishu, open_platform):
    sim, _ = feishu
    open_platform.expire = 2  # renewed after half its life when that is shorter than five minutes
    sim.post(text_event("你好"))
    open_platform.wait_sent(1)
    time.sleep(1.2)
    sim.post(text_event("你好"))
    open_platform.wait_sent(2)
    assert open_platform.tokens_issued == 2 and open_platform.refused == 0  # renewed before Feishu refused it
    open_platform.expire, open_platform.refuse_next = 7200, True  # revoked early: refused, renewed, sent
    sim.post(text_event("你好"))
    open_platform.wait_sent(3)
    assert open_platform.tokens_issued == 3 and open_platform.refused == 1


def test_the_im_api_down_is_retried_and_logged_and_the_next_answer_still_goes_out(feishu, open_platform, caplog):
    sim, settings = feishu
    open_platform.down = True
    with caplog.at_level(logging.WARNING, logger="bot.api.feishu"):
        assert sim.post(text_event(ADD_KNOWLEDGE)).status_code == 200
        for _ in range(200):
            if any("not delivered" in r.getMessage() for r in caplog.records):
                break
            time.sleep(0.05)
    tries = open_platform.calls.count("POST /open-apis/auth/v3/tenant_access_token/internal")
    assert tries == settings.feishu.send_attempts  # each attempt asked for a token, and got a 503
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("bot.api.feishu")]
    assert sum("failed:" in m for m in messages) == tries and any("not delivered" in m for m in messages)
    assert not any(APP_SECRET in line or "t-1" in line for line in caplog.text.splitlines())
    open_platform.down = False
    sim.post(text_event("你好"))
    assert open_platform.wait_sent(1)[0]["receive_id"] == P2P_CHAT


def test_without_its_secrets_in_the_environment_the_route_refuses_with_503(
    feishu_settings, serve_api, monkeypatch, caplog
):
    monkeypatch.delenv(feishu_settings.feishu.encrypt_key_env)
    with caplog.at_level(logging.WARNING, logger="bot.api.feishu"):
        sim = start(serve_api, feishu_settings)
    assert feishu_settings.feishu.encrypt_key_env in caplog.text  # the log names what to set
    r = sim.post(url_verification(), signed=False)
    assert r.status_code == 503 and "not configured" in r.text


def test_behind_two_replicas_a_retry_on_either_is_taken_once_and_a_2_answers_the_other_s_question(
    feishu_settings, pg_settings, serve_api, open_platform, tmp_path, own_stores
):
    shared = shared_by_replicas(with_fees(feishu_settings, tmp_path / "fees"), pg_settings)
    a = start(serve_api, shared)
    shared_limits._stores.clear()  # replica B opens its own connection, as another process would
    b = start(serve_api, update(shared, {"state_dir": str(tmp_path / "replica-b")}))  # not one state folder
    a.post(text_event("学费是多少？"))
    asked = open_platform.wait_sent(1)[0]["text"]
    second = next(line for line in asked.splitlines() if line.startswith("2.")).split(".", 1)[1].strip()
    event = text_event("2")
    b.post(event)  # the next message reaches replica B
    assert next(e["document"] for e in FEES.values() if e["query"] == second) in open_platform.wait_sent(2)[1]["text"]
    assert a.post(event).status_code == 200  # Feishu's retry of it reaches replica A: taken once
    settle()
    assert len(open_platform.sent) == 2
    with psycopg.connect(os.environ[pg_settings.log.postgres.dsn_env]) as conn:
        stored = [row[0] for row in conn.execute("SELECT user_key FROM feishu_history")]
        assert conn.execute("SELECT count(*) FROM feishu_seen").fetchone() == (2,)
    assert len(stored) == 2 and not any(USER in key for key in stored)  # users by their keyed hash
