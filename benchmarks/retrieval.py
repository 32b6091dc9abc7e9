"""Retrieval and the decision to answer, per system and knowledge base, beside rank_bm25 — one run, one table.

    .venv/bin/python -m benchmarks.retrieval [--sets starter,sysu,cmrc,lcqmc] [--systems ...] [--limit N] [--no-write]

Knowledge bases and questions (../shared/data beside the checkout, or $KBBOT_DATA; a set whose data is
absent is skipped with a message):
- starter: knowledge/ (147 entries) with benchmarks/data/starter_eval.jsonl (115 answerable, 45 unanswerable,
  35 chit-chat questions, written by us);
- sysu: ../shared/data/sysu/database.json (342 entries) with benchmarks/data/sysu_eval.jsonl (130 / 40 / 30,
  written by us);
- cmrc: ../shared/data/cmrc2018_trial (256 paragraphs, 1,000 questions); lcqmc: ../shared/data/lcqmc_dev
  (11,448 entries, 4,355 paraphrase questions). These two have no unanswerable questions: for the decision,
  a seeded random half of the gold entries is removed (seeds 0-2, pooled), which makes their questions
  unanswerable (bot.evaluation.splits.removal_split).

Every system runs through the product's own Bot.retrieve (question splitting on). rank_bm25 (BM25Okapi over
jieba words of query, metadata and document, what LangChain's BM25 retriever uses) has no relevance in [0, 1]:
its raw score is thresholded, which shows why a raw score does not transfer.

Decision F1 = F1 of "answerable" when a question's best relevance reaches the threshold. "best" is the set's
best possible single cut, "default" the shipped threshold, and the transfer table chooses each system's
threshold on the other three sets (best mean F1) and applies it to the one left out.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, write_section
from bot.config.settings import Settings, load_settings
from bot.config.variants import replace, update
from bot.evaluation import (
    EvalQuestion,
    Run,
    auc,
    best_shared_threshold,
    best_threshold,
    load_eval_set,
    load_questions,
    point,
    real_split,
    removal_split,
    run_questions,
    subsample,
)
from bot.knowledge.entries import Entry, load_entries, parse_text, write_entries
from bot.search.base import Hit, dense_leaf

SYSTEMS = ("sparse", "dense-fasttext", "dense-e5", "hybrid-fasttext", "hybrid-e5", "rank_bm25")
SEEDS = (0, 1, 2)
DIRECT_CUTS = (0.88, 0.9, 0.92, 0.94, 0.96)  # candidate direct thresholds shown in the verbatim-reply table
STATE = ROOT / ".state" / "bench" / "retrieval"  # indexes and the shared embedding cache survive reruns
PASSAGES: bool | None = None  # --passages on/off overrides retrieval.passages.enabled (None: as config.yaml says)


@dataclass
class DataSet:
    """A knowledge base, its questions, and whether they include real negatives."""

    name: str
    entries: list[Entry]
    questions: list[EvalQuestion]
    note: str

    @property
    def real_negatives(self) -> bool:
        """True when the questions include unanswerable / chit-chat ones."""
        return any(not q.answerable for q in self.questions)


def load_sets(names: list[str], limit: int | None) -> list[DataSet]:
    """The requested knowledge bases with their questions (those whose data is missing are skipped)."""
    out, shared = [], data_dir()
    for name in names:
        if name == "starter":
            entries = load_entries(ROOT / "knowledge")
            questions = load_questions(ROOT / "benchmarks/data/starter_eval.jsonl", entries)
            out.append(DataSet(name, entries, questions, "knowledge/ + benchmarks/data/starter_eval.jsonl"))
            continue
        path = {
            "sysu": shared / "sysu" / "database.json",
            "cmrc": shared / "cmrc2018_trial",
            "lcqmc": shared / "lcqmc_dev",
        }[name]
        if not path.exists():
            print(f"skipping {name}: {path} not found (set KBBOT_DATA)", flush=True)
            continue
        if name == "sysu":
            entries = parse_text(path.read_text(encoding="utf-8"), "database", str(path), [])
            questions = load_questions(ROOT / "benchmarks/data/sysu_eval.jsonl", entries)
            out.append(DataSet(name, entries, questions, "../shared/data/sysu + benchmarks/data/sysu_eval.jsonl"))
        else:
            data = load_eval_set(path, name)
            out.append(DataSet(name, data.entries, subsample(data.questions, limit), f"../shared/data/{path.name}"))
    return out


# -- building the product on one knowledge base ------------------------------------------------------
def settings_for(work: Path, knowledge: Path, encoder: str) -> Settings:
    """config.yaml with the knowledge and state in ``work`` and the given dense encoder."""
    s = load_settings(ROOT / "config.yaml")
    s = update(s, {"knowledge.path": str(knowledge), "state_dir": str(work / "state")})
    s = replace(s, "retrieval.dense.encoder", encoder)
    if PASSAGES is not None:
        s = replace(s, "retrieval.passages.enabled", PASSAGES)
    return s


def shared_cache(work: Path) -> None:
    """Point the state's embedding cache at one cache for all runs, so every text is encoded once."""
    cache, link = STATE / "embeddings", work / "state" / "embeddings"
    cache.mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(cache, target_is_directory=True)


