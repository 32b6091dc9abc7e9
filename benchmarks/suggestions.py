"""Suggested phrasings from replayed traffic — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.suggestions [--modes sparse,hybrid-e5] [--no-write]

Traffic: the answerable questions of benchmarks/data/sysu_eval.jsonl over ../shared/data/sysu, each in its own
conversation through the product's Bot (retrieval-only, shipped ladder, real conversation log). When the reply is a
clarify or confirm question, or a miss with "did you mean" options, and a gold entry is offered, the simulated user
picks it (the option's number, "是", or a click on the suggestion). The suggestions are then read from the log,
checked against the gold, all accepted, and recall@1 is measured on held-out paraphrases: the answerable messages
of benchmarks/data/ladder_sysu.jsonl (written separately), before and after.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import mode_arguments, publish, shared_folder
from benchmarks.ladder import STATE, build
from bot.conversations.suggestions import suggestions
from bot.factory import build_knowledge_base
from bot.knowledge.entries import load_entries


def questions(name: str, id_prefix: str) -> list[tuple[str, frozenset[str]]]:
    """(question, gold entry ids) of the answerable rows of a question file over the sysu knowledge."""
    rows = [json.loads(x) for x in (ROOT / "benchmarks" / "data" / name).read_text(encoding="utf-8").splitlines() if x]
    return [
        (r["question"], frozenset(g if ":" in g else f"{id_prefix}{g}" for g in r["gold_ids"]))
        for r in rows
        if r.get("kind") == "answerable"
    ]


def recall_at_1(bot, mode: str, asked: list[tuple[str, frozenset[str]]]) -> float:
    """Share of questions whose first hit is gold."""
    right = sum(bool((hits := bot.retrieve(q, mode=mode)[0]) and hits[0].entry.id in gold) for q, gold in asked)
    return right / len(asked) if asked else 0.0


def replay(kb, mode: str, traffic: list[tuple[str, frozenset[str]]]) -> int:
    """Run the traffic; the simulated user resolves every offer that holds a gold entry. Returns the resolutions."""
    resolved = 0
    for n, (question, gold) in enumerate(traffic):
        session = f"t{n}"
        first = kb.ask(question, mode=mode, session=session, source="api")
        offered = [i for i, o in enumerate(first.options) if o.id in gold]
        if not offered:
            continue
        pick = first.options[offered[0]]
        decision = first.decision.value
        reply = {"clarify": str(offered[0] + 1), "confirm": "是"}.get(decision, pick.question)
        history = [{"role": "user", "content": question}, {"role": "assistant", "content": first.text}]
        second = kb.ask(reply, history, mode=mode, session=session, source="api")
        resolved += bool(second.hits and second.hits[0].entry.id == pick.id)
    return resolved


def main(argv: list[str] | None = None) -> int:
    """Replay, suggest, accept, measure; print and (unless --no-write) write the section."""
    args = mode_arguments(argv)
    folder = shared_folder("sysu")
    if folder is None:
        return 0
    entries = load_entries(folder)
    traffic = questions("sysu_eval.jsonl", "database:")
    heldout = questions("ladder_sysu.jsonl", "database:")
    lines = [
        "| mode | traffic questions | resolved by the user | suggestions | on a gold entry | resolutions counted "
        "| held-out R@1 before → after (all) | held-out R@1 before → after (entries given a phrasing) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in args.modes.split(","):
        work = STATE / "suggestions" / mode
        for part in ("log", "tantivy", "faiss", "history"):  # a fresh start: BM25 statistics count deleted docs
            shutil.rmtree(work / "state" / part, ignore_errors=True)
        bot, settings = build(entries, work, mode)
        m = settings.retrieval.mode
        before = recall_at_1(bot, m, heldout)
        kb = build_knowledge_base(settings, bot)
        resolved = replay(kb, m, traffic)
        assert kb.recorder.log is not None
        found = suggestions(kb.recorder.log, bot.index.entries)
        gold_of = dict(traffic)
        on_gold = sum(s.entry_id in gold_of.get(s.question, frozenset()) for s in found)
        given = {s.entry_id for s in found}
        subset = [(q, g) for q, g in heldout if g & given]
        subset_before = recall_at_1(bot, m, subset)  # the knowledge is unchanged until the suggestions are accepted
        editor = kb.editor
        for s in found:
            editor.add_phrasing(s.entry_id, s.question)
        lines.append(
            f"| {mode} | {len(traffic)} | {resolved} | {len(found)} | {on_gold} | {sum(s.count for s in found)} "
            f"| {before:.3f} → {recall_at_1(bot, m, heldout):.3f} "
            f"| {subset_before:.3f} → {recall_at_1(bot, m, subset):.3f} ({len(subset)} questions) |"
        )
    intro = (
        "`python -m benchmarks.suggestions` · traffic: the 130 answerable questions of benchmarks/data/sysu_eval.jsonl "
        "over ../shared/data/sysu, one conversation each, retrieval-only with the shipped ladder; the simulated user "
        "picks a gold entry whenever one is offered (clarify number, confirmation, did-you-mean click). Suggestions "
        "are read from the real conversation log and all accepted; held-out: the 85 answerable messages of "
        "benchmarks/data/ladder_sysu.jsonl."
    )
    return publish("suggestions", "Suggested phrasings from traffic", intro, lines, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
