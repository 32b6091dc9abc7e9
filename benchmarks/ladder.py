"""The decision ladder on visitor-style messages, beside today's chain — one run, one BENCHMARKS.md section.

    .venv/bin/python -m benchmarks.ladder [--sets sysu,starter] [--modes sparse,hybrid-e5,dense-e5] [--no-write]

Messages: benchmarks/data/ladder_sysu.jsonl (over ../shared/data/sysu, or $KBBOT_DATA; skipped when absent) and
ladder_starter.jsonl (over knowledge/), each answerable, unanswerable, chit-chat, hand-off and look-alike messages
(benchmarks/data/README.md). Every message goes through the product's Bot.answer, retrieval-only (no LLM), in a
fresh conversation; the tuning messages (benchmarks/data/tune_*.jsonl) go through the same chains and are reported
apart. Four chains are compared in one run:

- today: answer the top passing hit, else fall back (what the bot did before the ladder);
- today + rungs 1-2: the hand-off matcher, then the chit-chat matcher (bot/handoff/requests.py, bot/chat/chitchat.py) in front
  of today's chain — measurable before the ladder is merged;
- ladder (main): ``Answer.decision`` and ``Answer.options`` as the bot reports them with the ladder and thresholds
  main shipped before agreement (``MAIN_CUTOFFS``, :func:`as_main`);
- ladder (before): the ladder with the thresholds and agreement weights shipped before the sharper decisions
  (``BEFORE_CUTOFFS``, ``BEFORE_AGREEMENT``: main f41edd5), for a side-by-side in the same run;
- ladder (new): the same with everything shipped now (agreement, language-aware hybrid, the retuned thresholds).

*today* is the main bot with ``ladder.steps: [answer]`` and the answer thresholds shipped before the ladder
(``TODAY_ANSWER``).

Per 100 messages: wrong answers (answered from a non-gold entry, or answered when no entry should be), right answers,
clarify + confirm; gold-in-options = share of clarify/confirm turns on a message with gold whose options hold a gold
entry; precision/recall of the chit-chat and hand-off decisions; look-alikes read as chit-chat or hand-off.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, published, published_build, write_section
from bot.chat.chitchat import ChitChat
from bot.config.settings import CutoffSettings, Settings, load_settings
from bot.config.variants import replace, update
from bot.handoff.requests import is_handoff_request
from bot.knowledge.entries import Entry, load_entries, write_entries
from tests.support.knowledge import with_agreement, with_cutoffs, with_thresholds

STATE = ROOT / ".state" / "bench" / "ladder"
# The answer thresholds shipped before the ladder (best F1 over four knowledge bases): today's chain.
TODAY_ANSWER = {"sparse": 0.34, "hybrid-e5": 0.81, "hybrid-openai": 0.81, "dense-e5": 0.87}
# The ladder's cutoffs shipped before agreement (main d09645f): the "ladder (main)" rows.
MAIN_CUTOFFS = {
    "sparse": CutoffSettings(answer=0.49),
    "hybrid-e5": CutoffSettings(answer=0.838, clarify=0.005),
    "dense-e5": CutoffSettings(answer=0.87),
}
# The cutoffs and agreement weights shipped with agreement, before the decisions were sharpened (main f41edd5).
BEFORE_CUTOFFS = {
    "sparse": CutoffSettings(answer=0.47, clarify=0.0, unsure=0.15, stand_in=0.2),
    "hybrid-e5": CutoffSettings(answer=0.83, clarify=0.005, unsure=0.01, stand_in=0.06),
    # dense-e5 had no agreement and only its answer threshold until main e0e71c3
    "dense-e5": CutoffSettings(answer=0.87, stand_in=0.1),
}
BEFORE_AGREEMENT: dict[str, dict[str, float]] = {
    "sparse": {"backward": 0.03, "conflict": 0.3, "other": 0.06, "missing": 0.02},
    "hybrid-e5": {"conflict": 0.1, "other": 0.15, "missing": 0.02, "added": 0.05},
    "dense-e5": {},
}


@dataclass(frozen=True)
class Message:
    """One labelled message of a ladder set."""

    id: str
    question: str
    kind: str
    gold: frozenset[str]
    split: str


@dataclass(frozen=True)
class Turn:
    """What a chain decided for one message: the decision, the entry answered from, the entries offered."""

    decision: str
    answered: str | None = None
    options: tuple[str, ...] = ()


def load_messages(path: Path) -> list[Message]:
    """The labelled messages of one ladder file."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Message(r["id"], r["question"], r["kind"], frozenset(r["gold_ids"]), r["split"]) for r in rows]