def build(entries: list[Entry], work: Path, encoder: str):
    """A retrieval-only Bot over ``entries`` (written as knowledge files in ``work``)."""
    from bot.factory import build_bot

    knowledge = work / "knowledge"
    if knowledge.exists():
        shutil.rmtree(knowledge)
    write_entries(entries, knowledge)
    shared_cache(work)
    settings = settings_for(work, knowledge, encoder)
    settings = replace(settings, "retrieval.mode", "sparse")
    return build_bot(settings, llm=None)


class RankBM25:
    """rank_bm25's BM25Okapi over the product's jieba words of each entry's query, metadata and document."""

    def __init__(self, entries: list[Entry]):
        from rank_bm25 import BM25Okapi

        from bot.search.tokenizer import Tokenizer

        self.tokenizer = Tokenizer(cache_dir=STATE / "jieba")
        self.tokenizer.add_words(w for e in entries for w in e.metadata)
        self.entries = entries
        self.bm25 = BM25Okapi(
            [self.tokenizer.tokenize(f"{e.query} {' '.join(e.metadata)} {e.document}") or ["∅"] for e in entries]
        )

    def retrieve(self, question: str, top_k: int = 10) -> tuple[list[Hit], list[Hit]]:
        """Top hits by raw BM25 (as "relevance": it has no other); nothing passes (no threshold of its own)."""
        words = self.tokenizer.tokenize(question)
        if not words:
            return [], []
        scores = self.bm25.get_scores(words)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[:top_k]
        return [Hit(self.entries[i], float(scores[i]), float(scores[i]), "rank_bm25") for i in order], []


QUESTION_VECTORS: dict[str, object] = {}  # e5 question vectors of this run, reused by the gold-removed runs


def data_label(label: str) -> str:
    """The set's name without the seed part ("cmrc seed 1" -> "cmrc")."""
    return label.split(" seed ")[0]


def remember_question_vectors(encoder, serve: bool) -> None:
    """Record each question's e5 vector as the whole-knowledge runs encode it (so their latencies include
    encoding, as a user's question does), and serve the recorded vectors to the gold-removed runs, which
    would otherwise encode every question again per seed. Benchmark plumbing only: it wraps the instance."""
    encode = encoder.embed_query

    def recorded(text: str):
        if serve and text in QUESTION_VECTORS:
            return QUESTION_VECTORS[text]
        QUESTION_VECTORS[text] = vector = encode(text)
        return vector

    encoder.embed_query = recorded


def runs_on(
    entries: list[Entry], questions: list[EvalQuestion], work: Path, systems: list[str], label: str
) -> dict[str, Run]:
    """Every requested system's run over ``questions`` on one knowledge base."""
    out: dict[str, Run] = {}
    for encoder in ("fasttext", "e5"):
        wanted = [s for s in systems if s.endswith(encoder) or (s == "sparse" and encoder == "e5")]
        if not wanted:
            continue
        start = time.perf_counter()
        bot = build(entries, work / encoder, encoder)
        if encoder == "e5":
            leaf = dense_leaf(bot.index.searcher("dense"))
            assert leaf is not None, "an e5 bot has a dense index"
            remember_question_vectors(leaf.encoder, serve=label != data_label(label))
        for system in wanted:
            mode = system.split("-")[0]
            searcher = bot.index.searcher(mode)  # build before the clock starts
            for leaf in searcher.leaves():
                getattr(leaf, "forget_queries", lambda: None)()  # every system pays for encoding its questions
            print(f"  {label}: {system} (indexed {time.perf_counter() - start:.0f} s) ...", flush=True)
            out[system] = run_questions(partial(bot.search.retrieve, mode=mode, top_k=10), questions, system, label)
    if "rank_bm25" in systems:
        bm25 = RankBM25(entries)
        out["rank_bm25"] = run_questions(bm25.retrieve, questions, "rank_bm25", label)
    return out


