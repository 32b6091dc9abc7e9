"""Numbers of retrieval and answering: recall, MRR, latency percentiles, threshold F1, and CMRC answer scores."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    """1-based rank of the first gold id in ``ranked``, or None."""
    gold = set(gold)
    return next((i for i, r in enumerate(ranked, start=1) if r in gold), None)


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    """Share of questions with a gold entry in the top ``k``."""
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0


def mrr_at(ranks: Sequence[int | None], depth: int = 10) -> float:
    """Mean reciprocal rank, counting only ranks within ``depth``."""
    return sum(1.0 / r for r in ranks if r is not None and r <= depth) / len(ranks) if ranks else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on sorted values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


# -- answer or fall back: F1 of "answerable" when relevance >= threshold ------------------------------
@dataclass(frozen=True)
class Point:
    """Precision, recall and F1 of "answerable" when relevances >= ``threshold`` count as answerable."""

    threshold: float
    precision: float
    recall: float
    f1: float


def point(threshold: float, positives: Sequence[float], negatives: Sequence[float]) -> Point:
    """Precision/recall/F1 at one threshold (positives: answerable questions' best relevance)."""
    tp = sum(s >= threshold for s in positives)
    fp = sum(s >= threshold for s in negatives)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / len(positives) if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Point(threshold, precision, recall, f1)


def best_threshold(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The threshold (midway between neighbouring values) with the best F1; ties go to the higher, stricter one."""
    labelled = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives], reverse=True)
    if not labelled:
        return 0.0
    best, best_f1, tp, fp = labelled[0][0] + 1e-6, -1.0, 0, 0
    for i, (score, label) in enumerate(labelled):
        tp, fp = tp + label, fp + (1 - label)
        nxt = labelled[i + 1][0] if i + 1 < len(labelled) else None
        if nxt == score:
            continue  # equal values fall on the same side of any threshold
        f1 = 2 * tp / (2 * tp + fp + (len(positives) - tp)) if positives else 0.0
        if f1 > best_f1:
            best_f1, best = f1, (score + nxt) / 2 if nxt is not None else score
    return best


def best_shared_threshold(sets: Sequence[tuple[Sequence[float], Sequence[float]]], grid: int = 400) -> float:
    """One threshold for several (positives, negatives) sets: the one with the best mean F1 (ties: stricter)."""
    values = sorted({v for p, n in sets for v in (*p, *n)})
    if not values:
        return 0.0
    step = max(1, len(values) // grid)
    candidates = values[::step] + [values[-1]]
    return max(candidates, key=lambda t: (sum(point(t, p, n).f1 for p, n in sets) / len(sets), t))


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Probability that a random positive outranks a random negative (ties count half); NaN if a side is empty."""
    if not positives or not negatives:
        return math.nan
    ordered = sorted([(v, 1) for v in positives] + [(v, 0) for v in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        rank_sum += (i + j + 1) / 2 * sum(label for _, label in ordered[i:j])
        i = j
    n1, n0 = len(positives), len(negatives)
    return (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n0)


def round_threshold(value: float) -> float:
    """Three decimals: what a person would write in config.yaml for a relevance in [0, 1]."""
    return round(value, 3) if math.isfinite(value) else value


# -- answer quality, CMRC 2018 style ---------------------------------------------------------------------
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def answer_tokens(text: str) -> list[str]:
    """Lower-cased tokens with punctuation dropped: each Chinese character alone, other letters/digits as words."""
    return _TOKEN.findall(text.lower())


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 when the prediction equals any reference once punctuation, spaces and case are ignored."""
    pred = answer_tokens(prediction)
    return float(any(answer_tokens(ref) == pred for ref in references))


def f1_score(prediction: str, references: Sequence[str]) -> float:
    """Max over references of the F1 of the longest common token run (the official CMRC 2018 metric)."""
    pred, best = answer_tokens(prediction), 0.0
    for ref in references:
        gold = answer_tokens(ref)
        common = _longest_common_run(gold, pred)
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
