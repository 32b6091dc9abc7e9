"""Messages with a pinyin typo (a character of the same sound) — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.homophones [--modes sparse,hybrid-e5] [--no-write]

Messages: benchmarks/data/homophones_sysu.jsonl and homophones_starter.jsonl, written by hand: ladder messages with
one character of a word replaced by another of the same pinyin, as an input method offers it (效训 for 校训, 地只
for 地址, 图书管 for 图书馆), a few left as they were; each keeps the ladder message's gold. Every message goes
through ``Bot.answer``, retrieval-only, with ``retrieval.sparse.homophones`` off and on, on the same index; the ladder
sets' own messages (benchmarks/data/ladder_*.jsonl, all splits) go through the same two chains, to show what the
reading does to messages typed right.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import mode_arguments, publish
from benchmarks.ladder import STATE, Message, Turn, build, knowledge_sets, load_messages, reported, row, scores
from bot.chat.bot import Bot
from bot.config.settings import Settings
from bot.config.variants import replace

DATA = ROOT / "benchmarks" / "data"
HEADER = [
    "| knowledge · mode · messages · homophones | wrong / 100 | right / 100 | right or gold offered / 100 "
    "| clarify + confirm / 100 | gold in options | chit-chat P / R | hand-off P / R | look-alikes misread |",
    "|---|---|---|---|---|---|---|---|---|",
]


def reading(on: bool) -> Callable[[Settings], Settings]:
    """Settings with ``retrieval.sparse.homophones`` set to ``on``."""
    return lambda settings: replace(settings, "retrieval.sparse.homophones", on)


def decided(bot: Bot, messages: list[Message], mode: str) -> list[Turn]:
    """The ladder's turn for each message (fresh conversations, retrieval-only)."""
    turns = [reported(bot.answer(m.question, mode=mode)) for m in messages]
    found = [t for t in turns if t is not None]
    if len(found) != len(turns):
        raise SystemExit("the bot reported no decision: this benchmark needs the ladder")
    return found


def main(argv: list[str] | None = None) -> int:
    """Measure and publish the section."""
    args = mode_arguments(argv)
    started = time.time()
    lines = list(HEADER)
    for name, entries, ladder in knowledge_sets(["sysu", "starter"]):
        mistyped = load_messages(DATA / f"homophones_{name}.jsonl")
        for mode in args.modes.split(","):
            for on in (False, True):
                bot, settings = build(entries, STATE / name / mode, mode, reading(on))
                for label, messages in ((f"typed ({len(mistyped)})", mistyped), (f"ladder ({len(ladder)})", ladder)):
                    turns = decided(bot, messages, settings.retrieval.mode)
                    tag = "**on**" if on else "off"
                    lines.append(row(f"{name} · {mode} · {label} · {tag}", scores(messages, turns)))
                    print(lines[-1], flush=True)
    lines += ["", f"Whole run {(time.time() - started) / 60:.1f} min, 2 CPUs shared with other work."]
    intro = (
        "`python -m benchmarks.homophones` · *typed*: benchmarks/data/homophones_*.jsonl, ladder messages we retyped "
        "by hand with one character of a word replaced by another of the same pinyin, as an input method offers it "
        "(效训 for 校训, 地只 for 地址, 专叶 for 专业; a few left as they were), over ../shared/data/sysu and "
        "knowledge/ (starter), each keeping its gold; nothing was tuned on them. *ladder*: the ladder sets' own "
        "messages (all splits). *off* / *on*: `retrieval.sparse.homophones`, the same index and thresholds "
        "(bot/search/homophones.py: a run of the message no word of the knowledge holds is also searched as the one "
        "knowledge word that differs from it in one character of the same sound). Retrieval-only; columns as in "
        '"The decision ladder".'
    )
    return publish("homophones", "Typos of the same sound", intro, lines, not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
