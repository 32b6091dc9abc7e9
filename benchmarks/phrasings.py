"""Alternative questions (an entry's ``questions``): retrieval of held-out paraphrases with and without them.

    .venv/bin/python -m benchmarks.phrasings [--seed 0] [--no-write]

Data: LCQMC dev (../shared/data/lcqmc_dev, or $KBBOT_DATA; 11,448 entries whose query is their document, 4,355
paraphrase questions, each with one gold entry). For every gold entry that several questions point to, one of
them (seeded random) is held out and the others become the entry's ``questions``; only the held-out questions are
asked, against the whole knowledge, once without any ``questions`` (the baseline) and once with them. The
questions of the other gold entries (one question each, so no phrasings) show what the phrasings of other entries
cost them.

Systems (the product's searchers, settings from config.yaml, called directly: no question splitting):
sparse (tantivy), dense-e5 (FAISS; phrasings as extra question vectors, the best cosine per entry: what the
product does), dense-e5 "appended" (the phrasings appended to the one question text instead), hybrid-e5.
Entry vectors are read from the retrieval benchmark's embedding cache (.state/bench/retrieval/embeddings) and
copied into this script's own cache, so the new texts (phrasings and held-out questions, ~2,200) are the only
ones encoded (~1 min) and the retrieval benchmark's question timings stay unaffected.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, write_section
from bot.config.settings import load_settings
from bot.evaluation import EvalQuestion, Run, load_eval_set, run_questions
from bot.knowledge.entries import Entry
from bot.search.base import ModeSearcher, Searcher

STATE = ROOT / ".state" / "bench" / "phrasings"
SHARED_CACHE = ROOT / ".state" / "bench" / "retrieval" / "embeddings"


def split(
    entries: list[Entry], questions: list[EvalQuestion], seed: int
) -> tuple[list[Entry], list[EvalQuestion], list[EvalQuestion]]:
    """Entries whose gold questions are several get all but one of them as ``questions``; the held-out questions;
    the questions whose gold entry has no other question (and so no phrasings)."""
    by_gold: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        if len(q.gold) == 1:
            by_gold[next(iter(q.gold))].append(q)
    rng = random.Random(seed)
    phrasings: dict[str, tuple[str, ...]] = {}
    held_out, others = [], []
    for entry_id, group in sorted(by_gold.items()):
        if len(group) < 2:
            others += group
            continue
        keep = rng.randrange(len(group))
        held_out.append(group[keep])
        phrasings[entry_id] = tuple(q.question for i, q in enumerate(group) if i != keep)
    with_questions = [dataclasses.replace(e, questions=phrasings[e.id]) if e.id in phrasings else e for e in entries]
    return with_questions, held_out, others


def appended_faiss():
    """A FaissSearcher variant with one question vector of the query and its phrasings joined (the alternative)."""
    from bot.search.encoders.base import DOCUMENT, QUESTION
    from bot.search.faiss_searcher import FaissSearcher

    class Appended(FaissSearcher):
        """The query and every alternative question embedded as one question text."""

        def unit_texts(self, entry: Entry) -> list[tuple[str, str]]:
            """One question vector of all phrasings, one passage vector."""
            return [(QUESTION, "\n".join(entry.phrasings)), (DOCUMENT, self.embed_text(entry))]

    return Appended


def copy_cached(encoder, entries: list[Entry], searcher) -> int:
    """Copy the entries' vectors from the retrieval benchmark's cache into ``encoder``'s; the number found."""
    from bot.search.encoders.cache import CACHE_FILE, EmbeddingCache, cache_key

    if not (SHARED_CACHE / CACHE_FILE).is_file():
        return 0
    shared = EmbeddingCache(SHARED_CACHE / CACHE_FILE)
    keys = [cache_key(encoder.signature(), role, text) for e in entries for role, text in searcher.unit_texts(e)]
    found = shared.get_many(keys, encoder.dim, touch=False)
    encoder.cache.put_many(found)
    shared.close()
    return len(found)


def evaluate(searcher: ModeSearcher, questions: list[EvalQuestion], name: str) -> Run:
    """The searcher's top 10 for every question."""
    return run_questions(lambda q: (searcher.search(q, 10), []), questions, name, "lcqmc")


