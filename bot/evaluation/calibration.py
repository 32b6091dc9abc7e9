"""Choosing a system's answer threshold from labelled questions: the relevance cut with the best F1; with it the
ladder (clarify margin, confirm band, the unsure wording's band) and, on request, the agreement weights; and
refusing a retune that makes a guard set worse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from bot.config.retrieval import AgreementWeights
from bot.evaluation.ladder_tuning import (
    NO_RUNGS,
    Case,
    LadderOutcome,
    Rungs,
    decide,
    rescored,
    tune,
    tune_unsure,
    tune_weights,
)
from bot.evaluation.metrics import Point, best_threshold, point, round_threshold


def threshold_key(system: str, which: str = "answer") -> tuple[str, ...]:
    """Where a system's threshold lives in config.yaml."""
    return ("retrieval", "thresholds", system, which)


@dataclass
class Calibration:
    """One system's chosen answer threshold, its quality, neighbouring candidates and the data behind it."""

    system: str
    chosen: Point
    neighbours: list[Point]
    positives: list[float] = field(default_factory=list, repr=False)
    negatives: list[float] = field(default_factory=list, repr=False)
    cases: list[Case] = field(default_factory=list, repr=False)
    ladder: LadderOutcome | None = None  # the ladder's answer threshold (≥ chosen), clarify margin and confirm band
    weights: AgreementWeights | None = None  # retuned agreement weights (None: the configured ones kept)
    unsure: float | None = None  # the band in which a fallback says it is unsure (None: never)

    def with_ladder(
        self, base: float | None = None, weights_from: AgreementWeights | None = None, rungs: Rungs = NO_RUNGS
    ) -> Calibration:
        """This calibration with the ladder tuned on its cases from ``base`` (default: the chosen threshold), the
        other rungs deciding as ``rungs`` has them; with ``weights_from``, the agreement weights too, starting from
        those."""
        if not self.cases:
            return self
        start = self.chosen.threshold if base is None else base
        if weights_from is not None:
            self.weights, self.ladder = tune_weights(self.cases, start, weights_from, rungs)
        else:
            self.ladder = tune(self.cases, start, rungs)
        cases = [rescored(c, self.weights) for c in self.cases] if self.weights else self.cases
        self.unsure = tune_unsure(cases, self.ladder)
        return self

    def headline(self) -> str:
        """One line: system, threshold and its precision/recall/F1."""
        c = self.chosen
        return (
            f"{self.system}: answer threshold {c.threshold:g} · precision {c.precision:.3f} · recall {c.recall:.3f}"
            f" · F1 {c.f1:.3f}  [{len(self.positives)} answerable / {len(self.negatives)} not]"
            + (f"\n  {self.ladder.describe()} · unsure band {_off(self.unsure)}" if self.ladder else "")
            + (f"\n  agreement {_weights(self.weights)}" if self.weights else "")
        )

    def table(self) -> str:
        """The chosen threshold among its neighbours, as a markdown table (← marks the choice)."""
        rows = [
            f"| {p.threshold:g}{' ←' if p.threshold == self.chosen.threshold else ''} | {p.precision:.3f} | "
            f"{p.recall:.3f} | {p.f1:.3f} |"
            for p in self.neighbours
        ]
        return "\n".join(["| threshold | precision | recall | F1 |", "|---|---|---|---|", *rows])

    def to_dict(self) -> dict:
        """JSON-ready form (without the raw relevances)."""
        return {
            "system": self.system,
            **asdict(self.chosen),
            "answerable": len(self.positives),
            "unanswerable": len(self.negatives),
            "neighbours": [asdict(p) for p in self.neighbours],
            "ladder_answer": self.ladder.answer if self.ladder else None,
            "clarify": self.ladder.margin if self.ladder else None,
            "confirm": self.ladder.band if self.ladder else None,
            "ladder": {**asdict(self.ladder), "asked": self.ladder.asked} if self.ladder else None,
            "unsure": self.unsure,
            "agreement": self.weights.model_dump() if self.weights else None,
        }


