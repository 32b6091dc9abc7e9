"""Messages in traditional Chinese over simplified knowledge — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.traditional [--baseline CHECKOUT] [--modes sparse,hybrid-e5,dense-e5] [--no-write]

Messages: benchmarks/data/traditional_sysu.jsonl and traditional_starter.jsonl, written by hand in traditional
characters the way a visitor from Hong Kong, Macau or Taiwan types (網址, 飯堂, 軟體, 串接, 訊息, a few in Cantonese:
係咩, 喺邊度), each a rewrite of one ladder message whose gold it keeps; and every ladder message converted by OpenCC's
``s2hk`` (a machine conversion, so the fold that reads it back, OpenCC's ``t2s``, is close to its inverse: the
hand-written messages are the test). Every message goes through ``Bot.answer``, retrieval-only, in a fresh process of
each checkout: this tree, and ``--baseline`` (its own code and config.yaml, e.g. the commit before the fold), each
with its own state folder. *as written* is the ladder message the traditional one rewrites, on this tree: what the
same question gets in simplified characters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, publish
from benchmarks.ladder import STATE, Message, Turn, knowledge_sets, row, scores

DATA = ROOT / "benchmarks" / "data"
WORK = STATE.parent / "traditional"
HEADER = [
    "| knowledge · mode · messages · code | wrong / 100 | right / 100 | right or gold offered / 100 "
    "| clarify + confirm / 100 | gold in options | chit-chat P / R | hand-off P / R | look-alikes misread |",
    "|---|---|---|---|---|---|---|---|---|",
]

# Run in a fresh process inside the checkout it measures: argv is the knowledge folder, the work folder and the
# mode; stdin the messages (a JSON list); stdout one [decision, answered, options] per message. It uses only what
# the ladder benchmark of every checkout since the ladder has had.
CHILD = """
import json, sys
from pathlib import Path
from benchmarks.ladder import build, reported
from bot.knowledge.entries import load_entries

folder, work, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
questions = json.loads(sys.stdin.read())
bot, settings = build(load_entries(folder), work, mode)
turns = [reported(bot.answer(q, mode=settings.retrieval.mode)) for q in questions]
print(json.dumps([[t.decision, t.answered, list(t.options)] for t in turns], ensure_ascii=False))
"""


def turns(checkout: Path, label: str, name: str, mode: str, questions: Sequence[str]) -> list[Turn]:
    """The ladder's turn for each of ``questions`` from the code of ``checkout`` (one fresh process)."""
    folder = data_dir() / "sysu" if name == "sysu" else checkout / "knowledge"
    command = [sys.executable, "-c", CHILD, str(folder), str(WORK / label / name / mode), mode]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        command, cwd=checkout, env=env, input=json.dumps(list(questions)), capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{label} failed on {name} {mode}:\n{out.stderr[-2000:]}")
    return [Turn(d, a, tuple(o)) for d, a, o in json.loads(out.stdout.strip().splitlines()[-1])]


def written(path: Path) -> tuple[list[Message], list[str], list[str]]:
    """The hand-written messages of ``path``, the ladder id each rewrites and each one's style."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    messages = [Message(r["id"], r["question"], r["kind"], frozenset(r["gold_ids"]), r["split"]) for r in rows]
    return messages, [r["source"] for r in rows], [r["style"] for r in rows]


def converted(messages: Sequence[Message]) -> list[Message]:
    """``messages`` in traditional characters as OpenCC's ``s2hk`` writes them."""
    import opencc

    s2hk = opencc.OpenCC("s2hk")
    return [Message(m.id, s2hk.convert(m.question), m.kind, m.gold, m.split) for m in messages]


def main(argv: list[str] | None = None) -> int:
    """Measure and publish the section."""
    p = argparse.ArgumentParser()
    p.add_argument("--baseline", type=Path, help="a checkout of the code before the fold, measured beside this one")
    p.add_argument("--modes", default="sparse,hybrid-e5,dense-e5")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    base = ""
    if args.baseline is not None:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=args.baseline, capture_output=True, text=True
        )
        base = head.stdout.strip() or args.baseline.name
    started = time.time()
    lines = list(HEADER)
    notes = []
    for name, _, ladder in knowledge_sets(["sysu", "starter"]):
        by_id = {m.id: m for m in ladder}
        hand, sources, styles = written(DATA / f"traditional_{name}.jsonl")
        simple = [by_id[s] for s in sources]
        machine = converted(ladder)
        for mode in args.modes.split(","):
            now_simple = turns(ROOT, "this", name, mode, [m.question for m in simple])
            chains = [(f"{name} · {mode} · as written ({len(simple)}, simplified) · this", simple, now_simple)]
            checkouts = ([(base, args.baseline)] if args.baseline is not None else []) + [("this", ROOT)]
            for label, checkout in checkouts:
                got = turns(checkout, label, name, mode, [m.question for m in hand + machine])
                tag = "**this**" if label == "this" else label
                chains.append((f"{name} · {mode} · hand-written ({len(hand)}) · {tag}", hand, got[: len(hand)]))
                chains.append((f"{name} · {mode} · s2hk ({len(machine)}) · {tag}", machine, got[len(hand) :]))
                cantonese = [(m, t) for m, t, s in zip(hand, got, styles) if s == "cantonese"]
                if cantonese:
                    right = sum(t.decision == "answer" and t.answered in m.gold for m, t in cantonese)
                    offered = sum(t.decision != "answer" and bool(m.gold & set(t.options)) for m, t in cantonese)
                    notes.append(f"{name} · {mode} · {label}: {right} right, {offered} offered of {len(cantonese)}")
            for label, messages, got in chains:
                lines.append(row(label, scores(messages, got)))
            print(lines[-1], flush=True)
    lines += [
        "",
        "The Cantonese messages among the hand-written ones (係咩, 喺邊度, 係邊個: words, not only characters, "
        "differ from Mandarin; the fold does not translate them): " + "; ".join(notes) + ".",
        "",
        f"Whole run {(time.time() - started) / 60:.1f} min, 2 CPUs shared with other work.",
    ]
    command = (
        f"python -m benchmarks.traditional --baseline <checkout of {base}>"
        if base
        else "python -m benchmarks.traditional"
    )
    intro = (
        f"`{command}` · messages in traditional characters "
        "over the simplified knowledge of ../shared/data/sysu and knowledge/ (starter). *hand-written*: "
        "benchmarks/data/traditional_*.jsonl, written by us the way a visitor from Hong Kong, Macau or Taiwan types "
        "(網址, 飯堂, 軟體, 串接, 訊息; a few in Cantonese), each rewriting one ladder message and keeping its gold; "
        "nothing was tuned on them. *s2hk*: every ladder message converted by OpenCC `s2hk` (a machine conversion "
        "that the fold, OpenCC `t2s`, nearly inverts). *as written*: the ladder messages the hand-written ones "
        "rewrite, in simplified characters, on this tree. "
        + (f"*{base}*: the code before the fold, in its own process and state; " if base else "")
        + "*this*: every matching form (tokens, agreement, chit-chat, hand-off, type-ahead, e5 input) reads "
        "traditional characters as simplified (bot/search/script.py). Retrieval-only, shipped thresholds; columns as "
        'in "The decision ladder".'
    )
    return publish("traditional", "Traditional Chinese messages", intro, lines, not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