# -- measuring -------------------------------------------------------------------------------------------
@dataclass
class Measured:
    """One system on one set: ranking on the whole knowledge and (positives, negatives) for the decision."""

    ranking: Run
    positives: list[float] = field(default_factory=list)
    negatives: list[float] = field(default_factory=list)
    # (best relevance, top hit answers the question) of every decision question, for the direct threshold
    tops: list[tuple[float, bool]] = field(default_factory=list)

    def add(self, run: Run, answerable: list[EvalQuestion], unanswerable: list[EvalQuestion]) -> None:
        """Take one decision run's best relevances (and whether the top hit was right)."""
        by_question = {id(o.question): o for o in run.outcomes}
        self.positives += [by_question[id(q)].best_relevance for q in answerable]
        self.negatives += [by_question[id(q)].best_relevance for q in unanswerable]
        self.tops += [(o.best_relevance, o.rank == 1) for o in by_question.values()]


def measure(data: DataSet, systems: list[str]) -> dict[str, Measured]:
    """Ranking on the whole knowledge; the decision on real negatives or on gold-removed halves (seeds pooled)."""
    work = STATE / data.name
    whole = runs_on(data.entries, data.questions, work / "whole", systems, data.name)
    out = {s: Measured(r) for s, r in whole.items()}
    if data.real_negatives:
        split = real_split(data.questions)
        for s, r in whole.items():
            out[s].add(r, split.answerable, split.unanswerable)
        return out
    for seed in SEEDS:
        split = removal_split(data.questions, seed)
        kept = [e for e in data.entries if e.id not in split.removed]
        labelled = [*split.answerable, *split.unanswerable]
        runs = runs_on(kept, labelled, work / f"seed{seed}", systems, f"{data.name} seed {seed}")
        for s, r in runs.items():
            out[s].add(r, split.answerable, split.unanswerable)
    return out


