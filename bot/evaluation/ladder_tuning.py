"""Choosing the clarify margin, the confirm band and the ladder's answer threshold from labelled questions.

Each question's ranked hits are replayed through the two middle rungs exactly as bot/chat/steps/knowledge.py
runs them: two passing candidates within the margin of the top one → clarify, offering the passing candidates
up to ``MAX_OPTIONS`` (resolved when a gold entry is among them); nothing passes but the top hit is within the
band below the threshold → confirm (resolved when it is gold); otherwise answer the top passing hit or fall back. The pair chosen has the lowest cost (a wrong answer
1, an answerable question that falls back ``MISS_COST``, a question asked back ``ASK_COST``, or ``BLIND_ASK_COST``
when no gold entry is among its options) among those that ask back at most ``MAX_ASKED`` of the questions; either
rung may come out off (None). The answer threshold may rise above the best-F1 one by up to ``MAX_RAISE``: with
"did you mean" options and a confirmation below it, answering less often costs less than answering wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ASK_COST = 0.35  # a question asked back costs the user a click: about a third of a wrong answer
BLIND_ASK_COST = 0.6  # asked back with no right option: a click, then still no answer
MISS_COST = 0.5  # an answerable question that gets the fallback with no right "did you mean"
OFFERED_COST = ASK_COST  # ... with its entry among the fallback's "did you mean" (a click, as for a clarify option)
SUGGESTED = 3  # the fallback's "did you mean" entries: the closest ones (fallback.last_resort.suggestions)
MAX_ASKED = 0.25  # clarify + confirm on at most a quarter of messages
MAX_OPTIONS = 3
MAX_RAISE = 15  # hundredths the answer threshold may rise above the best-F1 (or configured) threshold
MARGINS: tuple[float | None, ...] = (None, *(round(0.005 * k, 3) for k in range(0, 21)))  # off, 0 … 0.10
BANDS: tuple[float | None, ...] = (None, *(round(0.01 * k, 2) for k in range(1, 16)))  # off, 0.01 … 0.15


@dataclass(frozen=True)
class Case:
    """One labelled question: its hits as (entry id, relevance), best first, and its gold ids (empty: none)."""

    hits: tuple[tuple[str, float], ...]
    gold: frozenset[str]


@dataclass(frozen=True)
class LadderOutcome:
    """Counts over a question set for one (answer threshold, margin, band)."""

    answer: float
    margin: float | None
    band: float | None
    right: int
    wrong: int
    clarified: int
    confirmed: int
    resolved: int  # clarify/confirm turns whose options hold a gold entry
    total: int
    missed: int = 0  # answerable questions that fell back with no right "did you mean"
    offered: int = 0  # answerable questions that fell back with a gold entry among the "did you mean"

    @property
    def asked(self) -> float:
        """Share of questions asked back (clarify + confirm)."""
        return (self.clarified + self.confirmed) / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        """Wrong answers, plus the misses and the questions asked back at their costs."""
        blind = self.clarified + self.confirmed - self.resolved
        return (
            self.wrong
            + MISS_COST * self.missed
            + OFFERED_COST * self.offered
            + ASK_COST * self.resolved
            + BLIND_ASK_COST * blind
        )

    def describe(self) -> str:
        """One line for the calibrate report."""
        n = self.total or 1
        asked = self.clarified + self.confirmed
        return (
            f"answer {self.answer:g} · clarify margin {_off(self.margin)} · confirm band {_off(self.band)}: wrong {100 * self.wrong / n:.1f}/100, "
            f"right {100 * self.right / n:.1f}/100, asked back {100 * self.asked:.1f}% "
            f"(gold in options {self.resolved}/{asked})"
        )


def replay(cases: Sequence[Case], answer: float, margin: float | None, band: float | None) -> LadderOutcome:
    """The rungs' decisions on ``cases`` with these thresholds (None: that rung off)."""
    right = wrong = clarified = confirmed = resolved = missed = offered = 0
    for case in cases:
        passed = [(i, r) for i, r in case.hits if r >= answer]
        if passed:
            top = passed[0][1]
            close = list(dict.fromkeys(i for i, r in passed if margin is not None and top - r <= margin))
            if len(close) >= 2:  # asked: the options are the passing candidates, up to MAX_OPTIONS
                clarified += 1
                resolved += bool(case.gold & set(list(dict.fromkeys(i for i, _ in passed))[:MAX_OPTIONS]))
            elif passed[0][0] in case.gold:
                right += 1
            else:
                wrong += 1
        elif case.hits and band is not None and case.hits[0][1] >= answer - band:
            confirmed += 1
            resolved += case.hits[0][0] in case.gold
        elif not case.gold:
            right += 1
        elif case.gold & {i for i, _ in case.hits[:SUGGESTED]}:
            offered += 1
        else:
            missed += 1
    return LadderOutcome(
        answer, margin, band, right, wrong, clarified, confirmed, resolved, len(cases), missed, offered
    )


def tune(cases: Sequence[Case], answer: float) -> LadderOutcome:
    """The (answer threshold ≥ ``answer``, margin, band) with the lowest cost that asks back at most
    ``MAX_ASKED`` of the questions."""
    answers = [round(answer + k / 100, 3) for k in range(MAX_RAISE + 1)]
    outcomes = [replay(cases, a, m, b) for a in answers for m in MARGINS for b in BANDS]
    allowed = [o for o in outcomes if o.asked <= MAX_ASKED] or [replay(cases, answer, None, None)]
    return min(allowed, key=lambda o: (round(o.cost, 6), o.answer, (o.margin or 0.0) + (o.band or 0.0)))


def _off(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"
