"""The ladder's answer threshold and clarify margin on LCQMC (a data set they were not tuned on): recall@1 of the
questions the bot answers, beside today's chain — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.ladder_lcqmc [--modes sparse,hybrid-e5] [--no-write]

LCQMC dev from ../shared/data/lcqmc_dev (11,448 entries, 4,355 paraphrase questions); each question's top 10 hits
through the product's retrieval, replayed through the answer and clarify rungs (bot/evaluation/ladder_tuning.py
rules) at today's thresholds and at the shipped ones. About 8 minutes with e5 on 2 cores (encoding the entries).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import mode_arguments, publish, shared_folder
from benchmarks.ladder import STATE, TODAY_ANSWER, build
from bot.evaluation.questions import load_eval_set


def replay(rows: list[tuple[frozenset[str], list[tuple[str, float]]]], answer: float, margin: float | None):
    """(answered, right among answered, clarified, clarified with gold among the options)."""
    answered = right = clarified = gold_offered = 0
    for gold, hits in rows:
        passed = [(i, r) for i, r in hits if r >= answer]
        if not passed:
            continue
        close = list(dict.fromkeys(i for i, r in passed if margin is not None and passed[0][1] - r <= margin))
        if len(close) >= 2:
            clarified += 1
            gold_offered += bool(gold & set(close[:3]))
            continue
        answered += 1
        right += passed[0][0] in gold
    return answered, right, clarified, gold_offered


def main(argv: list[str] | None = None) -> int:
    """Retrieve every question once, replay both settings, print and (unless --no-write) write the section."""
    args = mode_arguments(argv)
    folder = shared_folder("lcqmc_dev")
    if folder is None:
        return 0
    data = load_eval_set(folder, "lcqmc")
    lines = [
        "| system | chain | answer ≥ | clarify margin | answered | recall@1 of answered | clarified | gold in options |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    for name in args.modes.split(","):
        bot, settings = build(data.entries, STATE / "lcqmc" / name, name)
        mode = settings.retrieval.mode
        system = bot.index.searcher(mode).system
        shipped = bot.cutoffs(system)
        rows = []
        for q in data.questions:
            hits, _ = bot.retrieve(q.question, mode=mode, top_k=10)
            rows.append((q.gold, [(h.entry.id, h.relevance) for h in hits]))
        n = len(rows)
        for label, answer, margin in (
            ("today", TODAY_ANSWER.get(system, shipped.answer), None),
            ("ladder (shipped)", shipped.answer, shipped.clarify),
        ):
            answered, right, clarified, offered = replay(rows, answer, margin)
            lines.append(
                f"| {system} | {label} | {answer:g} | {'off' if margin is None else f'{margin:g}'} | {answered / n:.3f} "
                f"| {right / answered if answered else 0:.4f} | {clarified / n:.3f} "
                f"| {offered / clarified if clarified else 0:.3f} |"
            )
    intro = (
        f"`python -m benchmarks.ladder_lcqmc` · LCQMC dev ({len(data.entries):,} entries, {len(data.questions):,} "
        "paraphrase questions, all answerable; a data set the ladder's thresholds were not tuned on). Shares "
        "are of all questions; *today* = the answer thresholds shipped before the ladder, no clarify. The "
        "sparse *today* row uses today's relevance rule only through the threshold (its relevance now follows "
        "the BM25 ranking)."
    )
    return publish("ladder-lcqmc", "The decision ladder on LCQMC", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
