"""Multi-turn follow-ups and question splitting."""

from __future__ import annotations

import pytest

from bot.chat.splitter import QuestionSplitter, merge_hits
from bot.config.variants import replace
from bot.factory import build_bot
from bot.knowledge.entries import Entry
from bot.messages import Message
from bot.search.base import Hit
from tests.support.knowledge import with_cutoffs
from tests.support.llm_scripts import FOLLOWUP_MARK as REWRITE_MARK
from tests.support.llm_scripts import scripted

pytestmark = pytest.mark.unit

HISTORY: list[Message] = [
    {"role": "user", "content": "图书馆开放时间"},
    {"role": "assistant", "content": "每天八点到十点。"},
]


def test_llm_rewrites_follow_up_and_searches_the_rewrite(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = scripted(rewrite="食堂在哪里？")
    bot = build_bot(llm_settings)
    answer = bot.answer("那吃饭的地方呢？", HISTORY)
    assert answer.rewritten == "食堂在哪里？"
    assert answer.hits[0].entry.id == "faq:canteen" and "rewrite" in answer.timings
    rewrite_prompt = llm_server.requests[0]["body"]["messages"][-1]["content"]
    assert (
        REWRITE_MARK in rewrite_prompt and "图书馆开放时间" in rewrite_prompt and "那吃饭的地方呢？" in rewrite_prompt
    )
    final = llm_server.requests[-1]["body"]["messages"]
    assert final[-1]["content"].endswith("那吃饭的地方呢？")  # the model sees the user's own words plus history
    assert "学生食堂位于校园东区" in final[-1]["content"]


def test_no_rewrite_without_history(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = scripted()
    answer = build_bot(llm_settings).answer("怎么添加知识？")
    assert answer.rewritten is None and len(llm_server.requests) == 1


def test_retrieval_only_combines_short_follow_up_with_previous_question(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    # 周末 is in no entry, so the follow-up alone covers nothing. ("节假日呢？" would pass on its own now: its only
    # rare word is in the library entry, and coverage asks how much of the question an entry contains.)
    assert bot.retrieve("周末呢？")[1] == []
    answer = bot.answer("周末呢？", HISTORY)
    assert answer.rewritten == "图书馆开放周末"  # the subject in the previous question's slot (bot/chat/followup.py)
    assert answer.hits[0].entry.id == "faq:library"


def test_standalone_question_after_history_is_not_combined(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    answer = build_bot(settings).answer("怎么添加知识？", HISTORY)
    assert answer.rewritten is None and answer.hits[0].entry.id == "faq:add"


def test_split_message_finds_both_and_prompt_names_the_parts(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = scripted()
    bot = build_bot(llm_settings)
    answer = bot.answer("怎么添加知识，图书馆几点开放？")
    ids = [h.entry.id for h in answer.hits]
    assert "faq:add" in ids and "faq:library" in ids
    refs = llm_server.requests[-1]["body"]["messages"][-1]["content"]
    assert '对应子问题 / For: "怎么添加知识"' in refs and '对应子问题 / For: "图书馆几点开放"' in refs


def test_splitting_off_keeps_one_search(settings):
    settings = replace(settings, "splitting.enabled", False)
    settings = with_cutoffs(settings, "sparse", 0.5)
    hits, _ = build_bot(settings).retrieve("怎么添加知识，图书馆几点开放？")
    assert hits and all(h.subquestion == "" for h in hits)


def test_splitter_rules():
    s = QuestionSplitter(["还有", "and also"], min_part_chars=2, max_parts=4)
    assert s.split("图书馆几点开门，食堂在哪里？") == ["图书馆几点开门", "食堂在哪里"]
    assert s.split("图书馆几点开门还有食堂在哪里") == ["图书馆几点开门", "食堂在哪里"]
    assert s.split("How to add AND ALSO how to delete") == ["How to add", "how to delete"]
    assert s.split("怎么添加知识？") == ["怎么添加知识？"]
    assert s.split("好，怎么添加知识") == ["好，怎么添加知识"]  # one-char fragments are not parts


def test_merge_keeps_best_relevance_and_every_parts_top_hit():
    def h(i, relevance, bm25=10.0):
        return Hit(Entry(f"k:{i}", f"q{i}", "d"), relevance, bm25, "tantivy", {"coverage": relevance, "bm25": bm25})

    merged = merge_hits(
        [("", [h(1, 0.8), h(2, 0.7), h(3, 0.6)]), ("a", [h(1, 0.9, 5.0), h(2, 0.5)]), ("b", [h(9, 0.1)])], top_k=3
    )
    assert [x.entry.id for x in merged] == ["k:1", "k:9", "k:2"]
    # The best relevance wins, with the signals of the search that found it; the label names the part.
    assert merged[0].relevance == 0.9 and merged[0].score == 5.0 and merged[0].signals == {"coverage": 0.9, "bm25": 5.0}
    assert merged[0].subquestion == "a" and merged[1].subquestion == "b" and merged[2].relevance == 0.7
