"""Every web and API turn lands in the conversation log, a failing log never breaks a chat, and the admin events
(knowledge, inbox, log) refuse requests without an admin login, through the raw Gradio HTTP API."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from bot.conversations.turn_log import TurnLogError
from bot.factory import build_bot, build_knowledge_base
from bot.ui.admin import COOKIE, AdminAuth
from tests.support.knowledge import with_cutoffs
from tests.support.serving import ADMIN_LOGIN as ADMIN
from tests.support.serving import TOKEN, login
from tests.support.serving import call_event as call

pytestmark = pytest.mark.e2e


def test_every_web_and_api_turn_is_recorded(served):
    url, kb = served
    for question in ("怎么添加知识？", "火星上有几座城市"):
        event, _ = call(url, "chat", [question, [], "follow"])
        assert event == "complete"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"model": "kbbot", "messages": [{"role": "user", "content": "阈值是什么意思？"}]}
    assert httpx.post(f"{url}v1/chat/completions", json=body, headers=headers, timeout=60).status_code == 200
    with httpx.stream(
        "POST", f"{url}v1/chat/completions", json=dict(body, stream=True), headers=headers, timeout=60
    ) as r:
        assert "[DONE]" in "".join(r.iter_text())
    turns = kb.recorder.log.recent(10)
    assert kb.recorder.log.count() == 4
    assert [t["source"] for t in reversed(turns)] == ["web", "web", "api", "api"]
    assert turns[-1]["question"] == "怎么添加知识？" and turns[-1]["session"]  # the page's opaque session id
    assert turns[-2]["strategy"] == "last_resort"
    assert [g.question for g in kb.recorder.log.unanswered()] == ["火星上有几座城市"]


def test_a_failing_log_does_not_break_the_chat(settings, caplog, monkeypatch):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)

    kb = build_knowledge_base(settings, bot)

    def broken(*args, **kwargs):
        raise TurnLogError("disk full")

    assert kb.recorder.log is not None
    monkeypatch.setattr(kb.recorder.log, "record", broken)
    with caplog.at_level(logging.ERROR, logger="bot.chat.recorder"):
        for _ in range(3):
            answer = kb.ask("怎么添加知识？", source="web")
            assert "knowledge 文件夹" in answer.text and answer.turn_id is None
    assert len([r for r in caplog.records if "disk full" in r.getMessage()]) == 1  # logged once, not per turn
    assert not kb.recorder.rate(None, False)


def test_feedback_is_stored_and_a_thumbs_down_reaches_the_inbox(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    answer = kb.ask("怎么添加知识？", source="web", session="s1")
    assert answer.turn_id is not None
    log = kb.recorder.log
    assert log is not None
    assert kb.recorder.rate(answer.turn_id, "错误 / Wrong")
    turn = log.get(answer.turn_id)
    assert turn["rating"] == -1 and turn["reason"] == "错误 / Wrong"
    group = log.unanswered()[0]
    assert group.question == "怎么添加知识？" and group.thumbs_down == 1
    assert kb.recorder.rate(answer.turn_id, "Like") and log.get(answer.turn_id)["rating"] == 1


@pytest.mark.parametrize(
    "api_name, data",
    [
        ("save_entry", ["faq.json", "", "停车场怎么收费？", "每小时五元。", "停车", None, "", False, "", ""]),
        ("inbox", ["latest"]),
        ("inbox_new_entry", [None, "faq.json", "停车场怎么收费？", "", "每小时五元。", "停车", "latest"]),
        ("inbox_dismiss", ["火星上有几座城市", "latest"]),
        ("log_turns", ["", "", ""]),
    ],
)
def test_admin_endpoints_refuse_chat_users_over_raw_http(served, kb_dir, api_name, data):
    url, kb = served
    call(url, "chat", ["火星上有几座城市", [], "follow"])
    before = (kb_dir / "faq.json").read_text(encoding="utf-8")
    forged = {COOKIE: "9999999999." + "0" * 64}
    for cookies in (None, forged):
        event, payload = call(url, api_name, data, cookies)
        assert event == "error" and "Admin login required" in json.dumps(payload, ensure_ascii=False)
    assert (kb_dir / "faq.json").read_text(encoding="utf-8") == before
    assert len(kb.recorder.log.unanswered()) == 1  # nothing dismissed
    event, payload = call(url, api_name, data, login(url))  # the same call with the admin's login works
    assert event == "complete", payload


def test_admin_login_page_refuses_wrong_passwords(served):
    url, _ = served
    r = httpx.post(f"{url}admin/login", data={"username": ADMIN[0], "password": "nope"})
    assert r.status_code == 401 and COOKIE not in r.cookies and "Wrong username or password" in r.text
    assert "Admin login" in httpx.get(f"{url}admin/login").text


def test_admin_tokens_expire_and_are_bound_to_this_app():
    now = [1000.0]
    auth = AdminAuth(ADMIN, session_hours=1, clock=lambda: now[0])
    token = auth.token()
    assert auth.valid(token) and not AdminAuth(ADMIN).valid(token)  # another process's key
    now[0] += 3601
    assert not auth.valid(token)
    assert not AdminAuth(None).valid(token) and not AdminAuth(None).check_password("", "")


def test_inbox_add_as_phrasing_makes_the_missed_question_find_that_entry(settings):
    from bot.knowledge.entries import load_entries
    from bot.ui.inbox_tab import InboxHandlers

    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    missed = "资料要放到哪个目录"
    assert kb.ask(missed, source="web").strategy.value == "last_resort"
    assert kb.recorder.log is not None
    handlers = InboxHandlers(kb.recorder.log, kb.editor)
    key = kb.recorder.log.unanswered()[0].key
    *_, status = handlers.add_phrasing(key, "faq:add", missed, "latest")
    assert "❌" not in status, status
    entry = next(e for e in load_entries(settings.resolve(settings.knowledge.path)) if e.id == "faq:add")
    assert entry.questions == (missed,) and entry.metadata == ("添加知识", "知识库")  # keywords untouched
    answer = bot.answer(missed)
    assert answer.hits and answer.hits[0].entry.id == "faq:add" and answer.hits[0].matched_question == missed
