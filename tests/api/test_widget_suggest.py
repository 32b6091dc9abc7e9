"""The served app over real HTTP: the widget's related questions, welcome card, 👍 / 👎 with the fixed reasons and
"was this solved?" (stored on the widget's own turn in the page's log, refused for anyone else's), and the API's
``kbbot.related`` through the real openai client."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bot.config.variants import replace, update
from bot.conversations.turn_log import turn_log_from_settings
from bot.texts import BAD_TOKEN, FOREIGN, NO_SUCH_TURN, NOT_SOLVED_REASON, SOLVED_REASON, THANKS
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.serving import TOKEN, ask, kbbot, serve_asked, serve_in_process

pytestmark = pytest.mark.e2e

WIDGET_TOKEN = "widget-token-for-tests"
ALLOWED = "http://127.0.0.1:8081"
SESSION = "w" * 16
KNOWLEDGE = {**TINY, "add": {**TINY["add"], "related": ["threshold", "mode"]}}


@pytest.fixture
def app(settings, kb_dir, monkeypatch):
    """(base URL, settings): the widget on, asking "was this solved?" after every answer, three visitors having
    asked for the library before the app started (the welcome card reads the log as it starts)."""
    write_knowledge(kb_dir, KNOWLEDGE)
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    monkeypatch.setenv(settings.api.token_env, TOKEN)
    page, url = serve_asked(settings, ALLOWED, "图书馆几点开放？", examples=["食堂在哪里？"])
    try:
        yield url, settings
    finally:
        page.close()


def post(base: str, path: str, body: dict[str, Any], origin: str | None = ALLOWED) -> httpx.Response:
    headers = {"Origin": origin} if origin else {}
    return httpx.post(f"{base}{path}", json={"token": WIDGET_TOKEN, **body}, headers=headers, timeout=60)


def chat(base: str, message: str, session: str = SESSION) -> dict[str, Any]:
    r = post(base, "/widget/chat", {"message": message, "history": [], "session": session})
    assert r.status_code == 200, r.text
    return r.json()


def stored(settings, turn: int) -> dict[str, Any]:
    log = turn_log_from_settings(settings)
    assert log is not None
    try:
        return dict(log.get(turn))
    finally:
        log.close()


def test_a_widget_answer_offers_related_questions_and_feedback(app):
    base, _ = app
    data = chat(base, "怎么添加知识？")
    assert [r["id"] for r in data["related"]][:2] == ["faq:threshold", "faq:mode"]
    assert data["related"][0]["question"] == "阈值是什么意思？" and "faq:add" not in str(data["related"])
    offer = data["feedback"]
    assert isinstance(offer["turn"], int) and offer["solved"]["question"].startswith("这个回答解决您的问题了吗")
    assert [r["key"] for r in offer["reasons"]] == ["wrong", "outdated", "not_asked", "incomplete", "other"]
    assert chat(base, "你好")["related"] == []  # small talk: nothing related


def test_the_welcome_card_shows_what_was_asked_before(app):
    base, _ = app
    r = post(base, "/widget/welcome", {})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ALLOWED
    assert r.json()["questions"] == ["图书馆几点开放？"]  # as visitors asked it, not the entry's title
    assert post(base, "/widget/welcome", {}, origin="http://evil.example").json()["error"] == FOREIGN
    assert post(base, "/widget/welcome", {"token": "wrong"}).status_code == 401


def test_a_fresh_deployment_s_welcome_card_shows_the_examples(settings, kb_dir, monkeypatch):
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": [ALLOWED]})
    settings = replace(settings, "ui.examples", ["食堂在哪里？", "不在知识库里的问题"])
    page, url = serve_in_process(with_cutoffs(settings, "sparse", 0.5))
    try:
        assert post(url, "/widget/welcome", {}).json() == {"questions": ["食堂在哪里？"]}
    finally:
        page.close()


def test_thumbs_with_a_fixed_reason_and_text_are_stored_on_the_widget_s_turn(app):
    base, settings = app
    turn = chat(base, "怎么添加知识？")["feedback"]["turn"]
    up = post(base, "/widget/feedback", {"session": SESSION, "turn": turn, "rating": "up"})
    assert up.status_code == 200 and up.json() == {"stored": True, "message": THANKS}
    assert stored(settings, turn)["rating"] == 1
    body = {"session": SESSION, "turn": turn, "rating": "down", "reason": "outdated", "text": "去年的规定"}
    assert post(base, "/widget/feedback", body).status_code == 200
    row = stored(settings, turn)
    assert (row["rating"], row["reason"]) == (-1, "内容过时 / Out of date: 去年的规定")
    post(base, "/widget/feedback", {"session": SESSION, "turn": turn, "rating": "down", "reason": "wrong"})
    assert stored(settings, turn)["reason"] == "答案错误 / Wrong answer"


def test_was_it_solved_is_stored_as_the_page_stores_it(app):
    base, settings = app
    turn = chat(base, "阈值是什么意思？")["feedback"]["turn"]
    assert post(base, "/widget/feedback", {"session": SESSION, "turn": turn, "solved": False}).status_code == 200
    assert (stored(settings, turn)["rating"], stored(settings, turn)["reason"]) == (-1, NOT_SOLVED_REASON)
    assert post(base, "/widget/feedback", {"session": SESSION, "turn": turn, "solved": True}).status_code == 200
    assert (stored(settings, turn)["rating"], stored(settings, turn)["reason"]) == (1, SOLVED_REASON)


def test_nobody_rates_a_turn_of_another_conversation(app):
    base, settings = app
    turn = chat(base, "怎么添加知识？")["feedback"]["turn"]
    other = post(base, "/widget/feedback", {"session": "x" * 16, "turn": turn, "rating": "down"})
    assert other.status_code == 404 and other.json()["error"] == NO_SUCH_TURN
    assert post(base, "/widget/feedback", {"session": SESSION, "turn": 1, "rating": "down"}).status_code == 404
    assert stored(settings, 1)["rating"] is None  # the first turn is a page visitor's (source web)
    assert stored(settings, turn)["rating"] is None


BAD_RATINGS: list[tuple[dict[str, Any], int, str]] = [
    ({"turn": "1", "rating": "up"}, 400, "'turn'"),
    ({"turn": 1, "rating": "meh"}, 400, "'rating'"),
    ({"turn": 1, "rating": "up", "solved": True}, 400, "either"),
    ({"turn": 1}, 400, "either"),
    ({"turn": 1, "rating": "down", "reason": "boring"}, 400, "'reason'"),
    ({"turn": 1, "rating": "up", "reason": "wrong"}, 400, "'reason'"),
    ({"turn": 1, "rating": "down", "text": "长" * 501}, 400, "'text'"),
    ({"turn": 1, "solved": "yes"}, 400, "'solved'"),
    ({"turn": 1, "rating": "up", "token": "wrong"}, 401, BAD_TOKEN),
    ({"turn": 1, "rating": "up", "session": "short"}, 400, "'session'"),
]


def test_bad_ratings_are_refused_with_a_reason(app):
    base, settings = app
    for body, status, says in BAD_RATINGS:  # one served app for all (each would start its own)
        r = post(base, "/widget/feedback", {"session": SESSION, **body})
        assert (r.status_code, says in r.json()["error"]) == (status, True), body
    assert stored(settings, 1)["rating"] is None


def test_a_foreign_origin_cannot_rate(app):
    base, _ = app
    r = post(base, "/widget/feedback", {"session": SESSION, "turn": 1, "rating": "up"}, origin="http://evil.example")
    assert r.status_code == 403 and r.json()["error"] == FOREIGN


def test_the_api_returns_the_related_questions(app):
    base, _ = app
    extra = kbbot(ask(f"{base}/v1", "怎么添加知识？"))
    assert extra["related"][0] == {"id": "faq:threshold", "question": "阈值是什么意思？"}
    assert all(r["id"] != "faq:add" for r in extra["related"]) and len(extra["related"]) <= 3
    assert kbbot(ask(f"{base}/v1", "火星上有几座城市"))["related"] == []