def main(argv: list[str] | None = None) -> int:
    """Measure every system with and without alternative questions and print (and write) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    folder = data_dir() / "lcqmc_dev"
    if not folder.exists():
        print(f"no data: {folder} not found (set KBBOT_DATA)")
        return 0
    start = time.perf_counter()
    from bot.search.encoders import E5Encoder
    from bot.search.faiss_searcher import FaissSearcher
    from bot.search.hybrid import HybridSearcher
    from bot.search.tantivy_searcher import TantivySearcher
    from bot.search.tokenizer import Tokenizer

    settings = load_settings(ROOT / "config.yaml").retrieval
    data = load_eval_set(folder, "lcqmc")
    phrased, held_out, others = split(data.entries, data.questions, args.seed)
    n_entries = sum(1 for e in phrased if e.questions)
    n_phrasings = sum(len(e.questions) for e in phrased)
    print(
        f"{len(data.entries)} entries, {n_entries} with {n_phrasings} phrasings, {len(held_out)} held-out questions, "
        f"{len(others)} others"
    )

    tokenizer = Tokenizer(cache_dir=STATE / "jieba")
    d = settings.dense
    encoder = E5Encoder(STATE / "embeddings", d.e5.num_threads, d.e5.batch_size, d.e5.variant)
    appended = appended_faiss()
    rows: list[tuple[str, str, Run, Run]] = []
    for label, entries in (("without", data.entries), ("with", phrased)):
        work = STATE / label
        if work.exists():
            shutil.rmtree(work)
        sparse = TantivySearcher(work / "tantivy", tokenizer, dict(settings.sparse.field_weights.items()))
        dense = FaissSearcher(work / "faiss", encoder, d.embed_template, d.question_weight, d.hnsw_above)
        stores: list[tuple[str, Searcher]] = [("sparse", sparse), ("dense-e5", dense)]
        if label == "with":
            stores.append(
                (
                    "dense-e5 appended",
                    appended(work / "faiss-appended", encoder, d.embed_template, d.question_weight, d.hnsw_above),
                )
            )
        copied = sum(copy_cached(encoder, entries, s) for name, s in stores if name.startswith("dense"))
        tick = time.perf_counter()
        encoder.embed_questions([q.question for q in [*held_out, *others]])  # once, cached: every system reads them
        for _, s in stores:
            s.sync(entries)
        systems: list[tuple[str, ModeSearcher]] = list(stores)
        print(
            f"{label}: indexed in {time.perf_counter() - tick:.0f} s ({copied} cached vectors copied, "
            f"{encoder.encoded} texts encoded so far)",
            flush=True,
        )
        systems.append(
            (
                "hybrid-e5",
                HybridSearcher(sparse, dense, settings.hybrid.sparse_weight["e5"], settings.hybrid.candidates),
            )
        )
        for name, searcher in systems:
            rows.append((name, label, evaluate(searcher, held_out, name), evaluate(searcher, others, name)))
            print(f"  {name} {label}: R@1 {rows[-1][2].recall(1):.3f}", flush=True)

    order = ["sparse", "dense-e5", "dense-e5 appended", "hybrid-e5"]
    head = (
        f"| system | alternative questions | held-out ({len(held_out)}): recall@1 | recall@5 | MRR@10 | "
        f"others ({len(others)}): recall@1 | MRR@10 |"
    )
    table = [head, "|---|---|---|---|---|---|---|"]
    for name in order:
        for system, label, run, other in rows:
            if system == name:
                what = "none" if label == "without" else "appended to the query" if "appended" in name else "yes"
                table.append(
                    f"| {name.replace(' appended', '')} | {what} | {run.recall(1):.3f} | {run.recall(5):.3f} "
                    f"| {run.mrr:.3f} | {other.recall(1):.3f} | {other.mrr:.3f} |"
                )
    header = (
        f"One run of `python -m benchmarks.phrasings` ({time.perf_counter() - start:.0f} s, 2 CPUs) on LCQMC dev "
        f"(../shared/data/lcqmc_dev): {len(data.entries)} entries; the {n_entries} gold entries that several "
        f"questions point to get all but one of them as `questions` ({n_phrasings} phrasings, seed {args.seed}); "
        f"the {len(held_out)} held-out questions are asked against the whole knowledge with and without them, "
        f"and so are the {len(others)} questions of gold entries with one question (no phrasings: what the "
        "phrasings of other entries cost them). "
        'Searchers called directly with config.yaml\'s settings (no question splitting). "yes" for dense = one '
        'extra question vector per phrasing, best cosine per entry (the product); "appended" = one question '
        "vector of the query and its phrasings joined."
    )
    body = header + "\n\n" + "\n".join(table)
    print("\n" + body)
    if not args.no_write:
        write_section("phrasings", "## Alternative questions\n\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
