"""Abuse of the /v1 API on the real server: token guessing is throttled like logins, and a
100k-deep JSON body is an OpenAI-style 400, not a 500."""

from __future__ import annotations

import httpx
import pytest

from bot.config.variants import replace
from tests.support.bodies import post_regardless
from tests.support.serving import TOKEN

pytestmark = pytest.mark.e2e


def post(base: str, token: str, content: bytes | None = None) -> httpx.Response:
    body = content if content is not None else b'{"model": "kbbot", "messages": [{"role": "user", "content": "hi"}]}'
    return httpx.post(
        base + "/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=60,
    )


def test_wrong_tokens_lock_the_address_out_even_for_the_right_token(settings, serve_api):
    settings = replace(settings, "limits.login_failures", 5)
    settings = replace(settings, "limits.login_lockout_seconds", 30)
    base = serve_api(settings)
    codes = [post(base, f"guess-{n}").status_code for n in range(30)]
    assert codes[:4] == [401] * 4 and set(codes[4:]) == {429}
    locked = post(base, TOKEN)
    assert locked.status_code == 429 and 0 < int(locked.headers["retry-after"]) <= 30
    error = locked.json()["error"]
    assert error["code"] == "too_many_wrong_tokens" and "try again in" in error["message"]


def test_deeply_nested_json_is_an_openai_style_400(settings, serve_api):
    base = serve_api(settings)
    deep = b"[" * 100_000 + b"]" * 100_000
    for body in (deep, b'{"model": "kbbot", "messages": ' + deep + b"}"):
        answer = post(base, TOKEN, body)
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and "nested too deeply" in error["message"]
    assert post(base, TOKEN).status_code == 200  # the server is fine after


def test_a_call_refused_before_its_body_is_read_does_not_read_it_after(settings, serve_api):
    base = serve_api(settings)
    headers = {"Authorization": "Bearer wrong", "Content-Type": "application/json"}
    sent = post_regardless(base + "/chat/completions", 1 << 30, headers)
    assert sent.status in (401, None) and sent.sent < 200 << 20  # main: all 1,024 MB, read and thrown away
