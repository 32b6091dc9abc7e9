"""Bounded work per message: each search reads at most ``limits.max_search_chars`` of the message,
and long messages have their own concurrency limit, so one client sending many cannot slow every other chat."""

from __future__ import annotations

import threading
import time

import pytest

from bot.config.variants import replace
from bot.factory import build_bot, build_knowledge_base
from bot.texts import LONG_BUSY
from tests.support.knowledge import with_cutoffs
from tests.support.llm_server import Fault

pytestmark = pytest.mark.unit

LONG = "怎么添加知识？" + "请详细说明每一个步骤" * 200  # 2,007 characters


def test_each_search_reads_at_most_the_configured_characters(settings, monkeypatch):
    settings = replace(settings, "limits.max_search_chars", 60)
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    searched: list[str] = []
    searcher = bot.index.searcher("sparse")
    real = searcher.search

    def search(q, k, within=None):
        searched.append(q)
        return real(q, k, within)

    monkeypatch.setattr(searcher, "search", search)
    answer = bot.answer(LONG)
    assert searched and max(len(q) for q in searched) <= 60  # main: 2,000 characters per search
    assert answer.hits and answer.hits[0].entry.id == "faq:add"  # the question's start still finds its entry


def test_long_messages_wait_for_their_own_slots_and_short_ones_do_not(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "limits.long_message_chars", 300)
    llm_settings = replace(llm_settings, "limits.long_message_concurrency", 1)
    llm_settings = replace(llm_settings, "limits.long_message_wait_seconds", 0.3)
    llm_server.reply = lambda body: "根据参考资料 [1]，放进 knowledge 文件夹即可。"
    bot = build_bot(llm_settings)
    kb = build_knowledge_base(llm_settings, bot)
    llm_server.fail(Fault(sleep=2.0))  # the first long message holds its slot for 2 s
    answers: dict[str, object] = {}
    first = threading.Thread(target=lambda: answers.update(first=kb.ask(LONG, source="api")))
    first.start()
    time.sleep(0.5)
    started = time.monotonic()
    second = kb.ask(LONG + "？", source="api")
    assert second.text == LONG_BUSY and LONG_BUSY in second.notices and time.monotonic() - started < 1.5
    short = kb.ask("怎么添加知识？", source="api")  # main: nothing kept long messages apart
    assert short.llm_used and short.text.startswith("根据参考资料")
    first.join(10)
    assert answers["first"].llm_used  # type: ignore[attr-defined]
