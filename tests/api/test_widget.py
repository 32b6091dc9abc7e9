"""The embeddable chat widget over real HTTP: its script, CORS for allowed origins only, the widget token, the
per-session and per-day limits, the ladder's decision and options, and the turns in the conversation log."""

from __future__ import annotations

import httpx
import pytest

from bot.api.widget import WidgetAPI, parse_widget_request
from bot.config.variants import replace, update
from bot.conversations.turn_log import turn_log_from_settings
from bot.texts import BAD_TOKEN, DAY_FULL, FOREIGN, SESSION_FULL
from tests.support.knowledge import FEES, with_cutoffs, with_thresholds, write_knowledge

pytestmark = pytest.mark.e2e

WIDGET_TOKEN = "widget-token-for-tests"
ALLOWED = "http://127.0.0.1:8081"  # a second local origin (a page served on another port)
SESSION = "s" * 16


@pytest.fixture
def widget(settings, serve_api, monkeypatch):
    """(app base URL, settings) with the widget on, one allowed origin, and the widget token set."""
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = replace(settings, "widget.enabled", True)
    settings = replace(settings, "widget.allowed_origins", [ALLOWED])
    settings = with_cutoffs(settings, "sparse", 0.5)
    return serve_api(settings).removesuffix("/v1"), settings


def post(base: str, message: str, origin: str | None = ALLOWED, session: str = SESSION, **extra) -> httpx.Response:
    body = {"message": message, "history": [], "session": session, "token": WIDGET_TOKEN, **extra}
    headers = {"Origin": origin} if origin else {}
    return httpx.post(f"{base}/widget/chat", json=body, headers=headers, timeout=60)


def test_the_script_is_served_and_sets_text_never_html(widget):
    base, _ = widget
    r = httpx.get(f"{base}/widget.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "attachShadow" in r.text and "/widget/chat" in r.text
    # text is set as text; an answer's sanitised HTML goes through an inert template and the allow-list again
    assert r.text.count("innerHTML") == 1 and 'createElement("template")' in r.text and "var TAGS" in r.text


def test_an_allowed_origin_gets_an_answer_with_cors_headers(widget):
    base, _ = widget
    preflight = httpx.options(
        f"{base}/widget/chat", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "POST"}
    )
    # Gradio's CORS middleware answers preflights for every route (on a local host: local origins only)
    assert preflight.status_code in (200, 204) and preflight.headers["access-control-allow-origin"] == ALLOWED
    r = post(base, "怎么添加知识？")
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ALLOWED
    data = r.json()
    assert data["decision"] == "answer" and "knowledge 文件夹" in data["reply"]
    assert "sources" not in data  # widget.show_sources is off by default


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8082", "http://evil.example", "http://127.0.0.1", None])
def test_a_foreign_or_missing_origin_is_refused_without_asking_the_bot(widget, origin):
    base, settings = widget
    r = post(base, "怎么添加知识？", origin=origin)
    assert r.status_code == 403 and r.json()["error"] == FOREIGN
    log = turn_log_from_settings(settings)
    assert log is None or log.recent(10) == []


def test_the_apps_own_origin_may_use_its_demo_page(widget):
    base, _ = widget
    page = httpx.get(f"{base}/widget/demo")
    assert page.status_code == 200 and f'data-token="{WIDGET_TOKEN}"' in page.text
    assert post(base, "怎么添加知识？", origin=base).status_code == 200
    assert post(base, "怎么添加知识？", origin=base.replace("127.0.0.1", "localhost")).status_code == 200


def test_a_request_naming_its_own_host_is_not_the_apps_origin(widget):
    base, _ = widget
    body = {"message": "怎么添加知识？", "history": [], "session": SESSION, "token": WIDGET_TOKEN}
    forged = {"Origin": "http://evil.example", "Host": "evil.example"}
    r = httpx.post(f"{base}/widget/chat", json=body, headers=forged, timeout=60)
    assert r.status_code == 403 and r.json()["error"] == FOREIGN


def test_a_wrong_token_is_401(widget):
    base, _ = widget
    r = post(base, "怎么添加知识？", token="nope")
    assert r.status_code == 401 and r.json()["error"] == BAD_TOKEN


