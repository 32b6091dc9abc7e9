"""The ladder's answer threshold and clarify margin on LCQMC (a data set they were not tuned on): recall@1 of the
questions the bot answers, beside today's chain — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.ladder_lcqmc [--modes sparse,hybrid-e5] [--no-write]

LCQMC dev from ../shared/data/lcqmc_dev (11,448 entries, 4,355 paraphrase questions); each question's top 10 hits
through the product's retrieval, replayed through the answer and clarify rungs by bot/evaluation/ladder_tuning.py's
``replay``: at today's thresholds and main's ladder without agreement (each hit's relevance before it, ``base``), and
at the shipped thresholds with the shipped agreement. About 8 minutes with e5 on 2 cores (encoding the entries).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import mode_arguments, publish, shared_folder
from benchmarks.ladder import BEFORE_AGREEMENT, BEFORE_CUTOFFS, MAIN_CUTOFFS, STATE, TODAY_ANSWER, build
from bot.chat.several import asks_for_several
from bot.config.retrieval import AgreementWeights
from bot.evaluation.ladder_tuning import Case, replay, rescored
from bot.evaluation.questions import load_eval_set


def main(argv: list[str] | None = None) -> int:
    """Retrieve every question once, replay both settings, print and (unless --no-write) write the section."""
    args = mode_arguments(argv)
    folder = shared_folder("lcqmc_dev")
    if folder is None:
        return 0
    data = load_eval_set(folder, "lcqmc")
    lines = [
        "| system | chain | answer ≥ | clarify margin | answered | recall@1 of answered | wrong / 100 | clarified "
        "| gold in options |"
    ]
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for name in args.modes.split(","):
        bot, settings = build(data.entries, STATE / "lcqmc" / name, name)
        mode = settings.retrieval.mode
        system = bot.index.searcher(mode).system
        shipped = bot.search.cutoffs(system)
        cases = []
        for q in data.questions:
            hits, _ = bot.retrieve(q.question, mode=mode, top_k=10)
            signals = tuple(dict(h.signals) for h in hits)
            pairs = tuple((h.entry.id, h.relevance) for h in hits)
            cases.append(Case(pairs, frozenset(q.gold), signals, asks_for_several(q.question)))
        before = [rescored(c, AgreementWeights()) for c in cases]  # each hit's relevance before agreement
        n = len(cases)
        main_cutoffs = MAIN_CUTOFFS.get(system, shipped)
        earlier = BEFORE_CUTOFFS.get(system, shipped)
        weighted = [rescored(c, AgreementWeights(**BEFORE_AGREEMENT.get(system, {}))) for c in cases]
        for label, answer, margin, settle, dense, contrast, together, replayed in (
            ("today", TODAY_ANSWER.get(system, shipped.answer), None, None, None, False, None, before),
            ("ladder (main)", main_cutoffs.answer, main_cutoffs.clarify, None, None, False, None, before),
            (
                "ladder (before)",
                earlier.answer,
                earlier.clarify,
                earlier.settle,
                earlier.settle_dense,
                False,
                None,
                weighted,
            ),
            (
                "**ladder (new)**",
                shipped.answer,
                shipped.clarify,
                shipped.settle,
                shipped.settle_dense,
                shipped.contrast,
                shipped.together,
                cases,
            ),
        ):
            # the rungs' own rules (every LCQMC question has a gold entry)
            o = replay(replayed, answer, margin, None, settle, dense, contrast, together)
            answered = o.right + o.wrong
            lines.append(
                f"| {system} | {label} | {answer:g} | {'off' if margin is None else f'{margin:g}'} | {answered / n:.3f} "
                f"| {o.right / answered if answered else 0:.4f} | {100 * o.wrong / n:.1f} | {o.clarified / n:.3f} "
                f"| {o.resolved / o.clarified if o.clarified else 0:.3f} |"
            )
    intro = (
        f"`python -m benchmarks.ladder_lcqmc` · LCQMC dev ({len(data.entries):,} entries, {len(data.questions):,} "
        "paraphrase questions, all answerable; a data set the ladder's thresholds were not tuned on). Shares "
        "are of all questions; *today* = the answer thresholds shipped before the ladder, no clarify; *ladder "
        "(main)* = main's ladder thresholds on the relevance before agreement; *ladder (before)* = the thresholds "
        "and agreement weights shipped before the decisions were sharpened (main f41edd5), replayed from the same "
        "hits' signals; *ladder (new)* = the shipped thresholds (with the clarify margin's `settle` leads where "
        "shipped) and agreement (`retrieval.agreement`), same retrieval run. The sparse *today* row uses today's "
        "relevance rule only through the threshold (its relevance now follows the BM25 ranking)."
    )
    return publish("ladder-lcqmc", "The decision ladder on LCQMC", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
