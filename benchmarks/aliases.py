"""Aliases mined from the knowledge (knowledge.aliases): how many, how many are wrong, and what they change —
before and after in one run, on the product's own searchers.

    .venv/bin/python -m benchmarks.aliases [--systems sparse,hybrid-e5] [--no-write]

- **Mined**: the aliases the bot finds in ../shared/data/sysu (342 entries), the starter knowledge (147), CMRC 2018
  trial (256 Wikipedia paragraphs) and LCQMC dev (11,448 questions), each checked against
  benchmarks/data/aliases_judged.jsonl (every alias read by hand: right, name off by a word, or wrong);
  one not judged there is counted as such.
- **Retrieval**: without mined aliases (``knowledge.aliases: false``) and with them, no synonym file either way, on
  sysu-abbr (benchmarks/data/sysu_abbreviations.jsonl, 40 questions written for the synonym file), sysu-aliases and
  starter-aliases (benchmarks/data/*_aliases.jsonl, written after reading what the miner finds: questions that say an
  alias where the entry says the name, and a few that say an abbreviation the entry itself uses), and the answerable
  questions of sysu_eval.jsonl / starter_eval.jsonl (the no-regression check). recall@1 through ``Bot.retrieve``,
  and the shipped ladder's decision through ``Bot.answer`` (retrieval-only): answered right / wrong per 100.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, knowledge_folder, share_embeddings, write_section
from bot.config.settings import load_settings
from bot.config.variants import update
from bot.evaluation import EvalQuestion, load_questions
from bot.knowledge.entries import Entry, load_entries, parse_text

DATA = ROOT / "benchmarks" / "data"
STATE = ROOT / ".state" / "bench" / "aliases"
JUDGED = DATA / "aliases_judged.jsonl"


def knowledge(name: str) -> list[Entry] | None:
    """The entries of one knowledge base, or None when its data is absent."""
    if name == "starter":
        return load_entries(ROOT / "knowledge")
    path = {
        "sysu": data_dir() / "sysu" / "database.json",
        "cmrc": data_dir() / "cmrc2018_trial" / "knowledge.json",
        "lcqmc": data_dir() / "lcqmc_dev" / "knowledge.json",
    }[name]
    if not path.is_file():
        print(f"skipping {name}: {path} not found (set KBBOT_DATA)", file=sys.stderr)
        return None
    stem = "database" if name == "sysu" else "knowledge"
    return parse_text(path.read_text(encoding="utf-8"), stem, str(path), [])


def mined_rows() -> tuple[list[str], list[str]]:
    """(table rows, wrong aliases listed) of what the miner finds on each knowledge base."""
    from bot.search.aliases import AliasMiner
    from bot.search.tokenizer import Tokenizer

    judged = {}
    for line in JUDGED.read_text(encoding="utf-8").splitlines():
        if line.strip():
            j = json.loads(line)
            judged[(j["knowledge"], j["alias"], j["name"])] = j
    rows, wrong = [], []
    for name in ("sysu", "starter", "cmrc", "lcqmc"):
        entries = knowledge(name)
        if entries is None:
            continue
        tokenizer = Tokenizer(cache_dir=STATE / "jieba")
        tokenizer.add_words(w for e in entries for w in e.metadata)  # as the index does before mining
        tokenizer.tags("预热")  # jieba's part-of-speech table: loaded once per process, not part of a reload
        start = time.perf_counter()
        found = AliasMiner(tokenizer).mine(entries)
        seconds = time.perf_counter() - start
        verdicts = Counter(judged.get((name, a.alias, a.name), {}).get("verdict", "not judged") for a in found)
        how = Counter(a.how for a in found)
        rows.append(
            f"| {name} | {len(entries):,} | {len(found)} | {verdicts['right']} | {verdicts['name off']} "
            f"| {verdicts['wrong']} | {verdicts['not judged']} | "
            + ", ".join(f"{k} {v}" for k, v in how.most_common())
            + f" | {seconds:.1f} |"
        )
        wrong += [
            f"{name}: {a.alias} = {a.name} ({judged[(name, a.alias, a.name)].get('note', '')})"
            for a in found
            if judged.get((name, a.alias, a.name), {}).get("verdict") == "wrong"
        ]
    return rows, wrong


def build(name: str, entries: list[Entry], system: str, aliases: bool):
    """A retrieval-only Bot over ``entries`` in its own state folder (the e5 embedding cache is shared)."""
    from bot.factory import build_bot

    mode, _, encoder = system.partition("-")
    work = STATE / name / f"{system}-{'on' if aliases else 'off'}"
    folder = knowledge_folder(entries, work)
    share_embeddings(work, STATE / "embeddings")
    settings = load_settings(ROOT / "config.yaml")
    changes: dict[str, object] = {
        "knowledge.path": str(folder),
        "state_dir": str(work / "state"),
        "knowledge.synonyms": None,
    }
    changes.update({"knowledge.aliases": aliases, "retrieval.mode": mode, "log.enabled": False})
    if encoder:
        changes["retrieval.dense.encoder"] = encoder
    return build_bot(update(settings, changes), llm=None)


def measure(bot, questions: list[EvalQuestion]) -> tuple[float, float, float]:
    """(recall@1, answered right per 100, answered wrong per 100)."""
    first = right = wrong = 0
    for q in questions:
        hits, _ = bot.retrieve(q.question)
        first += bool(hits) and hits[0].entry.id in q.gold
        answer = bot.answer(q.question)
        if answer.decision.value == "answer" and answer.hits:
            if answer.hits[0].entry.id in q.gold:
                right += 1
            else:
                wrong += 1
    n = len(questions)
    return first / n, 100 * right / n, 100 * wrong / n


def question_sets() -> list[tuple[str, str, list[Entry], list[EvalQuestion]]]:
    """(set, knowledge name, entries, questions) of each set whose knowledge is present."""
    out = []
    sysu = knowledge("sysu")
    if sysu is not None:
        out.append(("sysu-abbr", "sysu", sysu, load_questions(DATA / "sysu_abbreviations.jsonl", sysu)))
        out.append(("sysu-aliases", "sysu", sysu, load_questions(DATA / "sysu_aliases.jsonl", sysu)))
        held = [q for q in load_questions(DATA / "sysu_eval.jsonl", sysu) if q.answerable]
        out.append(("sysu-eval", "sysu", sysu, held))
    starter = knowledge("starter")
    assert starter is not None
    out.append(("starter-aliases", "starter", starter, load_questions(DATA / "starter_aliases.jsonl", starter)))
    held = [q for q in load_questions(DATA / "starter_eval.jsonl", starter) if q.answerable]
    out.append(("starter-eval", "starter", starter, held))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurements, print the section and (unless --no-write) update BENCHMARKS.md."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="sparse,hybrid-e5")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    started = time.perf_counter()
    mined, wrong = mined_rows()
    body = [
        "## Aliases",
        "",
        "`python -m benchmarks.aliases` · the aliases the bot mines from the knowledge itself (`knowledge.aliases`,",
        "bot/search/aliases.py), each read by hand (benchmarks/data/aliases_judged.jsonl): *right*, *name off* (the",
        "alias is right, the name it is tied to lost or gained a word, e.g. 太平洋大学联盟 for 环太平洋大学联盟: the group",
        "still joins the right words) or *wrong*. Seconds: mining all entries once (a reload re-reads only changed entries).",
        "",
        "| knowledge | entries | aliases | right | name off | wrong | not judged | found by | mining s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
        *mined,
        "",
        "Wrong ones: " + ("; ".join(wrong) if wrong else "none") + ".",
        "",
        "Retrieval without and with the mined aliases (no synonym file either way), one run: recall@1, and the shipped",
        "ladder's answers (retrieval-only) right / wrong per 100 questions. sysu-aliases (28: 4 of them say 南校区 /",
        "东校区 / 北校区 where the entry says 校园) and starter-aliases (6) are new questions written over",
        "../shared/data/sysu and knowledge/ after reading what the miner finds",
        "(benchmarks/data/README.md); sysu-eval / starter-eval are the answerable questions of the eval sets, written",
        "before aliases existed (the no-regression check).",
        "",
        "| set | questions | system | R@1 without | R@1 with | right / 100 without → with | wrong / 100 without → with |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for set_name, kb, entries, questions in question_sets():
        for system in args.systems.split(","):
            before = measure(build(kb, entries, system, False), questions)
            after = measure(build(kb, entries, system, True), questions)
            line = (
                f"| {set_name} | {len(questions)} | {system} | {before[0]:.3f} | {after[0]:.3f} "
                f"| {before[1]:.1f} → {after[1]:.1f} | {before[2]:.1f} → {after[2]:.1f} |"
            )
            print(line, flush=True)
            body.append(line)
    body += ["", f"Whole run {(time.perf_counter() - started) / 60:.1f} min on 2 shared CPUs."]
    text = "\n".join(body)
    print(text)
    if not args.no_write:
        write_section("aliases", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
