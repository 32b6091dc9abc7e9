"""LLM output the bot uses is checked and bounded, against the local test LLM:
a 200 that is not an answer degrades like any LLM fault, text reused by HyDE, rewrites, grading and follow-up
rewrites is cut at ``limits.max_step_chars``, and reasoning (``<think>`` blocks, ``reasoning_content``) never
reaches the answer, the searches or the grader."""

from __future__ import annotations

import json
import random
import time

import pytest

from bot.chat.reasoning import ThinkFilter, strip_reasoning
from bot.config.variants import replace
from bot.factory import build_bot, build_knowledge_base, build_llm
from bot.texts import LLM_DOWN_NOTICE
from tests.support.knowledge import with_cutoffs
from tests.support.llm_scripts import HARD, grade_by_title, kind
from tests.support.llm_server import Fault
from tests.support.serving import ask, streamed

pytestmark = pytest.mark.e2e

ANSWER = "根据参考资料 [1]，放进 knowledge 文件夹即可。"
NOT_AN_ANSWER = [
    Fault(body=b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    Fault(body=b'{"choices": [{"message": ', content_type="application/json"),
    Fault(body=b"data: {not json\n\n", content_type="text/event-stream"),
]
MEGABYTE = "很长的回答" * 200_000  # 1 M characters: an endpoint that ignores max_tokens


@pytest.fixture
def answering(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = lambda body: ANSWER
    return llm_settings


@pytest.mark.parametrize("fault", NOT_AN_ANSWER, ids=["html", "broken-json", "broken-sse"])
def test_a_200_that_is_not_an_answer_degrades_to_retrieval_with_a_notice(answering, llm_server, fault):
    bot = build_bot(answering)
    llm_server.fail(fault)
    answer = bot.answer("怎么添加知识？")
    assert not answer.llm_used and answer.notice == LLM_DOWN_NOTICE
    assert answer.text.startswith(LLM_DOWN_NOTICE) and "knowledge 文件夹" in answer.text


def test_a_200_web_page_degrades_in_the_api_too(answering, llm_server, serve_api):
    base = serve_api(answering)
    llm_server.fail(NOT_AN_ANSWER[0], NOT_AN_ANSWER[0])
    content = ask(base, "怎么添加知识？").choices[0].message.content
    assert content.startswith(LLM_DOWN_NOTICE) and "knowledge 文件夹" in content
    _, joined = streamed(base, "怎么添加知识？")
    assert joined.startswith(LLM_DOWN_NOTICE) and "knowledge 文件夹" in joined


def test_llm_text_the_bot_reuses_is_cut_at_the_configured_cap(llm_settings, llm_server):
    """Rewrite, HyDE and grading replies of 1 MB (max_tokens ignored): read up to max_step_chars, turn bounded."""
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["rewrite", "hyde", "last_resort"])
    llm_settings = replace(llm_settings, "retrieval.grading.enabled", True)
    llm_settings = replace(llm_settings, "limits.max_step_chars", 500)
    llm_server.piece_size = 4096
    llm_server.reply = lambda body: ANSWER if kind(body) == "answer" else MEGABYTE
    bot = build_bot(llm_settings)
    start = time.process_time()
    answer = bot.answer(HARD)
    cpu = time.process_time() - start
    assert answer.hypothetical is not None and len(answer.hypothetical) <= 500
    assert sum(len(p) for p in answer.phrasings) <= 500
    assert {kind(r["body"]) for r in llm_server.requests} >= {"rewrite", "hyde", "grade"}
    assert cpu < 2.0, cpu  # main: 1 MB searched as HyDE text and kept in the answer and the log


def test_the_follow_up_rewrite_reads_no_more_than_the_cap(llm_settings, llm_server):
    llm_settings = replace(llm_settings, "limits.max_step_chars", 300)
    llm_server.piece_size = 4096
    llm_server.reply = lambda body: "图书馆几点开门？" + "x" * 1_000_000
    llm = build_llm(llm_settings)
    assert llm is not None
    started = time.perf_counter()
    text = llm.complete([{"role": "user", "content": "改写"}])
    assert len(text) == 300 and text.startswith("图书馆几点开门？")
    assert time.perf_counter() - started < 5


# -- reasoning models -----------------------------------------------------------------
THINKING = "<think>\n用户问的是添加知识。我想想……参考资料 [1] 说放进文件夹。\n</think>\n\n"


@pytest.mark.parametrize("form", ["think-tags", "reasoning_content", "unclosed", "reasoning-only"])
def test_reasoning_never_reaches_the_answer_and_is_not_counted_against_its_length(answering, llm_server, form):
    answering = replace(answering, "limits.max_answer_chars", 100)
    thinking = "很长的思考。" * 1000  # 6,000 characters: far over the answer cap, under max_reasoning_chars
    if form == "think-tags":
        llm_server.reply = lambda body: f"<think>{thinking}</think>\n\n{ANSWER}"
    elif form == "reasoning_content":
        llm_server.reasoning = lambda body: thinking
    elif form == "unclosed":  # the reply ends while still thinking: no answer text at all, so it degrades
        llm_server.reply = lambda body: f"<think>{thinking}"
    else:  # reasoning_content, then an empty content: degrades too
        llm_server.reasoning = lambda body: thinking
        llm_server.reply = lambda body: ""
    answer = build_bot(answering).answer("怎么添加知识？")
    assert "思考" not in answer.text and "<think>" not in answer.text
    if form in ("unclosed", "reasoning-only"):
        assert answer.text.startswith(LLM_DOWN_NOTICE) and not answer.llm_used
    else:
        assert answer.text == ANSWER and answer.llm_used and not answer.notices


def test_reasoning_is_kept_out_of_hyde_rewrites_and_grades(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["rewrite", "hyde", "last_resort"])
    llm_settings = replace(llm_settings, "retrieval.grading.enabled", True)
    grade = grade_by_title("怎么添加知识？", 0.0)

    def reply(body):
        name = kind(body)
        real = {"rewrite": "怎么添加知识", "hyde": "把条目放进文件夹"}.get(name, ANSWER)
        return THINKING + (grade(body) if name == "grade" else real)

    llm_server.reply = reply
    answer = build_bot(llm_settings).answer(HARD)
    assert "思" not in (answer.hypothetical or "") and all("思" not in p for p in answer.phrasings)
    assert answer.hits and answer.hits[0].entry.id == "faq:add" and answer.text == ANSWER


def test_the_streamed_think_filter_matches_the_whole_text_for_any_split():
    cases = [
        "<think>a</think>\n\nHello",
        "  <think>x",
        "Hi <think>y</think> there",
        "a < b <thin",
        "<thinking>ok",
        "<think>a</thi",
        "<think>a</think> <think>b</think>\nZ",
    ]
    expected = ["Hello", "", "Hi  there", "a < b <thin", "<thinking>ok", "", "Z"]
    assert [strip_reasoning(c) for c in cases] == expected
    rng = random.Random(7)
    for text in cases:
        for _ in range(50):
            f, out, i = ThinkFilter(), "", 0
            while i < len(text):
                n = rng.randint(1, 4)
                out, i = out + f.feed(text[i : i + n]), i + n
            assert out + f.finish() == strip_reasoning(text), (text, json.dumps(out))


@pytest.mark.parametrize("form", ["think-tags", "reasoning_content"])
def test_the_reasoning_is_shown_folded_in_the_sources_panel_and_nowhere_else(answering, llm_server, form):
    from bot.ui.render import sources_html

    thinking = "先看参考资料 [1]：<知识> 放进文件夹。"
    if form == "think-tags":
        llm_server.reply = lambda body: f"<think>{thinking}</think>{ANSWER}"
    else:
        llm_server.reasoning = lambda body: thinking
    llm = build_llm(answering)
    bot = build_bot(answering, llm=llm)
    kb = build_knowledge_base(answering, bot)
    answer = kb.ask("怎么添加知识？", source="api")
    assert answer.text == ANSWER and answer.reasoning == thinking
    panel = sources_html(answer)
    assert "<details class='kb-reasoning'>" in panel and "&lt;知识&gt;" in panel and "<知识>" not in panel
    assert llm is not None
    assert llm.complete([{"role": "user", "content": "怎么添加知识？"}]) == ANSWER  # HyDE and co. never see it