def knowledge_sets(names: list[str]) -> list[tuple[str, list[Entry], list[Message]]]:
    """(name, entries, messages) of each requested set whose knowledge is present."""
    out = []
    for name in names:
        folder = data_dir() / "sysu" if name == "sysu" else ROOT / "knowledge"
        if not folder.is_dir():
            print(f"{name} skipped: {folder} not found", file=sys.stderr)
            continue
        out.append((name, load_entries(folder), load_messages(ROOT / "benchmarks" / "data" / f"ladder_{name}.jsonl")))
    return out


def build(entries: list[Entry], work: Path, mode: str, adjust: Callable[[Settings], Settings] | None = None):
    """A retrieval-only Bot over ``entries`` in ``mode`` ("sparse", "hybrid-e5", "dense-fasttext"...), its settings
    changed by ``adjust`` (e.g. :func:`as_main`)."""
    from bot.factory import build_bot

    knowledge = work / "knowledge"
    if knowledge.exists():
        shutil.rmtree(knowledge)
    write_entries(entries, knowledge)
    settings = load_settings(ROOT / "config.yaml")
    settings = update(settings, {"knowledge.path": str(knowledge), "state_dir": str(work / "state")})
    kind, _, encoder = mode.partition("-")
    settings = replace(settings, "retrieval.mode", kind)
    if encoder:
        settings = replace(settings, "retrieval.dense.encoder", encoder)
    if adjust is not None:
        settings = adjust(settings)
    return build_bot(settings, llm=None), settings


def as_before(settings: Settings) -> Settings:
    """``settings`` with the cutoffs and agreement weights shipped before the decisions were sharpened (and no
    dictionary for English messages, which came after)."""
    for system, cutoffs in BEFORE_CUTOFFS.items():
        settings = with_agreement(with_thresholds(settings, system, cutoffs), system, **BEFORE_AGREEMENT[system])
    return replace(settings, "retrieval.sparse.translate", False)


def shipped_values() -> str:
    """The shipped cutoffs and agreement weights of sparse, hybrid-e5 and dense-e5, as the section's text names
    them."""
    retrieval = load_settings(ROOT / "config.yaml").retrieval
    parts = []
    for system in ("sparse", "hybrid-e5", "dense-e5"):
        c, w = retrieval.thresholds[system], retrieval.agreement[system]
        cuts = ", ".join(
            k if v is True else f"{k} {v:g}"
            for k, v in c.model_dump().items()
            if v is not None and v is not False and k != "stand_in"
        )
        weights = ", ".join(f"{k} {v:g}" for k, v in w.model_dump().items() if v)
        parts.append(f"{system} {cuts} (agreement: {weights})")
    return "; ".join(parts)


def as_main(settings: Settings) -> Settings:
    """``settings`` as main shipped them before agreement: its thresholds for sparse, hybrid-e5 and dense-e5, no
    agreement, hybrid fusing words for a message in any language, no dictionary for English messages."""
    for system, cutoffs in MAIN_CUTOFFS.items():
        settings = with_agreement(with_thresholds(settings, system, cutoffs), system)
    settings = replace(settings, "retrieval.sparse.translate", False)
    return replace(settings, "retrieval.hybrid.language_aware", False)


def today(answer) -> Turn:
    """Today's chain: the top passing hit answers, else the fallback (with its "did you mean" entries)."""
    if answer.hits:
        return Turn("answer", answer.hits[0].entry.id)
    return Turn("fallback", options=tuple(o.id for o in answer.options))


