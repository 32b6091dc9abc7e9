"""Answers as the bot makes them, built by hand: for conversation-log tests and whatever reads the log."""

from __future__ import annotations

from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.knowledge.entries import Entry
from bot.search.base import Hit

LIBRARY = Entry("faq:library", "图书馆开放时间", "图书馆每天早上八点到晚上十点开放。", ("图书馆",))
CANTEEN = Entry("faq:canteen", "食堂在哪里？", "学生食堂位于校园东区。", ("食堂",))
CUT = Cutoffs("sparse", 0.5, 0.9)


def hit(entry: Entry, relevance: float) -> Hit:
    """A sparse hit with an engine score ten times its relevance."""
    return Hit(entry, relevance, relevance * 10, "tantivy")


def answered(question: str = "图书馆几点开门？", **kw) -> Answer:
    """A direct answer from the library entry, the canteen entry a candidate below the threshold."""
    used = [hit(LIBRARY, 0.8)]
    base = {
        "question": question,
        "text": "八点到十点。",
        "strategy": Strategy.DIRECT,
        "mode": "sparse",
        "hits": used,
        "candidates": used + [hit(CANTEEN, 0.3)],
        "thresholds": CUT,
        "llm": "local-test",
        "llm_used": True,
        "timings": {"retrieve": 3.5, "llm": 120.0, "total": 130.25},
    }
    return Answer(**{**base, **kw})


def missed(question: str, near: float = 0.42) -> Answer:
    """A last-resort answer: nothing passed, the library entry came closest."""
    return Answer(
        question=question,
        text="抱歉，没有找到。",
        strategy=Strategy.LAST_RESORT,
        mode="sparse",
        candidates=[hit(LIBRARY, near), hit(CANTEEN, 0.1)],
        thresholds=CUT,
        timings={"total": 5.0},
    )
