"""Labelling questions answerable or not, for choosing and checking thresholds."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from bot.evaluation.questions import EvalQuestion


@dataclass(frozen=True)
class Split:
    """Questions labelled against the knowledge without the ``removed`` entries, and how that was done."""

    answerable: list[EvalQuestion]
    unanswerable: list[EvalQuestion]
    removed: frozenset[str]
    how: str
    dropped: int = 0


def has_negatives(questions: Sequence[EvalQuestion]) -> bool:
    """True when the set holds questions nothing answers (unanswerable or chit-chat)."""
    return any(not q.answerable for q in questions)


def real_split(questions: Sequence[EvalQuestion]) -> Split:
    """The set's own labels on the whole knowledge: its unanswerable and chit-chat questions are the negatives."""
    return Split(
        [q for q in questions if q.answerable],
        [q for q in questions if not q.answerable],
        frozenset(),
        "real unanswerable and chit-chat questions, whole knowledge",
    )


def removal_split(questions: Sequence[EvalQuestion], seed: int) -> Split:
    """Remove a seeded random half of the gold entries: questions whose gold is all gone become unanswerable.

    Questions with gold partly removed are ambiguous and dropped; questions without gold stay negatives.
    Removing half of the gold *entries* (not of the questions) keeps the two sides balanced when several
    questions share an entry (CMRC: ~4 questions per paragraph).
    """
    golds = sorted({g for q in questions for g in q.gold})
    removed = frozenset(random.Random(seed).sample(golds, len(golds) // 2))
    answerable, unanswerable, dropped = [], [], 0
    for q in questions:
        gone = len(q.gold & removed)
        if not q.answerable or gone == len(q.gold):
            unanswerable.append(q)
        elif gone == 0:
            answerable.append(q)
        else:
            dropped += 1
    return Split(answerable, unanswerable, removed, f"gold of a random half removed (seed {seed})", dropped)


def make_split(questions: Sequence[EvalQuestion], seed: int) -> Split:
    """Real negatives when the set has them, else the gold-removal split for ``seed``."""
    return real_split(questions) if has_negatives(questions) else removal_split(questions, seed)
