"""Two knowledge bases served by one app (real HTTP): the API's model and the page's URL path each answer from
their own knowledge, 100 % of a question set; their logs and inboxes are apart; an admin of one is refused by the
other and nothing is written."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from bot.config.knowledge_bases import all_settings
from bot.config.settings import load_settings
from bot.conversations.turn_log import turn_log_from_settings
from bot.ui.admin import COOKIE
from tests.support.knowledge_bases import HR_ADMIN, NOBODY, QUESTIONS, answered
from tests.support.serving import (
    ADMIN_LOGIN,
    TOKEN,
    ask,
    call_event,
    client,
    error_body,
    kbbot,
    login,
    serve_in_process,
    streamed,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # two knowledge bases indexed and served: ~15 s a test

HR_COOKIE = f"{COOKIE}_hr"


@pytest.fixture
def served_kbs(two_kbs, monkeypatch):
    """(base URL, each knowledge base's settings) of the app serving both, with the API token and both admins set."""
    settings = load_settings(two_kbs())
    monkeypatch.setenv(settings.api.token_env, TOKEN)
    monkeypatch.setenv(settings.ui.admin.username_env, ADMIN_LOGIN[0])
    monkeypatch.setenv(settings.ui.admin.password_env, ADMIN_LOGIN[1])
    monkeypatch.setenv("KBBOT_ADMIN_USER_HR", HR_ADMIN[0])
    monkeypatch.setenv("KBBOT_ADMIN_PASSWORD_HR", HR_ADMIN[1])
    demo, base = serve_in_process(settings)
    try:
        yield base, all_settings(settings)
    finally:
        demo.close()


def test_the_model_and_the_page_path_pick_the_knowledge_base_and_logs_stay_apart(served_kbs):
    base, kb_settings = served_kbs
    v1 = f"{base}/v1"
    cards = {m.id: kbbot(m) for m in client(v1).models.list().data}
    assert cards["kbbot/hr"] == {"mode": "sparse", "knowledge_base": "hr"} and "kbbot" in cards
    assert kbbot(client(v1).models.retrieve("hr")) == {"mode": "sparse", "knowledge_base": "hr"}
    asked = {"default": 0, "hr": 0}
    for model, kb in (("kbbot", "default"), ("kbbot/hr", "hr"), ("hr", "hr")):
        for question in QUESTIONS:
            reply = ask(v1, question, model=model)
            assert answered(reply.choices[0].message.content or "", kb, question), (model, question)
            assert kbbot(reply)["knowledge_base"] == kb
            asked[kb] += 1
    chunks, content = streamed(v1, QUESTIONS[1], model="kbbot/hr")
    assert answered(content, "hr", QUESTIONS[1]) and kbbot(chunks[-1])["knowledge_base"] == "hr"
    asked["hr"] += 1
    with pytest.raises(openai.NotFoundError) as err:
        ask(v1, QUESTIONS[0], model="kbbot/payroll")
    assert error_body(err.value)["code"] == "model_not_found" and "kbbot/hr" in err.value.message
    for path, kb in (("/", "default"), ("/kb/hr/", "hr")):
        assert httpx.get(base + path, timeout=30).status_code == 200
        for question in QUESTIONS:
            event, payload = call_event(base + path, "chat", [question, [], "follow"])
            assert event == "complete" and answered(json.dumps(payload, ensure_ascii=False), kb, question), question
            asked[kb] += 1
    ask(v1, NOBODY, model="hr")  # unanswered: into hr's inbox only
    logs = {kb: turn_log_from_settings(kb_settings[kb]) for kb in asked}
    for kb, log in logs.items():
        assert log is not None
        rows = [row for row in log.recent(100) if row["question"] != NOBODY]
        assert len(rows) == asked[kb] and all(answered(row["answer"] or "", kb, row["question"]) for row in rows)
    assert [g.question for g in logs["hr"].unanswered()] == [NOBODY]  # type: ignore[union-attr]
    assert logs["default"].unanswered() == []  # type: ignore[union-attr]


def save_entry(base: str, path: str, cookies: dict[str, str], question: str) -> str:
    """The event name of a knowledge write (a new entry in faq.json) on the page at ``path`` with ``cookies``."""
    event, _ = call_event(
        base + path, "save_entry", ["faq.json", "", question, "新的回答。", "", None, "", False, "", ""], cookies
    )
    return event


def test_an_admin_of_one_knowledge_base_cannot_edit_another(served_kbs, tmp_path):
    base, _ = served_kbs
    files = {kb: tmp_path / kb / "faq.json" for kb in ("admissions", "hr")}
    before = {kb: f.read_text(encoding="utf-8") for kb, f in files.items()}
    hr_login = httpx.post(f"{base}/kb/hr/admin/login", data=dict(zip(("username", "password"), HR_ADMIN, strict=True)))
    assert hr_login.status_code == 303 and hr_login.headers["location"] == "../"
    hr = {HR_COOKIE: hr_login.cookies[HR_COOKIE]}
    boss = login(base + "/")  # the default's admin
    wrong = httpx.post(f"{base}/admin/login", data=dict(zip(("username", "password"), HR_ADMIN, strict=True)))
    assert wrong.status_code == 401  # hr's admin is not the default's
    assert save_entry(base, "/", hr, "人事处改招生？") == "error"
    assert save_entry(base, "/", {COOKIE: hr[HR_COOKIE]}, "换个名字的人事处 cookie？") == "error"
    assert save_entry(base, "/kb/hr/", boss, "招生办改人事处？") == "error"
    assert save_entry(base, "/kb/hr/", {HR_COOKIE: boss[COOKIE]}, "换个名字的招生办 cookie？") == "error"
    assert {kb: f.read_text(encoding="utf-8") for kb, f in files.items()} == before  # nothing written
    assert save_entry(base, "/kb/hr/", hr, "人事处的新问题？") == "complete"
    assert "人事处的新问题？" in files["hr"].read_text(encoding="utf-8")
    assert files["admissions"].read_text(encoding="utf-8") == before["admissions"]


def test_each_page_hides_error_details_and_takes_uploads_only_from_its_own_admin(served_kbs):
    from tests.support.gradio_http import queue_call

    base, _ = served_kbs
    for path in ("", "/kb/hr"):
        deps = httpx.get(f"{base}{path}/config", timeout=30).json()["dependencies"]
        chat = next(d["id"] for d in deps if d.get("api_name") == "chat")
        failed = queue_call(base + path, chat, 2)  # two inputs of five: the handler cannot run
        assert '"success":false' in failed and "input values" not in failed, (path, failed[-300:])
    hr_login = httpx.post(f"{base}/kb/hr/admin/login", data=dict(zip(("username", "password"), HR_ADMIN, strict=True)))
    hr = {HR_COOKIE: hr_login.cookies[HR_COOKIE]}
    boss = login(base + "/")

    def upload(path: str, cookies: dict[str, str]) -> int:
        files = {"files": ("faq.json", b'{"a": {"query": "q", "document": "d"}}')}
        return httpx.post(f"{base}{path}/gradio_api/upload", files=files, cookies=cookies, timeout=30).status_code

    assert [upload("/kb/hr", hr), upload("", hr), upload("/kb/hr", boss), upload("", boss)] == [200, 403, 403, 200]
