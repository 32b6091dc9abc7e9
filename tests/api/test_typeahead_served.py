"""Type-ahead served over real HTTP: the widget's /widget/typeahead with its origin, token, body cap and per-address
limit, and what it offers for short, long, special and HTML-bearing input."""

from __future__ import annotations

import httpx
import pytest

from bot.api.widget import parse_typeahead_request
from bot.config.variants import update
from bot.texts import BAD_TOKEN, FOREIGN, TOO_MANY
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.e2e

WIDGET_TOKEN = "widget-token-for-tests"
ALLOWED = "http://127.0.0.1:8081"
KNOWLEDGE = {
    **TINY,
    "html": {"query": "<img src=x onerror=alert(1)> 怎么报销发票", "document": "找财务处。"},
    "draft": {"query": "怎么申请宿舍调换（草稿）", "document": "…", "draft": True},
    "dorm": {"query": "宿舍怎么报修", "document": "打电话。", "categories": ["住宿"]},
}


@pytest.fixture
def widget(settings, serve_api, monkeypatch, kb_dir):
    """The served app's base URL with the widget on for one allowed origin, over :data:`KNOWLEDGE`."""

    def start(**changes) -> str:
        write_knowledge(kb_dir, KNOWLEDGE)
        monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
        served = update(settings, {"widget.enabled": True, "widget.allowed_origins": [ALLOWED], **changes})
        return serve_api(served).removesuffix("/v1")

    return start


def look_up(base: str, text: object, origin: str | None = ALLOWED, token: object = WIDGET_TOKEN) -> httpx.Response:
    headers = {"Origin": origin} if origin else {}
    return httpx.post(f"{base}/widget/typeahead", json={"text": text, "token": token}, headers=headers, timeout=30)


def questions(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [s["question"] for s in response.json()["suggestions"]]


def test_the_questions_that_contain_the_text_come_back_with_cors_headers(widget):
    base = widget()
    r = look_up(base, "怎么")
    assert r.headers["access-control-allow-origin"] == ALLOWED
    assert r.headers["content-type"].startswith("application/json")
    found = r.json()["suggestions"]
    # starting with 怎么 first (shorter first), then containing it; the draft never
    assert [s["question"] for s in found] == [
        "怎么添加知识？",
        "怎么切换检索模式？",
        "宿舍怎么报修",
        "<img src=x onerror=alert(1)> 怎么报销发票",
    ]
    assert found[0]["entry"] == "faq:add"
    # HTML in a question is data in the JSON string, which the widget's script sets as text
    assert questions(look_up(base, "发票")) == ["<img src=x onerror=alert(1)> 怎么报销发票"]


def test_empty_short_special_and_very_long_input(widget):
    base = widget()
    for text in ["", " ", "怎", "？？", ".*", "[", "(?:a|b)*$", "\\", "%s%n", "' OR 1=1 --"]:
        assert questions(look_up(base, text)) == [], text
    assert questions(look_up(base, "怎么" * 40)) == []  # over typeahead.max_chars: a paste, not typing
    assert questions(look_up(base, "怎么添加" + " " * 60)) == ["怎么添加知识？"]  # 64 characters: still typed
    huge = httpx.post(
        f"{base}/widget/typeahead",
        content=b'{"text": "' + b"a" * 70_000 + b'", "token": "x"}',
        headers={"Origin": ALLOWED, "Content-Type": "application/json"},
        timeout=30,
    )
    assert huge.status_code == 413


def test_a_foreign_origin_a_wrong_token_and_a_bad_body_are_refused(widget):
    base = widget()
    assert look_up(base, "怎么", origin="http://evil.example").status_code == 403
    assert look_up(base, "怎么", origin="http://evil.example").json()["error"] == FOREIGN
    assert look_up(base, "怎么", origin=None).status_code == 403
    wrong = look_up(base, "怎么", token="nope")
    assert wrong.status_code == 401 and wrong.json()["error"] == BAD_TOKEN
    assert look_up(base, 42).status_code == 400
    assert look_up(base, "怎么", token=None).status_code == 401
    junk = httpx.post(f"{base}/widget/typeahead", content=b"not json", headers={"Origin": ALLOWED}, timeout=30)
    assert junk.status_code == 400


def test_look_ups_per_address_are_limited(widget):
    base = widget(**{"limits.typeahead_per_minute": 3})
    assert [look_up(base, "怎么").status_code for _ in range(3)] == [200, 200, 200]
    refused = look_up(base, "怎么")
    assert refused.status_code == 429 and refused.json()["error"] == TOO_MANY


def test_off_offers_nothing(widget):
    assert questions(look_up(widget(**{"typeahead.enabled": False}), "怎么")) == []


def test_the_request_parser_names_what_is_wrong():
    assert parse_typeahead_request({"text": "ab", "token": "t"}) == "ab"
    bad: list[dict[str, object]] = [{"token": "t"}, {"text": 42}, {"text": None}]
    for data in bad:
        with pytest.raises(ValueError, match="'text'"):
            parse_typeahead_request(data)
