"""``python -m bot testset``: labelled test sets kept in the state folder, run on the current knowledge, with a
history of runs and what changed since the previous one (bot/evaluation/testsets.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_testset_arguments(p) -> None:
    """Actions of ``testset``: add NAME FILE, run NAME, history NAME, list."""
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="store a test set (CSV: question,expected; or eval JSON lines)")
    add.add_argument("name")
    add.add_argument("file")
    run = sub.add_parser("run", help="run a stored test set on the current knowledge (in --mode, default config)")
    run.add_argument("name")
    run.add_argument("--json", action="store_true")
    history = sub.add_parser("history", help="the runs of a test set, newest first")
    history.add_argument("name")
    sub.add_parser("list", help="the stored test sets")


def store_path(settings) -> Path:
    """Where test sets and their runs are kept."""
    return settings.resolve(settings.state_dir) / "testsets.sqlite"


def run_testset(settings, args) -> int:
    """Run one ``testset`` action; 0 done, 2 (reason on stderr) on a bad file or an unknown name."""
    from bot.evaluation.testsets import TestSetStore, diff
    from bot.factory import build_bot

    store = TestSetStore(store_path(settings))
    if args.action == "list":
        print("\n".join(store.names()) or "(none)")
        return 0
    if args.action == "history":
        for r in store.history(args.name):
            print(f"{r.time} · {r.mode} · R@1 {r.summary['recall']['1']:.3f} · wrong/100 {r.summary['wrong_per_100']}")
        return 0
    bot = build_bot(settings, llm=None)
    if args.action == "add":
        path = Path(args.file)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"错误 / error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        count = store.save(args.name, path.name, text, bot.index.entries)
        print(f"已保存 / Saved test set {args.name}: {count} questions")
        return 0
    previous = next(iter(store.history(args.name, 1)), None)
    current = store.run(args.name, bot, args.mode or settings.mode)
    changed = diff(previous, current)
    if args.json:
        print(json.dumps({"summary": current.summary, "better": changed.better, "worse": changed.worse}, indent=2))
        return 0
    s = current.summary
    print(
        f"{args.name} · {current.mode} · {s['questions']} questions · R@1 {s['recall']['1']:.3f} · R@3 "
        f"{s['recall']['3']:.3f} · wrong/100 {s['wrong_per_100']} · decision F1 {s['decision_f1']:.3f}"
    )
    print(f"better since the last run: {', '.join(changed.better) or '-'}; worse: {', '.join(changed.worse) or '-'}")
    return 0
