"""Popular questions: the welcome examples and the last resort's "did you mean" from the entries most used in
answers (the real conversation log), fixed / popular / both, never an entry that is gone."""

from __future__ import annotations

import pytest

from bot.chat.answer import Strategy
from bot.config.variants import replace, update
from bot.factory import build_bot, build_knowledge_base
from bot.ui.app import ChatHandlers
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit


@pytest.fixture
def busy_bot(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    for question, times in (("怎么添加知识？", 3), ("图书馆开放时间", 2), ("阈值是什么意思？", 1)):
        for n in range(times):
            assert kb.ask(question, session=f"{question}{n}", source="web").hits
    bot.popular.forget()
    return bot


def test_examples_popular_fixed_and_both(busy_bot):
    assert busy_bot.examples([], "popular")[:3] == ["怎么添加知识？", "图书馆开放时间", "阈值是什么意思？"]
    assert busy_bot.examples(["怎么切换检索模式？"], "fixed") == ["怎么切换检索模式？"]
    both = busy_bot.examples(["怎么切换检索模式？"], "both")
    assert both == ["怎么切换检索模式？", "怎么添加知识？", "图书馆开放时间", "阈值是什么意思？"]
    assert busy_bot.examples(["不在知识库里的问题"], "fixed") != []  # none found: some of the knowledge's own


def test_the_page_uses_the_configured_source(busy_bot, settings):
    settings = update(settings, {"ui.examples": [], "ui.examples_source": "popular"})
    assert ChatHandlers(build_knowledge_base(settings, busy_bot), settings).examples()[0] == ["怎么添加知识？"]


def test_a_deleted_entry_leaves_the_examples_at_once(busy_bot, settings):
    build_knowledge_base(settings, busy_bot).editor.delete("faq.json", "add")
    assert "怎么添加知识？" not in busy_bot.examples([], "popular")


def test_the_last_resort_can_suggest_popular_entries(busy_bot, settings):
    settings = replace(with_cutoffs(settings, "sparse", 0.5), "fallback.last_resort.suggestions_source", "popular")
    bot = build_bot(settings)
    bot.popular.forget()
    missed = bot.answer("火星上有几座城市")
    assert missed.strategy is Strategy.LAST_RESORT
    assert [o.question for o in missed.options] == ["怎么添加知识？", "图书馆开放时间", "阈值是什么意思？"]
    assert "怎么添加知识？" in missed.text
    settings = replace(settings, "fallback.last_resort.suggestions_source", "both")
    settings = with_cutoffs(settings, "sparse", 0.99)  # nothing passes: the closest entries are candidates
    both = build_bot(settings)
    both.popular.forget()
    near = both.answer("火星上怎么切换检索")
    assert near.strategy is Strategy.LAST_RESORT and near.candidates[0].entry.id == "faq:mode"
    # two of three slots for the closest, then the most used entry
    assert [o.id for o in near.options][:2] == [h.entry.id for h in near.candidates[:2]]
    popular = [e.id for e in both.popular.top(both.search.index.entries, 3)]
    assert near.options[2].id == next(i for i in popular if i not in {o.id for o in near.options[:2]})


def test_without_a_log_the_examples_are_the_fixed_ones(settings):
    settings = replace(settings, "log.enabled", False)
    bot = build_bot(settings)
    assert bot.examples(["怎么添加知识？"], "both") == ["怎么添加知识？"]
