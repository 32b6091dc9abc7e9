"""The page's type-ahead callback: the questions as the list's samples, hidden when there are none, the category
filter, and the per-address limit it is wrapped in (the browser side: tests/ui/test_browser_typeahead.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.config.serving import TypeaheadSettings
from bot.knowledge.entries import Entry
from bot.search.typeahead import Typeahead
from bot.serving.ratelimit import SlidingWindowLimiter
from bot.ui.guard import limited
from bot.ui.typeahead import TypeaheadHandlers, hidden

pytestmark = pytest.mark.unit

ENTRIES = [
    Entry("a", "宿舍怎么报修", "d", categories=("住宿",)),
    Entry("b", "怎么报销发票", "d", categories=("财务",)),
]


def shown(update) -> list[str] | None:
    """The questions a Dataset update shows, or None when it hides the list."""
    return [s[0] for s in update.raw_samples] if update.visible else None


def handlers(limiter: SlidingWindowLimiter | None = None) -> TypeaheadHandlers:
    typeahead = Typeahead(TypeaheadSettings(), lambda: ENTRIES)
    return TypeaheadHandlers(typeahead, limiter or SlidingWindowLimiter(0))


def test_the_questions_become_the_lists_samples():
    assert shown(handlers().offer("怎么", [])) == ["怎么报销发票", "宿舍怎么报修"]
    assert shown(handlers().offer("怎么", ["住宿"])) == ["宿舍怎么报修"]


def test_nothing_to_offer_hides_the_list():
    h = handlers()
    for text in ("", None, "怎", "没有的问题"):
        assert shown(h.offer(text, None)) is None
    assert shown(TypeaheadHandlers(None, SlidingWindowLimiter(0)).offer("怎么", [])) is None
    assert shown(hidden()) is None


def test_a_filter_that_cannot_apply_offers_from_the_whole_knowledge():
    too_many = [f"分类{i}" for i in range(60)]  # more than a filter may name
    assert shown(handlers().offer("怎么", too_many)) == ["怎么报销发票", "宿舍怎么报修"]


def test_over_the_limit_the_list_stays_hidden():
    h = handlers(SlidingWindowLimiter(2))
    offer = limited(h.offer, h.limiter, lambda _message: hidden())
    visitor = SimpleNamespace(client=SimpleNamespace(host="10.0.0.7"))
    other = SimpleNamespace(client=SimpleNamespace(host="10.0.0.8"))
    assert [shown(offer("怎么", [], visitor)) is not None for _ in range(3)] == [True, True, False]
    assert shown(offer("怎么", [], other)) is not None  # per address
