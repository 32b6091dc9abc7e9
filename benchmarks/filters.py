"""Category filters: random filtered questions never get an entry outside the filter, a filtered
search equals the unfiltered ranking restricted to the filter, and what it costs — one run, one BENCHMARKS.md
section.

    .venv/bin/python -m benchmarks.filters [--modes sparse,hybrid-e5] [--queries 1000] [--no-write]

Knowledge: ../shared/data/sysu (342 entries; or the starter knowledge when absent), given categories for this run:
each entry one of 8 (by a hash of its id), a fifth of them a second one. Questions: benchmarks/data/sysu_eval.jsonl
(the starter set's ladder messages when sysu is absent), drawn at random with a random filter of 1 to 3 categories.
Every turn goes through the product's ``Bot.answer`` (retrieval-only, shipped thresholds); "outside" counts the
hits, candidates and options of a turn that the filter does not admit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, publish
from benchmarks.ladder import STATE, build
from bot.knowledge.entries import Entry, load_entries
from bot.knowledge.filters import EntryFilter, entry_filter

CATEGORIES = [f"c{i}" for i in range(8)]


def categorised(entries: list[Entry]) -> list[Entry]:
    """``entries`` with one category each by a hash of the id, and a second one for about a fifth of them."""
    out = []
    for e in entries:
        h = zlib.crc32(e.id.encode("utf-8"))
        names = [CATEGORIES[h % 8]] + ([CATEGORIES[(h >> 8) % 8]] if (h >> 16) % 5 == 0 else [])
        out.append(dataclasses.replace(e, categories=tuple(dict.fromkeys(names))))
    return out


def questions() -> tuple[str, list[str]]:
    """(knowledge name, questions) for the run."""
    sysu = ROOT / "benchmarks" / "data" / "sysu_eval.jsonl"
    if (data_dir() / "sysu").is_dir():
        return "sysu", [json.loads(x)["question"] for x in sysu.read_text(encoding="utf-8").splitlines() if x]
    starter = ROOT / "benchmarks" / "data" / "ladder_starter.jsonl"
    return "starter", [json.loads(x)["question"] for x in starter.read_text(encoding="utf-8").splitlines() if x]


def shown(answer, by_id: dict[str, Entry]) -> list[Entry]:
    """Every entry a turn shows or offers: its hits, its candidates, its options (looked up by id: an option need
    not be a candidate, e.g. a popular entry in the "did you mean")."""
    return [h.entry for h in [*answer.hits, *answer.candidates]] + [by_id[o.id] for o in answer.options]


def run(mode: str, entries: list[Entry], asked: list[str], count: int, seed: int) -> dict[str, float]:
    """The counts and timings of ``count`` random filtered questions in ``mode``."""
    bot, settings = build(entries, STATE / "filters" / mode, mode)
    m = settings.retrieval.mode
    by_id = {e.id: e for e in entries}
    rng = random.Random(seed)
    outside = same = total = answered = 0
    plain_ms: list[float] = []
    filtered_ms: list[float] = []
    for _ in range(count):
        question = rng.choice(asked)
        within = entry_filter(rng.sample(CATEGORIES, rng.randint(1, 3)))
        assert isinstance(within, EntryFilter)
        t = time.perf_counter()
        bot.retrieve(question, mode=m)
        plain_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        hits, _ = bot.retrieve(question, mode=m, within=within)
        filtered_ms.append((time.perf_counter() - t) * 1000)
        answer = bot.answer(question, mode=m, within=within)
        outside += sum(not within.admits(e) for e in [*(h.entry for h in hits), *shown(answer, by_id)])
        answered += answer.decision.value == "answer"
        # The searcher's contract: its filtered top 5 are the unfiltered ranking's first 5 admitted entries (a
        # split message's parts are merged by the turn, at a depth that depends on top_k: not compared here).
        searcher = bot.index.searcher(m)
        restricted = [h.entry.id for h in searcher.search(question, len(entries)) if within.admits(h.entry)]
        total += 1
        same += restricted[:5] == [h.entry.id for h in searcher.search(question, 5, within)]
    return {
        "outside": outside,
        "same": same / total if total else 1.0,
        "answered": answered / count,
        "plain_p50": statistics.median(plain_ms),
        "filtered_p50": statistics.median(filtered_ms),
        "filtered_p95": sorted(filtered_ms)[int(0.95 * len(filtered_ms)) - 1],
    }


def main(argv: list[str] | None = None) -> int:
    """Run each mode; print and (unless --no-write) write the section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="sparse,hybrid-e5")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    name, asked = questions()
    folder = data_dir() / "sysu" if name == "sysu" else ROOT / "knowledge"
    entries = categorised(load_entries(folder))
    lines = [
        "| mode | filtered questions | entries shown outside the filter | searcher's filtered top 5 = unfiltered "
        "ranking's first 5 admitted | answered | search p50 unfiltered → filtered (ms) | filtered p95 (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in args.modes.split(","):
        r = run(mode, entries, asked, args.queries, args.seed)
        lines.append(
            f"| {mode} | {args.queries} | {r['outside']} | {r['same']:.3f} | {r['answered']:.3f} | "
            f"{r['plain_p50']:.1f} → {r['filtered_p50']:.1f} | {r['filtered_p95']:.1f} |"
        )
    intro = (
        f"`python -m benchmarks.filters` · {name} knowledge ({len(entries)} entries) given 8 categories by a hash of "
        "each id (a fifth of the entries in two); questions from "
        f"{'benchmarks/data/sysu_eval.jsonl' if name == 'sysu' else 'benchmarks/data/ladder_starter.jsonl'} drawn "
        f"at random (seed {args.seed}) with a random filter of 1-3 categories; every turn through `Bot.answer`, "
        "retrieval-only, shipped thresholds. *Outside* counts every hit, candidate and option of the filtered search "
        "and of the turn that the filter does not admit. Timings are `Bot.retrieve` in one process, one after the "
        "other on the same question."
    )
    return publish("filters", "Category filters", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
