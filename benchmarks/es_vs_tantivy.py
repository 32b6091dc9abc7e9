"""Indexing time and query latency of the Elasticsearch backend (on osmem-server) beside the embedded tantivy one.

    python benchmarks/es_vs_tantivy.py [--data ../shared/data/lcqmc_dev] [--queries 2000]

Prints a markdown table and replaces the section between the elasticsearch markers in BENCHMARKS.md.
Exits 0 with a message when osmem-server or the data set is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, write_section
from bot.config.settings import load_settings
from bot.evaluation import percentile

# the product's, for both engines (as the factory passes them: field name -> weight)
WEIGHTS: dict[str, int] = dict(load_settings(ROOT / "config.yaml").retrieval.sparse.field_weights.items())


def measure(searcher, entries, questions, gold) -> dict:
    """Index from scratch, then run every question once: timings plus hit@1 / hit@5 against the gold ids."""
    start = time.perf_counter()
    searcher.sync(entries)
    index_s = time.perf_counter() - start
    lat, top1, at1, at5 = [], [], 0, 0
    for q, g in zip(questions, gold):
        t = time.perf_counter()
        hits = searcher.search(q, 5)
        lat.append((time.perf_counter() - t) * 1000)
        got = [h.entry.id for h in hits]
        top1.append(got[0] if got else None)
        at1 += bool(got) and got[0] in g
        at5 += bool(set(got) & g)
    n = len(questions)
    return {
        "index_s": index_s,
        "p50": percentile(lat, 50),
        "p95": percentile(lat, 95),
        "hit1": at1 / n,
        "hit5": at5 / n,
        "top1": top1,
    }


def main(argv=None) -> int:
    """Run the comparison; 0 also when skipped for a missing server or data set."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=data_dir() / "lcqmc_dev")
    ap.add_argument("--queries", type=int, default=0, help="use only the first N questions (0 = all)")
    ap.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = ap.parse_args(argv)
    from tests.support.es_server import client_for, osmem_available

    if not osmem_available():
        print("skipped: osmem-server is not installed (pip install osmem-server)")
        return 0
    if not (args.data / "knowledge.json").is_file() or not (args.data / "eval.jsonl").is_file():
        print(f"skipped: no knowledge.json / eval.jsonl under {args.data}")
        return 0

    from osmem_server import OsmemServer

    from bot.knowledge.entries import load_entries
    from bot.search.es_searcher import ElasticsearchSearcher
    from bot.search.tantivy_searcher import TantivySearcher
    from bot.search.tokenizer import Tokenizer

    entries = load_entries(args.data)
    rows = [
        json.loads(line) for line in (args.data / "eval.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    rows = rows[: args.queries] if args.queries else rows
    questions = [r["question"] for r in rows]
    gold = [{f"knowledge:{g}" for g in r.get("gold_ids", [])} for r in rows]

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = Tokenizer(cache_dir=Path(tmp) / "jieba")
        tokenizer.add_words(w for e in entries for w in e.metadata)
        t = time.perf_counter()
        for e in entries:  # also warms jieba, so neither backend pays its dictionary load
            tokenizer.tokenize(e.query), tokenizer.tokenize(e.document)
        tokenize_s = time.perf_counter() - t
        results = {
            "tantivy": measure(TantivySearcher(Path(tmp) / "tantivy", tokenizer, WEIGHTS), entries, questions, gold)
        }
        with OsmemServer.start(japanese=False) as server:
            es = ElasticsearchSearcher(client_for(server.url, request_timeout=30), "bench", tokenizer, WEIGHTS)
            results["elasticsearch (osmem-server)"] = measure(es, entries, questions, gold)
            pings = []
            for _ in range(200):  # the floor under every ES query: one HTTP round trip through the client
                t = time.perf_counter()
                es.client.info()
                pings.append((time.perf_counter() - t) * 1000)
            version = server.version

    agree = sum(a == b for a, b in zip(*(r["top1"] for r in results.values()))) / len(questions)
    lines = [
        "## Elasticsearch backend vs embedded tantivy",
        "",
        f"LCQMC dev: {len(entries):,} entries, {len(questions):,} questions (top 5). Python {platform.python_version()}, "
        f"{platform.machine()}, osmem-server {version} (in-memory ES-API server, not a real cluster). "
        f"Indexing includes jieba tokenising ({tokenize_s:.1f} s of it, measured alone beforehand) and, for ES, "
        "bulk requests in chunks of 500 plus one refresh. Produced by `python benchmarks/es_vs_tantivy.py`.",
        "",
        "| backend | index build (s) | query p50 (ms) | query p95 (ms) | hit@1 | hit@5 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['index_s']:.2f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['hit1']:.3f} | {r['hit5']:.3f} |"
        )
    lines += [
        "",
        f"Top-1 agreement between the two: {agree:.1%} (osmem's BM25 length normalisation differs from "
        "Lucene's/tantivy's, so small ranking differences are expected). ES query latency includes the HTTP "
        f"round trip on localhost: a bare `GET /` through the same client takes p50 {percentile(pings, 50):.2f} ms. "
        f"Machine: {os.cpu_count()} CPUs.",
    ]
    body = "\n".join(lines)
    print(body)
    write_section("elasticsearch", body, args.out)
    print(f"\nwrote the elasticsearch section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
