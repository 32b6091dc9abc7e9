"""A question in another language than the knowledge's: the LLM translates it and the translation is searched
(local test LLM over real HTTP); without an LLM the last resort says which language finds more."""

from __future__ import annotations

import pytest

from bot.chat.answer import Strategy
from bot.chat.language import LANGUAGE_TIP, KnowledgeLanguage
from bot.config.variants import replace
from bot.factory import build_bot
from bot.knowledge.entries import Entry
from bot.search.language import language_of
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit

TRANSLATE_MARK = "Translate the question into"


def test_language_of_a_message():
    assert language_of("What is the motto of Sun Yat-sen University?") == "en"
    assert language_of("中山大学的校训是什么？") == "zh"
    assert language_of("SYSU是哪个学校的缩写") == "zh"  # a Chinese question with an English abbreviation
    assert language_of("2024!") is None


def test_the_knowledge_language_follows_its_entries():
    language = KnowledgeLanguage()
    zh = [Entry(f"f:{n}", f"问题{n}是什么？", "答案") for n in range(5)] + [Entry("f:en", "How?", "Answer")]
    assert language.of(zh) == "zh" and language.mismatch("How do I add knowledge?", zh) == "zh"
    assert language.mismatch("怎么添加知识？", zh) is None
    en = [Entry(f"f:{n}", f"What is item {n}?", "Answer") for n in range(5)]
    assert language.of(en) == "en" and language.mismatch("怎么添加知识？", en) == "en"
    assert language.of([]) is None and language.mismatch("anything", []) is None


def reply_by_kind(translation: str):
    def reply(body):
        last = body["messages"][-1]["content"]
        if TRANSLATE_MARK in last:
            return translation
        return "把 JSON 条目放进 knowledge 文件夹即可。"

    return reply


def test_an_english_question_is_translated_searched_and_answered(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["translate", "last_resort"])
    llm_server.reply = reply_by_kind("怎么添加知识？")
    answer = build_bot(llm_settings).answer("How can I put new knowledge into the bot?")
    assert answer.strategy is Strategy.TRANSLATE and answer.decision.value == "answer"
    assert answer.rewritten == "怎么添加知识？" and answer.hits[0].entry.id == "faq:add"
    prompts = [r["body"]["messages"][-1]["content"] for r in llm_server.requests]
    assert TRANSLATE_MARK in prompts[0] and "简体中文" in prompts[0] and "translate" in answer.timings


def test_a_question_in_the_knowledge_language_is_never_translated(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["translate", "last_resort"])
    llm_server.reply = reply_by_kind("怎么添加知识？")
    answer = build_bot(llm_settings).answer("火星上有几座城市")
    assert answer.strategy is Strategy.LAST_RESORT
    assert not any(TRANSLATE_MARK in r["body"]["messages"][-1]["content"] for r in llm_server.requests)


def test_a_failing_translation_falls_through_to_the_last_resort(llm_settings, llm_server):
    from tests.support.llm_server import Fault

    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["translate", "last_resort"])
    llm_server.faults.append(Fault(status=500))
    answer = build_bot(llm_settings).answer("How can I put new knowledge into the bot?")
    assert answer.strategy is Strategy.LAST_RESORT and not answer.hits


def test_without_an_llm_the_last_resort_suggests_the_knowledge_language(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    english = bot.answer("How can I put new knowledge into the bot?")
    assert english.strategy is Strategy.LAST_RESORT and english.text.endswith(LANGUAGE_TIP["zh"])
    chinese = bot.answer("火星上有几座城市")
    assert chinese.strategy is Strategy.LAST_RESORT and LANGUAGE_TIP["zh"] not in chinese.text