def test_limits_per_session_and_per_day(widget):
    base, settings = widget
    assert post(base, "怎么添加知识？").status_code == 200
    # the limits alone, as the served instance applies them (its limiters are built from settings at start)
    settings = replace(settings, "widget.max_messages_per_session", 2)
    api = WidgetAPI(None, settings)  # type: ignore[arg-type]  # the limit checks never ask the bot
    assert [api.refused(SESSION, "1.2.3.4") for _ in range(3)] == [None, None, SESSION_FULL]
    settings = replace(settings, "widget.max_messages_per_day", 3)
    api = WidgetAPI(None, settings)  # type: ignore[arg-type]
    sessions = [f"session-{i:04d}" for i in range(4)]
    assert [api.refused(s, "1.2.3.4") for s in sessions] == [None, None, None, DAY_FULL]
    assert api.refused("session-9999", "5.6.7.8") is None  # another address has its own day


def test_the_session_limit_is_a_429_over_http(settings, serve_api, monkeypatch):
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": [ALLOWED]})
    settings = replace(settings, "widget.max_messages_per_session", 1)
    base = serve_api(settings).removesuffix("/v1")
    assert post(base, "怎么添加知识？").status_code == 200
    refused = post(base, "阈值是什么意思？")
    assert refused.status_code == 429 and refused.json()["error"] == SESSION_FULL
    assert post(base, "阈值是什么意思？", session="another-session").status_code == 200


def test_clarify_options_come_as_a_list_and_a_reply_picks_one(settings, serve_api, monkeypatch, tmp_path):
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": [ALLOWED]})
    settings = replace(settings, "widget.show_sources", True)
    folder = tmp_path / "fees"
    write_knowledge(folder, FEES)
    settings = replace(settings, "knowledge.path", str(folder))
    settings = with_thresholds(
        settings, "sparse", settings.retrieval.thresholds["sparse"].model_copy(update={"answer": 0.3, "clarify": 0.05})
    )
    base = serve_api(settings).removesuffix("/v1")
    first = post(base, "学费是多少？").json()
    assert first["decision"] == "clarify" and len(first["options"]) == 2
    picked = first["options"][1]
    history = [{"role": "user", "content": "学费是多少？"}, {"role": "assistant", "content": first["reply"]}]
    second = post(base, picked["question"], history=history).json()
    assert second["decision"] == "answer" and second["sources"][0]["id"] == picked["id"]


def test_turns_are_logged_as_widget_turns(widget):
    base, settings = widget
    assert post(base, "怎么添加知识？").status_code == 200
    log = turn_log_from_settings(settings)
    assert log is not None and [t["source"] for t in log.recent(5)] == ["widget"]


def test_a_body_over_64_kb_is_refused_without_reading_the_rest(widget):
    from bot.api.widget import MAX_BODY_BYTES
    from tests.support.bodies import post_streamed

    base, settings = widget
    prefix = b'{"session": "ssssssssssss", "token": "' + WIDGET_TOKEN.encode() + b'", "message": "'
    streamed = post_streamed(base, "/widget/chat", 200 * 1024 * 1024, prefix, b'"}', headers={"Origin": ALLOWED})
    assert streamed.status == 413 and f"body over {MAX_BODY_BYTES} bytes".encode() in streamed.reply
    assert streamed.sent < 16 * 1024 * 1024  # what the sockets buffered: not the 200 MB
    log = turn_log_from_settings(settings)
    assert log is None or log.recent(10) == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"[", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"message": "", "session": "ssssssss", "token": ""}', "message"),
        (b'{"message": "q", "session": "s", "token": ""}', "session"),
        (b'{"message": "q", "session": "ssssssss", "token": 3}', "token"),
        (b'{"message": "q", "session": "ssssssss", "token": "", "history": [{"role": "system"}]}', "history"),
    ],
)
def test_bad_requests_say_what_is_wrong(body, problem):
    with pytest.raises(ValueError, match=problem):
        parse_widget_request(body)


def test_origins_in_config_must_be_bare_origins():
    from pydantic import ValidationError

    from bot.config.settings import WidgetSettings

    with pytest.raises(ValidationError, match="no path"):
        WidgetSettings(allowed_origins=["https://example.org/"])
    assert WidgetSettings(allowed_origins=["https://example.org", "http://127.0.0.1:8000"]).allowed_origins
