"""OpenAIChat against the local OpenAI-compatible server: real openai client, real HTTP and SSE."""

from __future__ import annotations

import pytest

from bot.chat.llm import OpenAIChat
from bot.config.llm import LLMSettings
from bot.errors import LLMError, LLMStreamBroken, LLMTimeoutError
from tests.support.llm_server import Fault

pytestmark = pytest.mark.unit


def chat(server, **kw) -> OpenAIChat:
    opts = dict(base_url=server.url, model="local-test", timeout=5, max_retries=0)
    opts.update(kw)
    return OpenAIChat(LLMSettings.model_validate(opts), "sk-secret-value")


def test_stream_yields_pieces_over_sse(llm_server):
    llm_server.reply = lambda body: "你好，这是流式回答。"
    pieces = list(chat(llm_server).stream([{"role": "user", "content": "hi"}]))
    assert len(pieces) > 1 and "".join(pieces) == "你好，这是流式回答。"
    req = llm_server.requests[0]
    assert req["body"]["stream"] is True and req["body"]["model"] == "local-test"
    assert req["headers"]["authorization"] == "Bearer sk-secret-value"


def test_complete_joins_the_stream_and_passes_settings(llm_server):
    llm_server.reply = lambda body: "ok"
    assert chat(llm_server, temperature=0.1, max_tokens=7).complete([{"role": "user", "content": "x"}]) == "ok"
    body = llm_server.requests[0]["body"]
    assert body["temperature"] == 0.1 and body["max_tokens"] == 7


def test_500_becomes_llm_error_that_says_what_to_check(llm_server):
    llm_server.fail(Fault(status=500))
    with pytest.raises(LLMError, match="HTTP 500"):
        chat(llm_server).complete([{"role": "user", "content": "x"}])


def test_429_is_retried_then_succeeds(llm_server):
    llm_server.fail(Fault(status=429))
    llm_server.reply = lambda body: "after retry"
    assert chat(llm_server, max_retries=1).complete([{"role": "user", "content": "x"}]) == "after retry"
    assert len(llm_server.requests) == 2


def test_429_without_retries_says_rate_limited(llm_server):
    llm_server.fail(Fault(status=429))
    with pytest.raises(LLMError, match="rate limiting"):
        chat(llm_server).complete([{"role": "user", "content": "x"}])


def test_401_names_the_key_variable(llm_server):
    llm_server.fail(Fault(status=401))
    with pytest.raises(LLMError, match="OPENAI_API_KEY") as err:
        chat(llm_server).complete([{"role": "user", "content": "x"}])
    assert "sk-secret-value" not in str(err.value)


def test_timeout(llm_server):
    llm_server.fail(Fault(sleep=2.0))
    with pytest.raises(LLMTimeoutError, match="llm.timeout"):
        chat(llm_server, timeout=0.5).complete([{"role": "user", "content": "x"}])


def test_stream_broken_mid_answer_keeps_the_part_received(llm_server):
    llm_server.reply = lambda body: "一二三四五六七八九十" * 3
    llm_server.fail(Fault(break_after=2))
    got = []
    with pytest.raises(LLMStreamBroken) as err:
        for piece in chat(llm_server).stream([{"role": "user", "content": "x"}]):
            got.append(piece)
    assert err.value.partial == "".join(got) == "一二三四五六七八"


def test_unreachable_server():
    llm = OpenAIChat(LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", timeout=2, max_retries=0), "k")
    with pytest.raises(LLMError, match="cannot connect"):
        llm.complete([{"role": "user", "content": "x"}])


def test_repr_hides_the_key(llm_server):
    assert "sk-secret-value" not in repr(chat(llm_server))