def reported(answer) -> Turn | None:
    """The ladder's own decision, when the bot reports one (``Answer.decision`` / ``Answer.options``)."""
    decision = getattr(answer, "decision", None)
    if decision is None:
        return None
    decision = getattr(decision, "value", decision)
    options = tuple(str(getattr(o, "id", o)) for o in getattr(answer, "options", ()) or ())
    answered = answer.hits[0].entry.id if decision == "answer" and answer.hits else None
    return Turn(str(decision), answered, options)


def with_rungs(chitchat: ChitChat) -> Callable[[str, Turn], Turn]:
    """Today's chain behind the hand-off, then the chit-chat matcher (a request for a person wins: "有人工吗")."""

    def decide(message: str, fallback: Turn) -> Turn:
        if is_handoff_request(message):
            return Turn("handoff")
        if chitchat.match(message) is not None:
            return Turn("chitchat")
        return fallback

    return decide


def scores(messages: list[Message], turns: list[Turn]) -> dict[str, float | None]:
    """The table's numbers for one chain over ``messages``."""
    n = len(messages)
    answered = [(m, t) for m, t in zip(messages, turns) if t.decision == "answer"]
    wrong = sum(t.answered not in m.gold for m, t in answered)
    asked = [(m, t) for m, t in zip(messages, turns) if t.decision in ("clarify", "confirm")]
    with_gold = [(m, t) for m, t in asked if m.gold]

    def pr(kind: str) -> tuple[float | None, float | None]:
        predicted = [m for m, t in zip(messages, turns) if t.decision == kind]
        actual = [m for m in messages if m.kind == kind]
        hit = sum(m.kind == kind for m in predicted)
        return (hit / len(predicted) if predicted else None, hit / len(actual) if actual else None)

    cc_p, cc_r = pr("chitchat")
    ho_p, ho_r = pr("handoff")
    offered = sum(t.decision != "answer" and bool(m.gold & set(t.options)) for m, t in zip(messages, turns))
    return {
        "wrong": 100 * wrong / n,
        "right": 100 * (len(answered) - wrong) / n,
        "right_or_offered": 100 * (len(answered) - wrong + offered) / n,
        "asked": 100 * len(asked) / n,
        "in_options": sum(bool(m.gold & set(t.options)) for m, t in with_gold) / len(with_gold) if with_gold else None,
        "cc_p": cc_p,
        "cc_r": cc_r,
        "ho_p": ho_p,
        "ho_r": ho_r,
        "misread": sum(
            m.kind == "lookalike" and t.decision in ("chitchat", "handoff") for m, t in zip(messages, turns)
        ),
        "lookalikes": sum(m.kind == "lookalike" for m in messages),
    }


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for the table; "–" when there is nothing to measure."""
    return "–" if value is None else f"{value:.{digits}f}"


def row(label: str, s: dict[str, float | None]) -> str:
    """One table row from ``scores``."""
    return (
        f"| {label} | {fmt(s['wrong'], 1)} | {fmt(s['right'], 1)} | {fmt(s['right_or_offered'], 1)} "
        f"| {fmt(s['asked'], 1)} | {fmt(s['in_options'])} "
        f"| {fmt(s['cc_p'])} / {fmt(s['cc_r'])} | {fmt(s['ho_p'])} / {fmt(s['ho_r'])} "
        f"| {s['misread']:.0f} of {s['lookalikes']:.0f} |"
    )


def wrong_by_kind(messages: list[Message], turns: list[Turn]) -> str:
    """How many wrong answers each kind of message got, e.g. "answerable 15, unanswerable 10"."""
    kinds = [m.kind for m, t in zip(messages, turns) if t.decision == "answer" and t.answered not in m.gold]
    return ", ".join(f"{k} {kinds.count(k)}" for k in dict.fromkeys(sorted(kinds))) or "none"


WRONG_NOTES: list[str] = []  # per knowledge base and mode: what the wrong answers left after rungs 1-2 were


def run(name: str, entries: list[Entry], messages: list[Message], mode: str) -> dict[str, list[Turn]]:
    """Every chain's turns for ``messages`` on one knowledge base and mode (one per message, in order)."""
    work = STATE / name / mode
    bot, settings = build(entries, work, mode)
    main_bot, _ = build(entries, work, mode, as_main)
    before_bot, _ = build(entries, work, mode, as_before)
    from bot.factory import build_bot

    # today's chain: no rung before or around the answer, the thresholds shipped before the ladder, no agreement
    plain = replace(as_main(settings.model_copy(deep=True)), "ladder.steps", ["answer"])
    system = bot.index.searcher(settings.retrieval.mode).system
    if system in TODAY_ANSWER:
        plain = with_cutoffs(plain, system, TODAY_ANSWER[system])
    today_bot = build_bot(plain, llm=None, index=main_bot.index, load=False)
    rungs = with_rungs(ChitChat.from_settings(settings.chitchat))
    turns: dict[str, list[Turn]] = {"today": [], "rungs": [], "main": [], "before": [], "new": []}
    start = time.perf_counter()
    for m in messages:
        base = today(today_bot.answer(m.question, mode=settings.retrieval.mode))
        turns["today"].append(base)
        turns["rungs"].append(rungs(m.question, base))
        for label, chain in (("main", main_bot), ("before", before_bot), ("new", bot)):
            turn = reported(chain.answer(m.question, mode=settings.retrieval.mode))
            assert turn is not None  # the ladder reports its decision
            turns[label].append(turn)
    per = (time.perf_counter() - start) / max(1, len(messages)) * 1000
    print(f"{name} {mode}: {len(messages)} messages, {per:.0f} ms each (five chains)", file=sys.stderr)
    return turns


