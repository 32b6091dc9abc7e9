"""Sparse field weights: recall of the tantivy searcher under several boosts and dis-max tie-breakers.

    .venv/bin/python -m benchmarks.field_weights [--no-write]

Runs on the starter knowledge with benchmarks/data/starter_eval.jsonl (always present) and, when
../shared/data is there, on CMRC 2018 trial and the first 1,500 LCQMC questions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, data_dir, write_section
from bot.evaluation import EvalQuestion, first_gold_rank, load_eval_set, mrr_at, recall_at
from bot.knowledge import Entry, load_entries
from bot.search.tantivy_searcher import TantivySearcher
from bot.text import Tokenizer

VARIANTS = [
    ({"query": 3.0, "metadata": 2.0, "document": 1.0}, 0.0),
    ({"query": 3.0, "metadata": 2.0, "document": 1.0}, 0.3),
    ({"query": 3.0, "metadata": 2.0, "document": 1.0}, 1.0),
    ({"query": 2.0, "metadata": 1.0, "document": 1.0}, 0.0),
    ({"query": 2.0, "metadata": 1.0, "document": 1.0}, 0.3),
    ({"query": 2.0, "metadata": 1.0, "document": 1.0}, 1.0),
    ({"query": 1.0, "metadata": 1.0, "document": 1.0}, 0.3),
    ({"query": 1.0, "metadata": 1.0, "document": 1.0}, 1.0),
]


def starter_set() -> tuple[list[Entry], list[EvalQuestion]]:
    """The shipped knowledge and its on-topic eval questions."""
    rows = [json.loads(line) for line in open(ROOT / "benchmarks/data/starter_eval.jsonl", encoding="utf-8") if line.strip()]
    return load_entries(ROOT / "knowledge"), [EvalQuestion(r["question"], frozenset(r["gold_ids"])) for r in rows if r["gold_ids"]]


def score(tokenizer: Tokenizer, entries: list[Entry], questions: list[EvalQuestion], boosts: dict, tie: float) -> tuple:
    """(recall@1, recall@5, MRR@10) of one variant."""
    with tempfile.TemporaryDirectory() as tmp:
        searcher = TantivySearcher(Path(tmp) / "t", tokenizer, boosts, tie)
        searcher.sync(entries)
        ranks = [first_gold_rank([h.entry.id for h in searcher.search(q.question, 10)], q.gold) for q in questions]
    return recall_at(ranks, 1), recall_at(ranks, 5), mrr_at(ranks)


def main(argv=None) -> int:
    """Print the table and write it to BENCHMARKS.md."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    starter = starter_set()
    sets = {f"starter ({len(starter[1])} q)": starter}
    data = data_dir()
    if (data / "cmrc2018_trial").is_dir():
        cm = load_eval_set(data / "cmrc2018_trial")
        sets[f"cmrc2018_trial ({len(cm.questions)} q)"] = (cm.entries, cm.questions)
        lc = load_eval_set(data / "lcqmc_dev")
        sets["lcqmc_dev (1500 q)"] = (lc.entries, lc.questions[:1500])
    else:
        print(f"note: {data} not found; only the starter knowledge is measured", file=sys.stderr)
    tokenizer = Tokenizer()
    tokenizer.add_words(w for entries, _ in sets.values() for e in entries for w in e.metadata)
    head = "| boosts q/m/d | tie_breaker | " + " | ".join(f"{name} R@1 / R@5 / MRR" for name in sets) + " |"
    lines = [head, "|" + "---|" * (2 + len(sets))]
    for boosts, tie in VARIANTS:
        cells = [" / ".join(f"{x:.3f}" for x in score(tokenizer, e, q, boosts, tie)) for e, q in sets.values()]
        lines.append(f"| {boosts['query']:g}/{boosts['metadata']:g}/{boosts['document']:g} | {tie:g} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    body = ("## Sparse field weights\n\nOne run of `python -m benchmarks.field_weights`: tantivy BM25 with per-field boosts "
            "(query / metadata / document) and the dis-max tie-breaker (0 = best field only, 1 = fields add up). "
            "The default in config.yaml is 2/1/1 with tie_breaker 0.3.\n\n" + "\n".join(lines))
    if not args.no_write:
        write_section("field-weights", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
