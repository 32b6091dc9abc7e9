"""Choosing a searcher's threshold from data: answerable vs. made-unanswerable questions, best F1."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.evaluation import EvalQuestion
from bot.knowledge import Entry

# Where each searcher's cut-off lives in config.yaml (elasticsearch has its own, on Lucene's scale).
THRESHOLD_KEYS: dict[str, tuple[str, ...]] = {
    "tantivy": ("retrieval", "sparse", "threshold"),
    "elasticsearch": ("retrieval", "sparse", "elasticsearch", "threshold"),
    "faiss": ("retrieval", "dense", "threshold"),
}
NO_HIT = -math.inf  # a question without any hit from a searcher never passes its threshold


@dataclass(frozen=True)
class Split:
    """Questions labelled against a knowledge base with a seeded random half of the gold entries removed."""

    answerable: list[EvalQuestion]
    unanswerable: list[EvalQuestion]
    removed: frozenset[str]
    dropped: int
    off_topic: int


@dataclass(frozen=True)
class Point:
    """Precision, recall and F1 of "answerable" when scores >= ``threshold`` count as answerable."""

    threshold: float
    precision: float
    recall: float
    f1: float


@dataclass
class Calibration:
    """One searcher's chosen threshold, its quality, neighbouring candidates and the data behind it."""

    searcher: str
    mode: str
    chosen: Point
    neighbours: list[Point]
    answerable: int
    unanswerable: int
    scores_answerable: list[float] = field(default_factory=list, repr=False)
    scores_unanswerable: list[float] = field(default_factory=list, repr=False)

    def headline(self) -> str:
        """One line: mode, searcher, threshold and its precision/recall/F1."""
        c = self.chosen
        return (f"{self.mode} ({self.searcher}): threshold {c.threshold:g} · precision {c.precision:.3f} · "
                f"recall {c.recall:.3f} · F1 {c.f1:.3f}  [{self.answerable} answerable / {self.unanswerable} not]")

    def table(self) -> str:
        """The chosen threshold among its neighbours, as a markdown table (← marks the choice)."""
        rows = [f"| {p.threshold:g}{' ←' if p.threshold == self.chosen.threshold else ''} | {p.precision:.3f} | "
                f"{p.recall:.3f} | {p.f1:.3f} |" for p in self.neighbours]
        return "\n".join(["| threshold | precision | recall | F1 |", "|---|---|---|---|", *rows])

    def to_dict(self) -> dict:
        """JSON-ready form (without the raw scores)."""
        return {"searcher": self.searcher, "mode": self.mode, **asdict(self.chosen), "answerable": self.answerable,
                "unanswerable": self.unanswerable, "neighbours": [asdict(p) for p in self.neighbours]}


