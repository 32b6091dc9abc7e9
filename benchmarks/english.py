"""English questions over the Chinese campus knowledge — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.english [--modes sparse,hybrid-e5,dense-e5] [--no-write]

Questions: benchmarks/data/sysu_english.jsonl (34 English questions we wrote over ../shared/data/sysu, each with
our own Chinese translation). There are no LLM weights here, so the translate step's effect is measured with our
translation standing in for the LLM's: *as asked* searches the English question (what the bot does without an
LLM), *translated* searches the Chinese one (what the translate step searches when the LLM translates as well as
we did: an upper bound). Shipped thresholds; right = the first passing hit is gold. Each hybrid and dense mode runs
twice in the same run: as main shipped it (words fused whatever the language, no agreement:
``benchmarks.ladder.as_main``) and as shipped now (a message and an entry in two languages scored by the dense side
alone; agreement, whose word signals do not count for such a pair).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import mode_arguments, publish, shared_folder
from benchmarks.ladder import STATE, as_main, build
from bot.chat.language import KnowledgeLanguage
from bot.config.settings import Settings
from bot.config.variants import replace
from bot.knowledge.entries import load_entries

QUESTIONS = ROOT / "benchmarks" / "data" / "sysu_english.jsonl"


def measure(bot, mode: str, rows: list[dict], field: str) -> tuple[float, float, float, float, float]:
    """(recall@1, recall@3, right answers, wrong answers, gold offered) over ``rows`` asking ``field``; offered =
    nothing passes and a gold entry is among the three closest (the "did you mean" the reply shows)."""
    r1 = r3 = right = wrong = offered = 0
    for row in rows:
        gold = {f"database:{g}" for g in row["gold_ids"]}
        hits, passed = bot.retrieve(row[field], mode=mode, top_k=10)
        ids = [h.entry.id for h in hits]
        r1 += bool(ids[:1] and ids[0] in gold)
        r3 += bool(gold & set(ids[:3]))
        right += bool(passed and passed[0].entry.id in gold)
        wrong += bool(passed and passed[0].entry.id not in gold)
        offered += bool(not passed and gold & set(ids[:3]))
    n = len(rows)
    return r1 / n, r3 / n, right / n, wrong / n, offered / n


def without_dictionary(settings: Settings) -> Settings:
    """``settings`` without the dictionary's renderings of an English message (``retrieval.sparse.translate``)."""
    return replace(settings, "retrieval.sparse.translate", False)


def main(argv: list[str] | None = None) -> int:
    """Run the modes asked for, print the table and (unless --no-write) update BENCHMARKS.md."""
    args = mode_arguments(argv, "sparse,dense-e5,hybrid-e5")
    folder = shared_folder("sysu")
    if folder is None:
        return 0
    entries = load_entries(folder)
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    language = KnowledgeLanguage()
    mismatched = sum(language.mismatch(r["question"], entries) == "zh" for r in rows)
    lines = [
        "| mode | asked as | recall@1 | recall@3 | right answers | wrong answers | gold offered, not answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in args.modes.split(","):
        variants: list[tuple[str, Callable[[Settings], Settings] | None]] = [
            (" (no dictionary)", without_dictionary),
            (" (dictionary)", None),
        ]
        if mode != "sparse":
            variants.insert(0, (" (main)", lambda s: without_dictionary(as_main(s))))
        for suffix, adjust in variants:
            bot, settings = build(entries, STATE / "sysu" / mode, mode, adjust)
            for label, field in (("English (as asked)", "question"), ("Chinese (translated)", "question_zh")):
                r1, r3, right, wrong, offered = measure(bot, settings.retrieval.mode, rows, field)
                lines.append(
                    f"| {mode}{suffix} | {label} | {r1:.3f} | {r3:.3f} | {right:.3f} | {wrong:.3f} | {offered:.3f} |"
                )
    intro = (
        f"`python -m benchmarks.english` · {len(rows)} English questions we wrote over ../shared/data/sysu "
        "(benchmarks/data/sysu_english.jsonl), each also in our own Chinese translation; no LLM weights here, "
        "so *translated* (what the `translate` fallback step searches) uses our translation in place of the "
        "LLM's. Shipped thresholds; right / wrong answers = the first passing hit is / is not gold (an English "
        "question answered wrongly never reaches the fallback step). "
        f"The language check reads {mismatched} of {len(rows)} questions as not in the knowledge's language "
        "(the step and the retrieval-only tip apply to those). *hybrid-e5 (main)* fuses word coverage for any "
        "language, as main did; *(new)* scores a message and an entry written in two languages by the multilingual "
        "dense side alone (`retrieval.hybrid.language_aware`), with agreement; *dense-e5* is the dense "
        "side as its own mode, *(main)* without agreement, *(new)* with it (its word signals do not count for an "
        "entry in another language than the message). Gold offered = nothing passes and a gold entry is among the three closest, which the "
        'reply offers as "did you mean" (with the tip to ask in Chinese).'
    )
    return publish("english", "English questions on a Chinese knowledge base", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