CHAINS = (
    ("today", "today"),
    ("rungs", "today + hand-off + chit-chat"),
    ("main", "ladder (main)"),
    ("before", "ladder (before)"),
    ("new", "**ladder (new)**"),
)


def rows_for(
    label: str, messages: list[Message], turns: dict[str, list[Turn]], keep: Callable[[Message], bool]
) -> list[str]:
    """The table rows of every chain over the messages ``keep`` admits."""
    picked = [i for i, m in enumerate(messages) if keep(m)]
    chosen = [messages[i] for i in picked]
    return [row(f"{label} · {name}", scores(chosen, [turns[key][i] for i in picked])) for key, name in CHAINS]


def heldout_matchers(sets: list[tuple[str, list[Entry], list[Message]]]) -> str:
    """Chit-chat and hand-off precision / recall of the matchers alone on each set's held-out split."""
    settings = load_settings(ROOT / "config.yaml")
    rungs = with_rungs(ChitChat.from_settings(settings.chitchat))
    parts = []
    for name, _, messages in sets:
        held = [m for m in messages if m.split == "heldout"]
        s = scores(held, [rungs(m.question, Turn("fallback")) for m in held])
        parts.append(
            f"{name} ({len(held)} messages): chit-chat P {fmt(s['cc_p'])} R {fmt(s['cc_r'])}, hand-off P "
            f"{fmt(s['ho_p'])} R {fmt(s['ho_r'])}, look-alikes misread {s['misread']:.0f} of {s['lookalikes']:.0f}"
        )
    return (
        "Matchers alone on the held-out split (the chit-chat threshold was chosen on tests/data/chitchat_labelled.jsonl, split train): "
        + "; ".join(parts)
        + "."
    )


HEADER = (
    "| knowledge · mode · chain | wrong / 100 | right / 100 | right or gold offered / 100 | clarify + confirm / 100 "
    "| gold in options | chit-chat P / R | hand-off P / R | look-alikes misread |\n|---|---|---|---|---|---|---|---|---|"
)


