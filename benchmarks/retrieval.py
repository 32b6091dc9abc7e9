"""Side-by-side retrieval benchmark: tantivy BM25, fastText+FAISS, hybrid RRF and rank_bm25 as baseline.

    .venv/bin/python -m benchmarks.retrieval [--limit N] [--bm25-limit N] [--no-write]

Data: ../shared/data beside the checkout (override with KBBOT_DATA); skipped cleanly when absent.
Writes its table into BENCHMARKS.md between the retrieval markers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, write_section  # noqa: E402
from bot.config import Settings, load_settings  # noqa: E402
from bot.evaluation import EvalSet, RetrievalResult, evaluate, load_eval_set, markdown_table, score_split, subsample  # noqa: E402
from bot.factory import build_tokenizer, searcher_factories  # noqa: E402

DATASETS = ("lcqmc_dev", "cmrc2018_trial")
TEMPLATES = {"q+m": "{query} {metadata}", "q+m+d": "{query} {metadata} {document}"}


def settings_for(state: Path, template: str | None = None) -> Settings:
    """The repository's config.yaml, with state in ``state`` and optionally another embed template."""
    settings = load_settings(ROOT / "config.yaml")
    settings.state_dir = str(state)
    if template is not None:
        settings.retrieval.dense.embed_template = template
    return settings


def run_dataset(data: EvalSet, limit: int | None, bm25_limit: int | None, work: Path) -> tuple[list[RetrievalResult], list[str]]:
    """Every system on one eval set; returns the results and notes on thresholds."""
    questions = subsample(data.questions, limit)
    results, notes = [], []
    default_template = settings_for(work).retrieval.dense.embed_template
    for label, template in TEMPLATES.items():
        settings = settings_for(work / label, template)
        tokenizer = build_tokenizer(settings)
        tokenizer.add_words(w for e in data.entries for w in e.metadata)
        factories = searcher_factories(settings, tokenizer)
        mark = " (default)" if template == default_template else ""
        timings = {}
        for mode in ("sparse", "dense", "hybrid"):
            searcher = factories[mode]()
            start = time.perf_counter()
            searcher.sync(data.entries)
            # hybrid owns no index: its build cost is that of the two it wraps (synced just before)
            timings[mode] = time.perf_counter() - start if mode != "hybrid" else timings["sparse"] + timings["dense"]
            if mode == "sparse" and label != "q+m":
                continue  # the sparse index does not depend on the embed template: reported once
            name = {"sparse": "sparse (tantivy BM25)", "dense": f"dense fastText [{label}]{mark}",
                    "hybrid": f"hybrid RRF [{label}]{mark}"}[mode]
            print(f"  {data.name}: {name} ...", flush=True)
            results.append(evaluate(name, data.name, lambda q, k, s=searcher: [h.entry.id for h in s.search(q, k)],
                                    questions, timings[mode]))
            if mode in ("sparse", "dense") and (mode == "sparse" or mark):
                split = score_split(lambda q, k, s=searcher: [(h.entry.id, h.score) for h in s.search(q, k)], questions)
                threshold, accuracy = split.best_threshold()
                notes.append(f"{data.name} {mode}: best threshold {threshold:.3f} separates answerable from "
                             f"gold-removed questions with accuracy {accuracy:.3f}")
    results.append(run_rank_bm25(data, questions, bm25_limit))
    return results, notes


def run_rank_bm25(data: EvalSet, questions, bm25_limit: int | None) -> RetrievalResult:
    """rank_bm25.BM25Okapi over the same jieba tokens of query + document + metadata."""
    from rank_bm25 import BM25Okapi

    settings = settings_for(Path(tempfile.mkdtemp()))
    tokenizer = build_tokenizer(settings)
    tokenizer.add_words(w for e in data.entries for w in e.metadata)
    start = time.perf_counter()
    ids = [e.id for e in data.entries]
    bm25 = BM25Okapi([tokenizer.tokenize(f"{e.query} {e.document} {' '.join(e.metadata)}") or [""] for e in data.entries])
    seconds = time.perf_counter() - start

    def search(question: str, k: int) -> list[str]:
        scores = bm25.get_scores(tokenizer.tokenize(question))
        return [ids[i] for i in scores.argsort()[::-1][:k]]

    subset = subsample(questions, bm25_limit)
    note = f"subsampled to {len(subset)} questions" if len(subset) < len(questions) else ""
    print(f"  {data.name}: rank_bm25 ...", flush=True)
    return evaluate("baseline rank_bm25 BM25Okapi", data.name, search, subset, seconds, note=note)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 with a message when the data is absent."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="subsample N questions per dataset (quick runs)")
    parser.add_argument("--bm25-limit", type=int, default=None, help="subsample rank_bm25's questions (it is slow)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    root = data_dir()
    present = [d for d in DATASETS if (root / d / "knowledge.json").is_file() and (root / d / "eval.jsonl").is_file()]
    if not present:
        print(f"benchmark skipped: no evaluation data under {root} (set KBBOT_DATA to its folder)")
        return 0
    results, notes = [], []
    with tempfile.TemporaryDirectory(prefix="kbbot-bench-") as tmp:
        for name in present:
            data = load_eval_set(root / name)
            print(f"{name}: {len(data.entries)} entries, {len(data.questions)} questions", flush=True)
            r, n = run_dataset(data, args.limit, args.bm25_limit, Path(tmp) / name)
            results += r
            notes += n
    table = markdown_table(results)
    print(table)
    print("\n".join(notes))
    if not args.no_write:
        body = "\n".join([
            "## Retrieval",
            "",
            f"`python -m benchmarks.retrieval{' --limit ' + str(args.limit) if args.limit else ''}` "
            f"({time.strftime('%Y-%m-%d')}, one process, config.yaml defaults; index s = build time, hybrid = "
            "sparse + dense since it wraps both). q+m = embed `{query} {metadata}`, q+m+d adds `{document}`.",
            "",
            table,
            "",
            "Thresholds (gold removed = the same question with its gold entry taken out of the ranking):",
            "",
            *(f"- {n}" for n in notes),
        ])
        write_section("retrieval", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
