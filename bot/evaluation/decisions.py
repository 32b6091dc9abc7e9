"""The ladder's decision for each labelled question (``eval --details``) and what they add up to."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.evaluation.questions import EvalQuestion

if TYPE_CHECKING:
    from bot.chat.bot import Bot

DECISIONS = ("answer", "clarify", "confirm", "chitchat", "handoff", "fallback")


@dataclass(frozen=True)
class Decided:
    """One question through the whole ladder: the decision and the entries answered from or offered, best first."""

    question: EvalQuestion
    decision: str
    entries: tuple[str, ...]

    @property
    def wrong(self) -> bool:
        """Answered from a non-gold entry, or answered when nothing should be."""
        return self.decision == "answer" and (not self.entries or self.entries[0] not in self.question.gold)

    @property
    def right_or_resolved(self) -> bool:
        """Answered from a gold entry, or a gold entry among the options of a clarify or confirm question."""
        gold = self.question.gold
        if self.decision == "answer":
            return bool(self.entries) and self.entries[0] in gold
        return self.decision in ("clarify", "confirm") and bool(gold & set(self.entries))

    def to_dict(self) -> dict:
        """The ``--details`` line."""
        q = self.question
        return {"id": q.id, "question": q.question, "decision": self.decision, "entries": list(self.entries)}


@dataclass(frozen=True)
class DecisionSummary:
    """The decision mix, wrong answers and right-or-resolved over one question set."""

    mix: dict[str, int]
    wrong: int
    right_or_resolved: int
    answerable: int
    total: int

    def per_100(self, count: int) -> float:
        """``count`` per 100 questions."""
        return 100 * count / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "decisions": self.mix,
            "wrong_per_100": round(self.per_100(self.wrong), 2),
            "right_or_resolved": round(self.right_or_resolved / self.answerable, 4) if self.answerable else None,
        }


def decide(bot: Bot, questions: Sequence[EvalQuestion], mode: str) -> list[Decided]:
    """Each question asked alone (a fresh conversation) through the bot's whole ladder in ``mode``."""
    out = []
    for q in questions:
        answer = bot.answer(q.question, mode=mode)
        answered = answer.decision.value == "answer"
        entries = [h.entry.id for h in answer.hits] if answered else [o.id for o in answer.options]
        out.append(Decided(q, answer.decision.value, tuple(dict.fromkeys(entries))))
    return out


def summarize(decided: Iterable[Decided]) -> DecisionSummary:
    """What the decisions add up to."""
    rows = list(decided)
    mix = Counter(d.decision for d in rows)
    return DecisionSummary(
        {k: mix.get(k, 0) for k in DECISIONS},
        sum(d.wrong for d in rows),
        sum(d.right_or_resolved for d in rows if d.question.gold),
        sum(1 for d in rows if d.question.gold),
        len(rows),
    )


def write_details(path: str, decided_by_mode: dict[str, list[Decided]]) -> None:
    """One JSON line per question and mode (``mode`` added when several modes ran)."""
    with open(path, "w", encoding="utf-8") as fh:
        for mode, decided in decided_by_mode.items():
            for d in decided:
                row = d.to_dict() | ({"mode": mode} if len(decided_by_mode) > 1 else {})
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