def first_build(published: str) -> list[str]:
    """The first build's table as "The first minute" of ``published`` (BENCHMARKS.md's text) has it: it times fresh
    processes on idle cores, so benchmarks/first_minute.py runs it, not this script; nothing without a build table."""
    lines = published_build(published)
    table = [line for line in lines if line.startswith("|")]
    if not table:
        return []
    against = [line for line in lines if line.startswith("Against ")]
    return [
        "",
        '**The first build** of ../shared/data/sysu in hybrid-e5, as "The first minute" below measured it '
        "(`python -m benchmarks.first_minute`; sparse stands in until the dense index is built):",
        "",
        *table,
        *(["", *against] if against else []),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the sets and modes asked for, print the table, and (unless --no-write) update BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="sysu,starter")
    parser.add_argument("--modes", default="sparse,hybrid-e5,dense-e5")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--quick", action="store_true", help="sparse only")
    args = parser.parse_args(argv)
    modes = ["sparse"] if args.quick else args.modes.split(",")
    sets = knowledge_sets(args.sets.split(","))
    if not sets:
        print("no ladder set has its knowledge here; nothing to measure", file=sys.stderr)
        return 0
    tables: dict[str, list[str]] = {"all": [], "heldout": [], "tune": []}
    for name, entries, messages in sets:
        everything = messages + load_messages(ROOT / "benchmarks" / "data" / f"tune_{name}.jsonl")
        for mode in modes:
            turns = run(name, entries, everything, mode)
            WRONG_NOTES.append(f"{name} · {mode}: {wrong_by_kind(messages, turns['rungs'][: len(messages)])}")
            tables["all"] += rows_for(f"{name} · {mode}", everything, turns, lambda m: m.split != "tune")
            tables["heldout"] += rows_for(f"{name} · {mode}", everything, turns, lambda m: m.split == "heldout")
            tables["tune"] += rows_for(f"{name} · {mode}", everything, turns, lambda m: m.split in ("train", "tune"))
    counts = ", ".join(
        f"{name} {len(ms)} ({', '.join(f'{k} {sum(m.kind == k for m in ms)}' for k in ('answerable', 'unanswerable', 'chitchat', 'handoff', 'lookalike'))})"
        for name, _, ms in sets
    )
    body = "\n".join(
        [
            "## The decision ladder",
            "",
            f"`python -m benchmarks.ladder` — messages: {counts}. Retrieval-only (no LLM). *today* answers the top "
            "passing hit or falls back, at the answer thresholds shipped before the ladder (sparse 0.34, hybrid-e5 "
            "0.81, dense-e5 0.87), no agreement; *+ hand-off + chit-chat* puts the two matchers in front of it; *ladder (main)* is "
            "the bot's own `Answer.decision` as main shipped it (sparse 0.49; hybrid-e5 answer 0.838, clarify 0.005; "
            "dense-e5 0.87; no agreement, words fused for English too); *ladder (before)* is the ladder with agreement as shipped "
            "before the decisions were sharpened (main f41edd5: sparse 0.47, clarify 0, unsure 0.15, agreement "
            "backward 0.03, conflict 0.3, other 0.06, missing 0.02; hybrid-e5 0.83, clarify 0.005, unsure 0.01, "
            "agreement conflict 0.1, other 0.15, missing 0.02, added 0.05; dense-e5 0.87, no agreement until main "
            "e0e71c3); *ladder (new)* is the bot as shipped "
            f"now: {shipped_values()}; tuned on the tuning messages (benchmarks/data/tune_*.jsonl) and the train "
            "split only. Same run, same index for every chain. "
            "Wrong = answered from a non-gold entry or answered at all when nothing should be; right = answered "
            "from a gold entry; right or gold offered adds the turns that offer a gold entry (clarify, confirm, or "
            'the last resort\'s "did you mean"); P / R = precision / recall of that decision. Every chain reads the '
            "aliases mined from the knowledge (`knowledge.aliases`, on by default) and searches a message without "
            'the courtesies around its question ("你好，", "thanks!").',
            "",
            "**All messages of the ladder sets** (train and held-out):",
            "",
            HEADER,
            *tables["all"],
            "",
            "**Held-out split only** (never tuned on):",
            "",
            HEADER,
            *tables["heldout"],
            "",
            "**What the new values were tuned on** (train split + benchmarks/data/tune_*.jsonl; not a test):",
            "",
            HEADER,
            *tables["tune"],
            "",
            "Wrong answers left with hand-off + chit-chat in front, by kind of message (ladder sets): "
            + "; ".join(WRONG_NOTES)
            + ".",
            "",
            heldout_matchers(sets),
            *first_build(published()),
        ]
    )
    print(body)
    if not args.no_write:
        write_section("ladder", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
