"""Choosing a system's answer threshold from labelled questions: the relevance cut with the best F1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from bot.evaluation.ladder_tuning import Case, LadderOutcome, tune
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

    def with_ladder(self, base: float | None = None) -> Calibration:
        """This calibration with the ladder tuned on its cases from ``base`` (default: the chosen threshold)."""
        if self.cases:
            self.ladder = tune(self.cases, self.chosen.threshold if base is None else base)
        return self

    def headline(self) -> str:
        """One line: system, threshold and its precision/recall/F1."""
        c = self.chosen
        return (
            f"{self.system}: answer threshold {c.threshold:g} · precision {c.precision:.3f} · recall {c.recall:.3f}"
            f" · F1 {c.f1:.3f}  [{len(self.positives)} answerable / {len(self.negatives)} not]"
            + (f"\n  {self.ladder.describe()}" if self.ladder else "")
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
) -> Calibration:
    """Pick the best-F1 answer threshold (rounded) for one system's best-hit relevances; with ``cases`` (each
    question's ranked hits) also the ladder, tuned from that threshold or from ``ladder_base``."""
    chosen = round_threshold(best_threshold(positives, negatives))
    point_ = point(chosen, positives, negatives)
    found = Calibration(system, point_, neighbours(chosen, positives, negatives), positives, negatives, list(cases))
    return found.with_ladder(ladder_base)


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