def default_threshold(system: str) -> float | None:
    """The shipped answer threshold of a system (None for rank_bm25, which has none)."""
    cutoffs = load_settings(ROOT / "config.yaml").retrieval.thresholds.get(system)
    return cutoffs.answer if cutoffs else None


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for the tables ('—' when missing or NaN)."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def tables(sets: list[DataSet], results: dict[str, dict[str, Measured]], systems: list[str]) -> str:
    """The main table and the transfer table, as markdown."""
    head = (
        "| knowledge | system | recall@1 | recall@3 | recall@5 | MRR@10 | decision AUC | best F1 (cut) | "
        "F1 at default (cut) | p50 ms | p95 ms |"
    )
    lines = [head, "|" + "---|" * 11]
    for data in sets:
        for s in systems:
            m = results[data.name].get(s)
            if m is None:
                continue
            r, p, n = m.ranking, m.positives, m.negatives
            cut = best_threshold(p, n)
            default = default_threshold(s)
            at_default = f"{point(default, p, n).f1:.3f} ({default:g})" if default is not None else "—"
            lines.append(
                f"| {data.name} | {s} | {fmt(r.recall(1))} | {fmt(r.recall(3))} | {fmt(r.recall(5))} | "
                f"{fmt(r.mrr)} | {fmt(auc(p, n))} | {point(cut, p, n).f1:.3f} ({cut:.3g}) | {at_default} | "
                f"{r.p50_ms:.2f} | {r.p95_ms:.2f} |"
            )
    transfer = [
        "| system | " + " | ".join(f"{d.name}: F1 left out (cut) / best" for d in sets) + " | cut chosen on all sets |",
        "|" + "---|" * (len(sets) + 2),
    ]
    for s in systems:
        cells = []
        for data in sets:
            others = [
                (results[o.name][s].positives, results[o.name][s].negatives)
                for o in sets
                if o.name != data.name and s in results[o.name]
            ]
            m = results[data.name].get(s)
            if m is None or not others:
                cells.append("—")
                continue
            cut = best_shared_threshold(others)
            best = point(best_threshold(m.positives, m.negatives), m.positives, m.negatives).f1
            cells.append(f"{point(cut, m.positives, m.negatives).f1:.3f} ({cut:.3g}) / {best:.3f}")
        every = [results[d.name][s] for d in sets if s in results[d.name]]
        shared = best_shared_threshold([(m.positives, m.negatives) for m in every]) if every else None
        cells.append(f"{shared:.3g}" if shared is not None else "—")
        transfer.append(f"| {s} | " + " | ".join(cells) + " |")
    direct = [
        "| system | direct threshold | " + " | ".join(f"{d.name}: replies verbatim / right" for d in sets) + " |",
        "|" + "---|" * (len(sets) + 2),
    ]
    for s in (x for x in systems if x.startswith(("hybrid", "dense"))):
        for t in DIRECT_CUTS:
            cells = []
            for data in sets:
                m = results[data.name].get(s)
                tops = m.tops if m else []
                chosen = [right for rel, right in tops if rel >= t]
                cells.append(f"{len(chosen) / len(tops):.2f} / {sum(chosen) / len(chosen):.3f}" if chosen else "0 / —")
            direct.append(f"| {s} | {t:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(transfer) + "\n\n" + "\n".join(direct)


def main(argv: list[str] | None = None) -> int:
    """Run every system on every set and print (and write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="starter,sysu,cmrc,lcqmc")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit", type=int, default=None, help="questions per cmrc/lcqmc set (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    parser.add_argument("--dump", type=Path, default=None, help="also pickle the measurements here (re-render later)")
    parser.add_argument(
        "--from-dump",
        type=Path,
        default=None,
        help="re-render the tables from a --dump (e.g. after the shipped thresholds changed)",
    )
    parser.add_argument(
        "--passages",
        choices=("config", "on", "off"),
        default="config",
        help='long documents cut into passages (docs/retrieval-and-decision.md "Long documents"): as config.yaml says, or forced',
    )
    args = parser.parse_args(argv)
    global PASSAGES
    PASSAGES = None if args.passages == "config" else args.passages == "on"
    systems = [s for s in args.systems.split(",") if s]
    start = time.perf_counter()
    if args.from_dump:
        import pickle

        dumped = pickle.loads(args.from_dump.read_bytes())  # our own file, written by --dump
        sets, results, systems, seconds = dumped["sets"], dumped["results"], dumped["systems"], dumped["seconds"]
    else:
        sets = load_sets([s for s in args.sets.split(",") if s], args.limit)
        if not sets:
            print("no data: nothing to measure")
            return 0
        results = {d.name: measure(d, systems) for d in sets}
        seconds = time.perf_counter() - start
    if args.dump:
        import pickle

        args.dump.write_bytes(pickle.dumps({"sets": sets, "results": results, "systems": systems, "seconds": seconds}))
    body = tables(sets, results, systems)
    header = (
        f"One run of `python -m benchmarks.retrieval` ({seconds:.0f} s, 2 CPUs): "
        + "; ".join(f"**{d.name}** {len(d.entries)} entries, {len(d.questions)} questions ({d.note})" for d in sets)
        + ". Decision: real unanswerable and chit-chat questions where a set has them, else gold entries of a "
        'random half removed (seeds 0-2 pooled). rank_bm25\'s "relevance" is its raw score. Latency is per '
        "question through Bot.retrieve, including encoding the question; this run shared the 2 cores with other "
        'work (load 4-7), so compare latencies only within the table (a quiet dense-e5 query: "Speed: dense-e5 '
        'query"). Defaults: config.yaml at rendering time; "cut chosen on all sets" is how they were picked.'
    )
    print("\n" + header + "\n\n" + body)
    if not args.no_write:
        write_section("retrieval", "## Retrieval and the decision to answer\n\n" + header + "\n\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
