"""Popular questions: the welcome card and the last resort's "did you mean" from the entries most used in answers
(the real conversation log), fixed / popular / both, never an entry that is gone."""

from __future__ import annotations

import pytest

from bot.chat.answer import Strategy
from bot.config.variants import replace, update
from bot.factory import build_bot, build_knowledge_base
from bot.ui.app import ChatHandlers
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit


@pytest.fixture
def busy(settings):
    """(bot, settings): three questions asked 3, 2 and 1 times."""
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    for question, times in (("怎么添加知识？", 3), ("图书馆开放时间", 2), ("阈值是什么意思？", 1)):
        for n in range(times):
            assert kb.ask(question, session=f"{question}{n}", source="web").hits
    bot.popular.forget()
    return bot, settings


def welcome(busy, **ui) -> list[str]:
    bot, settings = busy
    settings = update(settings, {f"ui.{k}": v for k, v in {"welcome_min_count": 1, **ui}.items()})
    return build_knowledge_base(settings, bot).welcome_questions()


def test_welcome_card_popular_fixed_and_both(busy):
    assert welcome(busy, examples=[], examples_source="popular")[:3] == [
        "怎么添加知识？",
        "图书馆开放时间",
        "阈值是什么意思？",
    ]
    assert welcome(busy, examples=["怎么切换检索模式？"], examples_source="fixed") == ["怎么切换检索模式？"]
    # both: the most asked; the examples only while nothing was asked
    assert welcome(busy, examples=["怎么切换检索模式？"])[:3] == [
        "怎么添加知识？",
        "图书馆开放时间",
        "阈值是什么意思？",
    ]
    assert welcome(busy, examples=["不在知识库里的问题"], examples_source="fixed") != []  # some of the knowledge's own


def test_the_page_uses_the_welcome_card(busy):
    bot, settings = busy
    settings = update(settings, {"ui.examples": [], "ui.examples_source": "popular"})
    assert ChatHandlers(build_knowledge_base(settings, bot), settings).examples()[0] == ["怎么添加知识？"]


def test_a_deleted_entry_leaves_the_welcome_card_at_once(busy):
    bot, settings = busy
    build_knowledge_base(settings, bot).editor.delete("faq.json", "add")
    assert "怎么添加知识？" not in welcome(busy, examples_source="popular")


def test_the_last_resort_can_suggest_popular_entries(busy, settings):
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


def test_without_a_log_the_welcome_card_shows_the_examples(settings):
    settings = update(settings, {"log.enabled": False, "ui.examples": ["怎么添加知识？"]})
    assert build_knowledge_base(settings, build_bot(settings)).welcome_questions() == ["怎么添加知识？"]
