"""The one evaluation loop: ask every question, keep what it ranked, how relevant the best hit was, and how long it took."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.evaluation.metrics import first_gold_rank, mrr_at, percentile, recall_at
from bot.evaluation.questions import EvalQuestion
from bot.search.base import Hit

Retrieve = Callable[[str], "tuple[list[Hit], list[Hit]]"]  # question -> (hits best first, hits that pass)
KS = (1, 3, 5)


@dataclass(frozen=True)
class Outcome:
    """What one question got: ranked entry ids, the best relevance, whether anything passed, and the latency."""

    question: EvalQuestion
    ranked: list[str]
    best_relevance: float
    passed: bool
    ms: float
    relevances: tuple[float, ...] = ()  # of ``ranked``, in the same order
    signals: tuple[dict[str, float], ...] = ()  # of ``ranked``: each hit's signals (agreement replays from them)

    @property
    def rank(self) -> int | None:
        """1-based rank of the first gold entry, or None."""
        return first_gold_rank(self.ranked, self.question.gold)


@dataclass
class Run:
    """Every outcome of one system on one question set, with the usual numbers derived from them."""

    system: str
    dataset: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ranks(self) -> list[int | None]:
        """Gold ranks of the answerable questions."""
        return [o.rank for o in self.outcomes if o.question.answerable]

    def recall(self, k: int) -> float:
        """Share of answerable questions with gold in the top ``k``."""
        return recall_at(self.ranks, k)

    @property
    def mrr(self) -> float:
        """MRR@10 over the answerable questions."""
        return mrr_at(self.ranks, 10)

    def relevances(self, answerable: bool) -> list[float]:
        """Best relevance of each answerable (or each other) question; 0 when nothing came back."""
        return [o.best_relevance for o in self.outcomes if o.question.answerable == answerable]

    def pass_rate(self, answerable: bool) -> float | None:
        """Share of answerable (or other) questions for which some hit passed; None when there are none."""
        flags = [o.passed for o in self.outcomes if o.question.answerable == answerable]
        return sum(flags) / len(flags) if flags else None

    @property
    def decision_f1(self) -> float:
        """F1 of the decision to answer: precision = answerable among the questions something passed for,
        recall = the answerable pass rate."""
        passed = [o for o in self.outcomes if o.passed]
        precision = sum(o.question.answerable for o in passed) / len(passed) if passed else 0.0
        recall = self.pass_rate(True) or 0.0
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    @property
    def p50_ms(self) -> float:
        """Median latency."""
        return statistics.median(o.ms for o in self.outcomes) if self.outcomes else 0.0

    @property
    def p95_ms(self) -> float:
        """95th-percentile latency."""
        return percentile([o.ms for o in self.outcomes], 95)


def run_questions(retrieve: Retrieve, questions: Sequence[EvalQuestion], system: str = "", dataset: str = "") -> Run:
    """Ask every question through ``retrieve`` and record the outcomes."""
    run = Run(system, dataset)
    for q in questions:
        start = time.perf_counter()
        hits, passed = retrieve(q.question)
        ms = (time.perf_counter() - start) * 1000
        best = max((h.relevance for h in hits), default=0.0)
        ranked, relevances = [h.entry.id for h in hits], tuple(h.relevance for h in hits)
        signals = tuple(dict(h.signals) for h in hits)
        run.outcomes.append(Outcome(q, ranked, best, bool(passed), ms, relevances, signals))
    return run
