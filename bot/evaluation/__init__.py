"""Measuring the product: questions and their labels, the one evaluation loop, metrics, and threshold calibration."""

from bot.evaluation.calibration import Calibration, calibrate, pool, threshold_key
from bot.evaluation.metrics import (
    Point,
    auc,
    best_shared_threshold,
    best_threshold,
    exact_match,
    f1_score,
    first_gold_rank,
    mrr_at,
    percentile,
    point,
    recall_at,
)
from bot.evaluation.questions import EvalQuestion, EvalSet, load_eval_set, load_questions, subsample
from bot.evaluation.run import Outcome, Run, run_questions
from bot.evaluation.splits import Split, has_negatives, make_split, real_split, removal_split

__all__ = [
    "Calibration",
    "EvalQuestion",
    "EvalSet",
    "Outcome",
    "Point",
    "Run",
    "Split",
    "auc",
    "best_shared_threshold",
    "best_threshold",
    "calibrate",
    "exact_match",
    "f1_score",
    "first_gold_rank",
    "has_negatives",
    "load_eval_set",
    "load_questions",
    "make_split",
    "mrr_at",
    "percentile",
    "point",
    "pool",
    "real_split",
    "recall_at",
    "removal_split",
    "run_questions",
    "subsample",
    "threshold_key",
]
