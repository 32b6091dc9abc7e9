"""Question splitting on/off: recall of two-question messages built from the starter eval questions.

    .venv/bin/python -m benchmarks.splitting [--pairs 200] [--modes sparse,dense,hybrid] [--no-write]

Each message joins two on-topic questions with disjoint gold entries by a Chinese comma ("A，B"), as a
user asking two things at once would. A gold is found at k when it is among the first k hits of
Bot.retrieve; "both@k" counts messages where both parts' golds are found.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile

from benchmarks.common import ROOT, write_section
from bot.config.settings import load_settings
from bot.config.variants import replace
from bot.factory import build_bot


def pairs(n: int, seed: int = 0) -> list[tuple[str, set[str], set[str]]]:
    """``n`` seeded pairs of starter questions with disjoint gold sets, joined by '，'."""
    text = (ROOT / "benchmarks/data/starter_eval.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    rows = [r for r in rows if r["gold_ids"]]
    rng = random.Random(seed)
    out: list[tuple[str, set[str], set[str]]] = []
    while len(out) < n:
        a, b = rng.sample(rows, 2)
        if set(a["gold_ids"]) & set(b["gold_ids"]):
            continue
        message = f"{a['question'].rstrip('？?。.!！')}，{b['question']}"
        out.append((message, set(a["gold_ids"]), set(b["gold_ids"])))
    return out


def measure(bot, mode: str, cases, ks=(5, 10)) -> dict[str, float]:
    """Gold recall@k and both@k for one configured bot."""
    found = {k: 0 for k in ks}
    both = {k: 0 for k in ks}
    for message, gold_a, gold_b in cases:
        ids = [h.entry.id for h in bot.retrieve(message, mode, top_k=bot.search.top_k)[0]]
        for k in ks:
            top = set(ids[:k])
            hit_a, hit_b = bool(top & gold_a), bool(top & gold_b)
            found[k] += hit_a + hit_b
            both[k] += hit_a and hit_b
    n = len(cases)
    return {**{f"recall@{k}": found[k] / (2 * n) for k in ks}, **{f"both@{k}": both[k] / n for k in ks}}


def main(argv=None) -> int:
    """Print the table and write it to BENCHMARKS.md."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=200)
    p.add_argument("--modes", default="sparse,dense,hybrid")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    cases = pairs(args.pairs)
    lines = ["| mode | splitting | gold recall@5 | gold recall@10 | both@5 | both@10 |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(ROOT / "config.yaml")
        settings = replace(settings, "state_dir", tmp)
        settings = replace(settings, "knowledge.path", str(ROOT / "knowledge"))
        bot = build_bot(settings, llm=None)
        splitter = bot.search.splitter
        for mode in args.modes.split(","):
            for label, split in (("off", None), ("on", splitter)):
                bot.search.splitter = split
                r = measure(bot, mode, cases)
                lines.append(
                    f"| {mode} | {label} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | {r['both@5']:.3f} | {r['both@10']:.3f} |"
                )
                print(lines[-1], flush=True)
    body = (
        f"## Question splitting\n\nOne run of `python -m benchmarks.splitting`: {len(cases)} messages, each two "
        "starter-eval questions (disjoint gold entries) joined by '，'; `top_k` 5 from config. With splitting the "
        "bot searches the whole message and each part and merges by entry (best score, each part's best hits "
        "first), so it can return up to top_k × parts hits.\n\n" + "\n".join(lines)
    )
    if not args.no_write:
        write_section("splitting", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
