"""Negative examples: an entry given ``negative_questions`` is no longer answered for them or for
paraphrases of them we wrote apart, and still answers its own questions — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.negatives [--modes sparse,hybrid-e5] [--no-write]

Sets: benchmarks/data/negatives_starter.jsonl (over knowledge/) and negatives_sysu.jsonl (over ../shared/data/sysu),
each line an entry, the negative questions added to it, held-out paraphrases of those, and questions the entry
should still answer. "Answered by the entry" = the first passing hit is that entry (shipped thresholds).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, mode_arguments, publish
from benchmarks.ladder import STATE, build
from bot.knowledge.entries import Entry, load_entries


def answered_by(bot, mode: str, questions: list[str], entry_id: str) -> int:
    """How many of ``questions`` the entry answers (it is the first passing hit)."""
    count = 0
    for q in questions:
        _, passed = bot.retrieve(q, mode=mode)
        count += bool(passed and passed[0].entry.id == entry_id)
    return count


def with_negatives(entries: list[Entry], rows: list[dict]) -> list[Entry]:
    """``entries`` with each row's negative questions added to its entry."""
    extra = {r["entry"]: tuple(r["negative_questions"]) for r in rows}
    return [dataclasses.replace(e, negative_questions=extra.get(e.id, ())) for e in entries]


def main(argv: list[str] | None = None) -> int:
    """Run both sets in the modes asked for; print and (unless --no-write) write the section."""
    args = mode_arguments(argv)
    lines = [
        "| knowledge · mode | negatives | negatives answered by their entry (without → with) | held-out paraphrases "
        "of them (without → with) | the entry's own questions still answered (without → with) |",
        "|---|---|---|---|---|",
    ]
    for name, folder in (("starter", ROOT / "knowledge"), ("sysu", data_dir() / "sysu")):
        if not folder.is_dir():
            continue
        rows = [json.loads(x) for x in (ROOT / f"benchmarks/data/negatives_{name}.jsonl").read_text().splitlines() if x]
        plain = load_entries(folder)
        for mode in args.modes.split(","):
            counts = []
            for entries in (plain, with_negatives(plain, rows)):
                bot, settings = build(entries, STATE / "negatives" / name / mode, mode)
                m = settings.retrieval.mode
                counts.append(
                    [
                        sum(answered_by(bot, m, r[field], r["entry"]) for r in rows)
                        for field in ("negative_questions", "paraphrases", "positives")
                    ]
                )
            totals = [sum(len(r[f]) for r in rows) for f in ("negative_questions", "paraphrases", "positives")]
            cells = [f"{a} → {b} of {t}" for a, b, t in zip(counts[0], counts[1], totals)]
            lines.append(f"| {name} · {mode} | {len(rows)} entries | {' | '.join(cells)} |")
    intro = (
        "`python -m benchmarks.negatives` · entries given `negative_questions` (benchmarks/data/negatives_*.jsonl, "
        "written by us; the paraphrases were not given to the entries), shipped thresholds and "
        "`knowledge.negative_similarity` (0.3). Counts of questions whose first passing hit is the entry."
    )
    return publish("negatives", "Negative examples", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