def neighbours(
    chosen: float, positives: Sequence[float], negatives: Sequence[float], step: float = 0.02, count: int = 4
) -> list[Point]:
    """Points at ``count`` steps either side of ``chosen`` (plus ``chosen``), ascending, within [0, 1]."""
    values = {chosen} | {round_threshold(chosen + k * step) for k in range(-count, count + 1)}
    return [point(v, positives, negatives) for v in sorted(v for v in values if 0.0 <= v <= 1.0)]


def calibrate(
    system: str,
    positives: list[float],
    negatives: list[float],
    cases: Sequence[Case] = (),
    ladder_base: float | None = None,
    weights_from: AgreementWeights | None = None,
    rungs: Rungs = NO_RUNGS,
) -> Calibration:
    """Pick the best-F1 answer threshold (rounded) for one system's best-hit relevances; with ``cases`` (each
    question's ranked hits) also the ladder, tuned from that threshold or from ``ladder_base`` with the other
    ``rungs`` as they are, and with ``weights_from`` the agreement weights from those."""
    chosen = round_threshold(best_threshold(positives, negatives))
    point_ = point(chosen, positives, negatives)
    found = Calibration(system, point_, neighbours(chosen, positives, negatives), positives, negatives, list(cases))
    return found.with_ladder(ladder_base, weights_from, rungs)


@dataclass(frozen=True)
class LadderChoice:
    """What a system decides with: the answer threshold, clarify margin, confirm band and agreement weights, and the
    rungs calibrate does not retune, as they are configured."""

    answer: float
    margin: float | None
    band: float | None
    weights: AgreementWeights
    rungs: Rungs = NO_RUNGS

    def outcome(self, cases: Sequence[Case]) -> LadderOutcome:
        """The ladder's decisions on ``cases`` with these values."""
        return decide([rescored(c, self.weights) for c in cases], self.answer, self.margin, self.band, self.rungs)


@dataclass(frozen=True)
class Worse:
    """A guard set on which a retune decides worse: its outcome before and after."""

    name: str
    before: LadderOutcome
    after: LadderOutcome

    def describe(self) -> str:
        """The set and the figures, e.g. "ladder_sysu.jsonl: cost 18.0 → 19.5 per 100 (wrong 4.7 → 6.2, ...)"."""
        b, a = self.before, self.after

        def per(o: LadderOutcome, count: int) -> float:
            return 100 * count / (o.total or 1)

        return (
            f"{self.name}: cost {per(b, 1) * b.cost:.1f} → {per(a, 1) * a.cost:.1f} per 100 (wrong "
            f"{per(b, b.wrong):.1f} → {per(a, a.wrong):.1f}, right {per(b, b.right):.1f} → {per(a, a.right):.1f}, "
            f"asked back {100 * b.asked:.1f}% → {100 * a.asked:.1f}%)"
        )


def worse_sets(sets: Mapping[str, Sequence[Case]], current: LadderChoice, retuned: LadderChoice) -> list[Worse]:
    """The guard sets on which ``retuned`` costs more per question than ``current`` (each set's own cases)."""
    found = []
    for name, cases in sets.items():
        if not cases:
            continue
        before, after = current.outcome(cases), retuned.outcome(cases)
        if round(after.cost, 6) > round(before.cost, 6):
            found.append(Worse(name, before, after))
    return found


def _off(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


def _weights(weights: AgreementWeights) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in weights.model_dump().items())


def pool(runs: Sequence[Sequence[Calibration]]) -> list[Calibration]:
    """One calibration per system over the relevances of several runs (seeds) together."""
    return [
        calibrate(
            c.system,
            [v for run in runs for r in run if r.system == c.system for v in r.positives],
            [v for run in runs for r in run if r.system == c.system for v in r.negatives],
            [case for run in runs for r in run if r.system == c.system for case in r.cases],
        )
        for c in runs[0]
    ]
