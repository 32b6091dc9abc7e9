"""How long the analytics page takes to compute every tile on a synthetic log of one million turns.

The log is written straight into a TurnLog's SQLite file (indexes dropped during the bulk insert and rebuilt by
reopening it, as a real log has them): 90 days, 5,000 distinct questions drawn Zipf-like, three front ends, three
modes, six strategies, 10% rated, JSON hits, thresholds and timings like the bot's, 70% of turns with a used entry.
Times the p50 of a few runs of ``Analytics.compute`` without a filter and with a 7-day, one-mode, one-source filter.

    python -m benchmarks.analytics [--turns 1000000] [--runs 5] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.common import write_section
from bot.config.settings import LogSettings
from bot.conversations import rollup
from bot.conversations.analytics import Analytics
from bot.conversations.tiles import StatsFilter
from bot.conversations.turn_log import SQLITE, TurnLog, utc_iso

END = datetime(2026, 11, 1, tzinfo=UTC)
STRATEGIES = ["direct", "verbatim", "rewrite", "hyde", "last_resort", "refused"]
WEIGHTS = [50, 15, 10, 12, 12, 1]


def build(path: Path, turns: int, seed: int = 7) -> list[str]:
    """A log of ``turns`` synthetic turns at ``path``; the entry ids the knowledge would hold."""
    rng = random.Random(seed)
    TurnLog(path, retention_days=0, retention_rows=0).close()
    conn = sqlite3.connect(path, isolation_level=None)
    indexes = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")]
    for name in indexes:
        conn.execute(f"DROP INDEX {name}")
    entries = [f"faq:{n}" for n in range(2000)]
    questions = [f"问题 {n} 怎么办" for n in range(5000)]
    span = 90 * 86400
    conn.execute("BEGIN")
    turn_rows, used_rows = [], []
    for i in range(1, turns + 1):
        when = utc_iso(END - timedelta(seconds=span * (1 - i / turns)))
        q = questions[min(int(rng.paretovariate(1.1)) - 1, len(questions) - 1)]
        strategy = rng.choices(STRATEGIES, WEIGHTS)[0]
        rel = round(rng.random(), 4)
        entry = entries[rng.randrange(len(entries))]
        used = strategy in ("direct", "verbatim", "rewrite")
        hit = {"id": entry, "query": q, "relevance": rel, "score": rel, "searcher": "sparse", "passed": rel >= 0.5}
        hits = json.dumps([dict(hit, used=used)], ensure_ascii=False)
        timings = {"retrieve": rng.uniform(2, 20), "llm": rng.uniform(200, 2000)}
        timings["total"] = sum(timings.values())
        rating = rng.choice([1, -1]) if rng.random() < 0.1 else None
        turn_rows.append(
            (
                i,
                when,
                f"s{i % 997}",
                rng.choice(["web", "api", "cli"]),
                q,
                q,
                strategy,
                rng.choice(["sparse", "hybrid", "follow"]),
                hits,
                '{"system": "sparse", "answer": 0.5, "direct": 0.9}',
                json.dumps(timings),
                timings["total"],
                0,
                1,
                rating,
                rel,
            )
        )
        if used:
            used_rows.append((i, entry, when, turn_rows[-1][3], turn_rows[-1][7]))
        if len(turn_rows) >= 50_000:
            _flush(conn, turn_rows, used_rows)
    _flush(conn, turn_rows, used_rows)
    rollup.rebuild(conn, SQLITE)  # as the TurnLog's migration does for a log written before the rollup existed
    conn.execute("COMMIT")
    conn.close()
    TurnLog(path, retention_days=0, retention_rows=0).close()  # opening creates the dropped indexes again
    return entries


def _flush(conn: sqlite3.Connection, turn_rows: list, used_rows: list) -> None:
    conn.executemany(
        "INSERT INTO turns (id, time, session, source, question, norm, strategy, mode, hits, thresholds, timings, "
        "latency_ms, llm_used, finished, rating, top_relevance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        turn_rows,
    )
    conn.executemany("INSERT INTO used VALUES (?, ?, ?, ?, ?)", used_rows)
    turn_rows.clear()
    used_rows.clear()


def timed(analytics: Analytics, flt: StatsFilter, entries: list[str], runs: int) -> float:
    """p50 seconds of ``runs`` computations of every tile."""
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        analytics.compute(flt, entries, now=END)
        took.append(time.perf_counter() - t)
    return statistics.median(took)


def main() -> None:
    """Build the log, time the page, write the BENCHMARKS.md section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "turns.sqlite"
        t = time.perf_counter()
        entries = build(path, args.turns)
        built = time.perf_counter() - t
        size = os.path.getsize(path) / 2**20
        turn_log = TurnLog(path, retention_days=0, retention_rows=0)
        defaults = LogSettings()
        analytics = Analytics(turn_log, defaults.analytics_top, defaults.analytics_sample)
        cases = {
            "no filter (90 days)": StatsFilter(),
            "7 days, mode hybrid, source web": StatsFilter(
                since=END - timedelta(days=7), until=END, mode="hybrid", source="web"
            ),
            "mode hybrid only": StatsFilter(mode="hybrid"),
        }
        results = {name: timed(analytics, flt, entries, args.runs) for name, flt in cases.items()}
        turn_log.close()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs ({platform.processor() or platform.platform()}), SQLite {sqlite3.sqlite_version}"
    lines = [
        "## Analytics page on one million turns",
        "",
        f"`python -m benchmarks.analytics --turns {args.turns} --runs {args.runs}`: a synthetic log of "
        f"{args.turns:,} turns ({size:.0f} MiB file, built in {built:.0f} s) over 90 days, 5,000 distinct questions "
        "(Zipf-like), 2,000 entries, three front ends, three modes, six strategies, 10% rated. Time to compute every "
        "tile (`Analytics.compute`, p50 of the runs), with the 2 CPUs shared with other work:",
        "",
        "| filter | every tile, p50 |",
        "|---|---|",
        *(f"| {name} | {secs * 1000:.0f} ms |" for name, secs in results.items()),
        "",
        f"Machine: {machine}. The data are synthetic (seeded, `build()` in the script). Counts per hour and per day "
        "come from the log's rollup tables (hourly, daily_relevance, daily_hits; kept in the same transaction as "
        "each turn), the partial hours/days at the edges of a time filter and top/trending questions from covering "
        "indexes (turns_stats, turns_norm, used_mode, used_source); latency percentiles read the JSON timings of the "
        "newest 20,000 turns in range (log.analytics_sample). A mode or front-end filter reads per-entry hits from "
        "the used table (the rollup is not split by them), the slowest case.",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("analytics", body)


if __name__ == "__main__":
    main()