def split_questions(questions: Sequence[EvalQuestion], seed: int) -> Split:
    """Remove the gold entries of a seeded random half of the on-topic questions, then label every question.

    A question is answerable when none of its gold is removed and unanswerable when all of it is (also the
    kept-half questions sharing gold with removed ones); partly removed gold is ambiguous, so it is dropped.
    Off-topic questions (empty gold) are unanswerable.
    """
    on_topic = [q for q in questions if q.gold]
    chosen = random.Random(seed).sample(range(len(on_topic)), len(on_topic) // 2)
    removed = frozenset(g for i in chosen for g in on_topic[i].gold)
    answerable, unanswerable, dropped = [], [], 0
    for q in on_topic:
        gone = len(q.gold & removed)
        if gone == 0:
            answerable.append(q)
        elif gone == len(q.gold):
            unanswerable.append(q)
        else:
            dropped += 1
    off_topic = [q for q in questions if not q.gold]
    return Split(answerable, unanswerable + off_topic, removed, dropped, len(off_topic))


def write_entries(entries: Sequence[Entry], folder: Path) -> None:
    """Write entries as knowledge files (one per id stem, keyed by the rest of the id) so they reload with the same ids."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, dict]] = {}
    for e in entries:
        stem, key = e.id.split(":", 1)
        files.setdefault(stem, {})[key] = {"query": e.query, "document": e.document, "metadata": list(e.metadata)}
    for stem, data in files.items():
        (folder / f"{stem}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def point(threshold: float, positives: Sequence[float], negatives: Sequence[float]) -> Point:
    """Precision/recall/F1 at one threshold."""
    tp = sum(s >= threshold for s in positives)
    fp = sum(s >= threshold for s in negatives)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / len(positives) if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Point(threshold, precision, recall, f1)


def round_threshold(value: float) -> float:
    """Three significant digits: what a person would write in config.yaml."""
    return float(f"{value:.3g}") if math.isfinite(value) and value else value


def best_threshold(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The threshold (midway between neighbouring scores) with the best F1; ties go to the higher, stricter one."""
    labelled = sorted([(s, 1) for s in positives if s > NO_HIT] + [(s, 0) for s in negatives if s > NO_HIT],
                      reverse=True)
    if not labelled:
        return 0.0
    best, best_f1, tp, fp = labelled[0][0] + 1e-6, -1.0, 0, 0
    for i, (score, label) in enumerate(labelled):
        tp, fp = tp + label, fp + (1 - label)
        nxt = labelled[i + 1][0] if i + 1 < len(labelled) else None
        if nxt == score:
            continue  # equal scores fall on the same side of any threshold
        f1 = 2 * tp / (2 * tp + fp + (len(positives) - tp)) if positives else 0.0
        if f1 > best_f1:
            best_f1, best = f1, (score + nxt) / 2 if nxt is not None else score
    return best


def neighbours(chosen: float, positives: Sequence[float], negatives: Sequence[float], count: int = 5,
               step: float = 0.05) -> list[Point]:
    """Points at ``count`` quantile-spaced thresholds either side of ``chosen`` (plus ``chosen``), ascending."""
    scores = sorted(s for s in [*positives, *negatives] if s > NO_HIT)
    if not scores:
        return [point(chosen, positives, negatives)]
    q0 = sum(s < chosen for s in scores) / len(scores)
    values = {chosen}
    for k in range(-count, count + 1):
        q = min(1.0, max(0.0, q0 + k * step))
        values.add(round_threshold(scores[min(len(scores) - 1, int(q * len(scores)))]))
    return [point(v, positives, negatives) for v in sorted(values)]


def calibrate_scores(searcher: str, mode: str, positives: list[float], negatives: list[float]) -> Calibration:
    """Pick the best-F1 threshold (rounded) for one searcher's best-hit scores."""
    chosen = round_threshold(best_threshold(positives, negatives))
    return Calibration(searcher, mode, point(chosen, positives, negatives), neighbours(chosen, positives, negatives),
                       len(positives), len(negatives), positives, negatives)


Retrieve = Callable[[str, str], list]  # (question, mode) -> hits


def best_scores(retrieve: Retrieve, mode: str, names: Sequence[str], questions: Sequence[EvalQuestion]) -> dict[str, list[float]]:
    """Per searcher name, each question's best score from that searcher (NO_HIT when it returned nothing)."""
    out: dict[str, list[float]] = {n: [] for n in names}
    for q in questions:
        hits = retrieve(q.question, mode)
        for name in names:
            found = [(h.scores or {h.searcher: h.score}).get(name) for h in hits]
            out[name].append(max((s for s in found if s is not None), default=NO_HIT))
    return out


def calibrate_split(retrieve: Retrieve, components: Callable[[str], list[str]], modes: Sequence[str],
                    split: Split) -> list[Calibration]:
    """Calibrate each mode's searchers on one index built without ``split.removed``."""
    results = []
    for mode in modes:
        names = components(mode)
        pos = best_scores(retrieve, mode, names, split.answerable)
        neg = best_scores(retrieve, mode, names, split.unanswerable)
        results += [calibrate_scores(n, mode, pos[n], neg[n]) for n in names]
    return results


def pool(runs: Sequence[Sequence[Calibration]]) -> list[Calibration]:
    """One calibration per searcher over the scores of several seeds' runs together (steadier on small data)."""
    first = runs[0]
    return [calibrate_scores(c.searcher, c.mode,
                             [s for run in runs for r in run if r.searcher == c.searcher for s in r.scores_answerable],
                             [s for run in runs for r in run if r.searcher == c.searcher for s in r.scores_unanswerable])
            for c in first]
