"""Details a newcomer sees on the page: one ⚠️ per notice, a retrieval-test block that says its index is building,
problem lines that do not send chat users to a tab they cannot see, and entry numbers never reused after a delete."""

from __future__ import annotations

import json

import pytest

from bot import texts
from bot.chat.answer import Answer, Strategy
from bot.chat.status import Status
from bot.factory import build_bot
from bot.knowledge.store import KnowledgeStore
from bot.search.serving import ServedSearcher
from bot.ui.render import header_markdown, sources_html
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

LLM_NOTICE = "⚠️ 知识库中没有匹配的内容，以下回答仅来自大模型，请注意核实。/ No knowledge matched."


def test_a_notice_that_brings_its_own_warning_sign_shows_one(settings):
    answer = Answer(question="q", text="t", strategy=Strategy.LAST_RESORT, mode="sparse").noted(LLM_NOTICE)
    assert sources_html(answer).count("⚠️") == 1
    status = build_bot(settings).status()
    header = header_markdown("kb", Status(**{**status.__dict__, "notice": LLM_NOTICE}), "r")
    assert header.count("⚠️") == 1


def test_problem_lines_point_chat_users_to_an_admin_not_to_a_hidden_tab():
    for line in (texts.KNOWLEDGE_PROBLEM, texts.CONFIG_PROBLEM):
        assert "an admin sees the details" in line and "管理员" in line


def test_a_mode_still_building_says_so_in_the_retrieval_test(settings, monkeypatch):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    real = bot.index.searcher

    def building(mode):  # dense stands in with sparse, as while its index builds in the app
        if mode == "dense":
            return ServedSearcher("dense", real("sparse"), "索引构建中… / Index building… answering from sparse")
        return real(mode)

    monkeypatch.setattr(bot.index, "searcher", building)
    results = bot.retrieve_all_modes("怎么添加知识？")
    assert results["dense"].error == texts.BUILDING_RESULTS.format(mode="dense")
    assert "answering from" not in results["dense"].error and results["sparse"].hits


def test_a_deleted_number_is_never_handed_to_a_new_entry(tmp_path):
    kb = tmp_path / "kb"
    write_knowledge(kb, TINY)
    store = KnowledgeStore(kb, tmp_path / "state" / "locks")
    assert store.upsert_entry("faq.json", None, "一", "一", "") == "faq:1"
    assert store.upsert_entry("faq.json", None, "二", "二", "") == "faq:2"
    store.delete_entry("faq.json", "2")
    assert store.upsert_entry("faq.json", None, "三", "三", "") == "faq:3"  # not faq:2 again
    store.delete_entry("faq.json", "3")
    again = KnowledgeStore(kb, tmp_path / "state" / "locks")  # remembered across restarts
    assert again.import_file("faq.json", json.dumps([{"query": "四", "document": "四"}]), merge=True)[-1] == "faq:4"
