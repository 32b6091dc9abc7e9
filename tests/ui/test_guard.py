"""Guards of the served app: limits per client address, upload cap and cleanup, login throttling, bounded logs, the
CSP header, markdown that cannot fetch, and the LLM concurrency bound."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Generator
from types import SimpleNamespace

import httpx
import pytest

from bot.chat.llm import BoundedChatModel, OpenAIChat
from bot.config.llm import LLMSettings
from bot.config.variants import replace
from bot.errors import LLMTimeoutError
from bot.serving.logfilter import RepeatFilter
from bot.serving.logins import CLIENT_ADDRESS, ThrottledLogin, credentials_check
from bot.ui.guard import CSP, safe_markdown
from tests.support.bodies import upload_regardless
from tests.support.serving import ADMIN_COOKIE as ADMIN
from tests.support.serving import TOKEN
from tests.support.serving import admin_call as call

pytestmark = pytest.mark.e2e

MB = 1024 * 1024


# -- content that cannot reach out -----------------------------------------------------
def test_markdown_images_are_neutralised_and_the_text_round_trips():
    import html

    raw = "看图 ![x](http://198.51.100.7/track.png) <img src=http://198.51.100.7/x.png> ![y][ref] 5! [ok]"
    shown = safe_markdown(raw)
    assert "![" not in shown and "<img" not in shown and "&lt;img" in shown
    assert html.unescape(shown) == raw


def test_every_response_carries_a_csp_that_keeps_images_on_this_server(serve_app):
    base = serve_app()
    for path in ("/", "/gradio_api/info", "/v1/models"):
        assert httpx.get(base + path, timeout=30).headers["content-security-policy"] == CSP
    assert "img-src 'self' data: blob:" in CSP


# -- limits per client address -----------------------------------------------------------
def test_retrieval_test_and_knowledge_writes_are_limited_per_address_across_fresh_clients(settings, serve_app, kb_dir):
    settings = replace(settings, "limits.retrieval_test_per_minute", 2)
    settings = replace(settings, "limits.writes_per_minute", 2)
    base = serve_app(settings)
    tables = [call(base, "retrieval_test", "怎么添加知识")[0] for _ in range(3)]
    assert "Too many requests" not in tables[1] and "Too many requests" in tables[2] and "sparse" in tables[0]
    statuses = [
        call(base, "save_entry", "faq.json", "", f"停车场{n}怎么收费？", "五元。", "停车", None, "", False, "", "")[0]
        for n in range(3)
    ]
    assert "index updated" in statuses[1] and "Too many requests" in statuses[2]
    saved = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert sum("停车场" in v["query"] for v in saved.values()) == 2


def test_upload_over_the_size_cap_is_refused_and_imported_uploads_are_deleted(settings, serve_app, tmp_path, kb_dir):
    settings = replace(settings, "limits.max_upload_mb", 0.01)  # 10 KiB
    base = serve_app(settings)
    big = b'{"x": {"query": "q", "document": "' + b"a" * 20_000 + b'"}}'
    refused = httpx.post(base + "/gradio_api/upload", files={"files": ("big.json", big)}, headers=ADMIN, timeout=30)
    assert refused.status_code == 413
    small = json.dumps({"p": {"query": "停车场怎么收费？", "document": "五元。"}}, ensure_ascii=False).encode()
    stored = httpx.post(
        base + "/gradio_api/upload", files={"files": ("parking.json", small)}, headers=ADMIN, timeout=30
    ).json()[0]
    from pathlib import Path

    assert Path(stored).exists()
    status = call(base, "upload_file", {"path": stored, "meta": {"_type": "gradio.FileData"}}, False, False)[0]
    assert "index updated" in status and (kb_dir / "parking.json").exists()
    assert not Path(stored).exists()  # imported: gone from Gradio's upload folder
    again = call(base, "upload_file", {"path": stored, "meta": {"_type": "gradio.FileData"}}, False, False)[0]
    assert "choose it again" in again


# -- request bodies ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["/gradio_api/queue/join", "/gradio_api/call/chat", "/v1/chat/completions", "/admin/login"]
)
def test_a_body_past_the_cap_is_refused_on_every_route_before_it_is_read(settings, serve_app, monkeypatch, path):
    from tests.support.bodies import chat_fn_index, chat_join_body, post_streamed

    monkeypatch.setenv(settings.api.token_env, TOKEN)
    base = serve_app(replace(settings, "limits.max_body_kb", 64))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    if path == "/admin/login":  # a form is read; a JSON body is not
        auth["Content-Type"] = "application/x-www-form-urlencoded"
    streamed = post_streamed(base, path, 200 * MB, *chat_join_body(chat_fn_index(base)), headers=auth)
    # refused as soon as 64 KiB passed: what was sent is what the socket buffers took, far below the 200 MB
    assert streamed.status == 413 and streamed.sent < 16 * MB, streamed
    assert "at most 65536 bytes" in streamed.reply.decode("utf-8", "replace") or streamed.reply.endswith(b"\r\n\r\n")
    declared = httpx.post(base + path, content=b"x" * (65 * 1024), headers=auth, timeout=30)
    assert declared.status_code == 413 and "at most 65536 bytes" in declared.text
    assert declared.headers["content-security-policy"] == CSP


def test_a_body_under_the_cap_still_reaches_the_chat(settings, serve_app):
    from tests.support.bodies import chat_fn_index, chat_join_body, post_streamed

    base = serve_app(replace(settings, "limits.max_body_kb", 64))
    prefix, suffix = chat_join_body(chat_fn_index(base))
    assert post_streamed(base, "/gradio_api/queue/join", 60 * 1024, prefix, suffix).status == 200
    assert (
        "knowledge 文件夹" in call(base, "chat", "怎么添加知识？", [], None, {}, [], None)[0][-1]["content"][0]["text"]
    )


def test_a_long_chat_message_is_shown_and_sent_back_cut_to_what_the_bot_reads(settings, serve_app):
    settings = replace(settings, "limits.max_message_chars", 50)
    base = serve_app(settings)
    history, textbox, sources, *_ = call(base, "chat", "怎么添加知识？" + "啊" * 100_000, [], None, {}, [], None)
    assert [len(m["content"][0]["text"]) for m in history[:1]] == [50] and "啊" * 60 not in str(textbox)
    assert "first 50 characters" in sources  # the bot still says it was cut


def test_uploads_are_limited_per_address(settings, serve_app):
    settings = replace(settings, "limits.writes_per_minute", 2)
    base = serve_app(settings)
    codes = [
        httpx.post(
            base + "/gradio_api/upload", files={"files": ("a.json", b"{}")}, headers=ADMIN, timeout=30
        ).status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]


@pytest.mark.parametrize("refusal", [403, 429])
def test_an_upload_refused_before_it_is_read_is_not_read_after_either(settings, serve_app, refusal):
    base = serve_app(replace(settings, "limits.writes_per_minute", 1))
    if refusal == 429:
        assert httpx.post(base + "/gradio_api/upload", files={"files": ("a.json", b"{}")}, headers=ADMIN).is_success
    # main: the server read and threw away all 1,024 MB after its answer, to keep the connection open
    sent = upload_regardless(base, 1024 * MB, ADMIN if refusal == 429 else {})
    assert sent.status in (refusal, None) and sent.sent < 200 * MB


# -- login -------------------------------------------------------------------------------
def test_chat_and_admin_logins_are_throttled_alike_even_with_the_right_password(settings, serve_app):
    settings = replace(settings, "limits.login_failures", 5)
    base = serve_app(settings, auth=("alice", "s3cret-pass"))

    def login(password: str) -> int:
        return httpx.post(base + "/login", data={"username": "alice", "password": password}, timeout=30).status_code

    assert login("s3cret-pass") == 200
    assert [login(f"wrong-{n}") for n in range(5)] == [400] * 5
    assert login("s3cret-pass") == 400  # locked out: the right password is refused too
    assert [login("wrong") for _ in range(25)] == [400] * 25  # (Gradio's login page shows only its 400 message)

    def admin(password: str) -> httpx.Response:
        return httpx.post(base + "/admin/login", data={"username": "admin", "password": password}, timeout=30)

    assert [admin(f"wrong-{n}").status_code for n in range(4)] == [401] * 4
    locked = admin("wrong-4")  # the same policy and settings: the fifth failure locks the pair
    assert locked.status_code == 429 and "try again in 30 s" in locked.text
    refused = admin("admin-password")
    assert refused.status_code == 429 and "kbbot_admin" not in refused.cookies


def test_one_address_spraying_many_usernames_is_refused_for_the_rest_of_the_minute():
    from bot.serving.logins import ADDRESS_FAILURES_PER_MINUTE

    clock = [0.0]
    throttle = ThrottledLogin(credentials_check("alice", "pw"), failures=3, lockout=30, clock=lambda: clock[0])
    token = CLIENT_ADDRESS.set("10.0.0.1")
    try:
        assert not any(throttle(f"user{n}", "pw") for n in range(ADDRESS_FAILURES_PER_MINUTE))
        assert throttle.retry_after("alice", "10.0.0.1") == 60 and not throttle("alice", "pw")
        assert throttle.attempt("alice", "pw", "10.0.0.2")
        clock[0] = 60
        assert throttle("alice", "pw")
    finally:
        CLIENT_ADDRESS.reset(token)


def test_lockout_ends_doubles_and_is_per_address():
    clock = [0.0]
    throttle = ThrottledLogin(credentials_check("alice", "pw"), failures=3, lockout=30, clock=lambda: clock[0])

    def attempt(password: str, address: str = "10.0.0.1") -> bool:
        token = CLIENT_ADDRESS.set(address)
        try:
            return throttle("alice", password)
        finally:
            CLIENT_ADDRESS.reset(token)

    assert [attempt("x") for _ in range(3)] == [False] * 3
    assert not attempt("pw") and attempt("pw", "10.0.0.2")  # another address is not locked
    clock[0] = 31
    assert attempt("pw")  # lockout over; success clears the record
    assert [attempt("x") for _ in range(3)] == [False] * 3
    clock[0] = 62
    assert attempt("pw")
    assert [attempt("x") for _ in range(3)] == [False] * 3  # locked until 92
    clock[0] = 93
    assert [attempt("x") for _ in range(3)] == [False] * 3  # a second lockout in a row lasts twice as long: 153
    clock[0] = 150
    assert not attempt("pw")
    clock[0] = 154
    assert attempt("pw")


# -- bounded logging ---------------------------------------------------------------------
def test_a_flood_of_identical_warnings_writes_a_bounded_number_of_lines():
    clock = [0.0]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RepeatFilter(per_window=20, window=60, clock=lambda: clock[0]))
    logger = logging.getLogger("kbbot.test.flood")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for n in range(10_000):
            try:
                raise ValueError("bad request body")
            except ValueError:
                logger.warning("bad request from %s", f"10.0.0.{n % 250}", exc_info=True)
        lines = stream.getvalue().splitlines()
        notices = [line for line in lines if "suppressed" in line]
        assert sum(line.startswith("bad request from") for line in lines) == 21 and len(notices) == 1
        logger.warning("another message")  # a different message is not held back
        clock[0] = 61
        logger.warning("bad request from %s", "10.0.0.1")
        last = stream.getvalue().splitlines()[-1]
        assert "another message" in stream.getvalue() and "9980 identical messages were suppressed" in last
    finally:
        logger.removeHandler(handler)


# -- LLM concurrency ---------------------------------------------------------------------
def test_llm_calls_in_flight_are_bounded(llm_server):
    llm_server.chunk_delay = 0.05
    llm_server.reply = lambda body: "一二三四五六七八九十" * 2  # 5 chunks: ~0.25 s per call
    inner = OpenAIChat(LLMSettings(base_url=llm_server.url, model="m", timeout=10, max_retries=0), "k")
    bounded = BoundedChatModel(inner, limit=2, wait=30)
    replies: list[str] = []
    threads = [
        threading.Thread(target=lambda: replies.append(bounded.complete([{"role": "user", "content": "hi"}])))
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(replies) == 6 and all(r == "一二三四五六七八九十" * 2 for r in replies)
    assert llm_server.max_in_flight == 2


def test_waiting_beyond_the_timeout_degrades_like_an_llm_error(llm_settings, llm_server):
    from bot.factory import build_bot, build_llm
    from bot.texts import LLM_DOWN_NOTICE

    llm_settings = replace(llm_settings, "llm.max_concurrency", 1)
    llm_settings = replace(llm_settings, "llm.timeout", 0.5)
    llm = build_llm(llm_settings)
    bot = build_bot(llm_settings, llm=llm)
    assert llm is not None
    held = llm.stream([{"role": "user", "content": "hold"}])  # a slow caller keeps the only slot
    assert isinstance(held, Generator)  # closed below to free the slot
    llm_server.chunk_delay = 0.2
    next(held)
    try:
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError, match="busy"):
            llm.complete([{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < 5
        answer = bot.answer("怎么添加知识？")
        assert answer.text.startswith(LLM_DOWN_NOTICE) and answer.hits
    finally:
        held.close()
    assert llm.complete([{"role": "user", "content": "hi"}])  # the slot is free again


def test_client_key_uses_the_address_not_the_session():
    from bot.ui.guard import client_key

    one = SimpleNamespace(client=SimpleNamespace(host="10.0.0.1"), session_hash="a")
    other_session = SimpleNamespace(client=SimpleNamespace(host="10.0.0.1"), session_hash="b")
    assert client_key(one) == client_key(other_session) == "addr:10.0.0.1" and client_key(None) == "addr:unknown"
