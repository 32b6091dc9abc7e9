"""Load test of the conversation log: concurrent writer threads recording turns into one SQLite TurnLog.

    .venv/bin/python -m benchmarks.log_load [--threads 20] [--seconds 60] [--readers 1] [--pause 0] [--quick]

Each writer records turns as fast as it can, or ``--pause`` seconds apart (every tenth one also gets a thumbs
down), while ``--readers`` threads run the admin queries (recent, unanswered, hit counts) in a loop. At the end the log is reopened with a
fresh connection and every returned turn id is looked for. Prints turns written, lost, "database is locked"
errors, other errors and the p50/p95/p99/max latency of ``record``. Writes nothing but a temp folder.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_section
from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.conversations.turn_log import TurnLog
from bot.evaluation import percentile
from bot.knowledge.entries import Entry
from bot.search.base import Hit

ENTRIES = [Entry(f"faq:{i}", f"问题{i}的标题", f"第{i}条知识的正文，" * 5, ("关键词",)) for i in range(20)]
CUT = Cutoffs("hybrid-e5", 0.81, 0.93)


def make_answer(n: int, i: int) -> Answer:
    """A realistic turn: five hits, one or two used, every fifth a last resort."""
    hits = [Hit(ENTRIES[(n + i + k) % 20], 0.9 - k * 0.05, 12.0 - k, "hybrid") for k in range(5)]
    last = i % 5 == 0
    return Answer(
        question=f"用户{n}的第{i}个问题：图书馆几点开门？",
        text="回答正文。" * 40,
        strategy=Strategy.LAST_RESORT if last else Strategy.DIRECT,
        mode="hybrid",
        hits=[] if last else hits[:2],
        candidates=hits,
        thresholds=CUT,
        llm="gpt-4o-mini",
        llm_used=not last,
        timings={"retrieve": 12.0, "llm": 800.0, "total": 815.0},
    )


def run(
    threads: int, seconds: float, readers: int, folder: Path, retention_rows: int = 100_000, pause: float = 0.0
) -> dict:
    """Hammer one TurnLog in ``folder``; the counts and latencies (turns pruned by ``retention_rows`` are not lost)."""
    path = folder / "turns.sqlite"
    turn_log = TurnLog(path, retention_days=90, retention_rows=retention_rows)
    ids: list[int] = []
    latencies: list[float] = []
    errors = {"locked": 0, "other": 0, "reads": 0}
    samples: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def failed(kind: str, exc: Exception) -> None:
        with lock:
            errors[kind] += 1
            if len(samples) < 3:
                samples.append(f"{type(exc).__name__}: {exc}")

    def writer(n: int) -> None:
        i = 0
        while time.monotonic() < stop:
            answer = make_answer(n, i)
            t = time.perf_counter()
            try:
                turn_id = turn_log.record(answer, f"session-{n}", source="web")
                if i % 10 == 0:
                    turn_log.feedback(turn_id, -1, "load test")
            except Exception as exc:
                locked = "locked" in str(exc)
                failed("locked" if locked else "other", exc)
            else:
                with lock:
                    ids.append(turn_id)
                    latencies.append((time.perf_counter() - t) * 1000)
            i += 1
            time.sleep(pause)

    def reader() -> None:
        while time.monotonic() < stop:
            try:
                turn_log.recent(50)
                turn_log.unanswered(20)
                turn_log.hit_counts()
            except Exception as exc:
                failed("reads", exc)
            time.sleep(0.5)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    workers += [threading.Thread(target=reader) for _ in range(readers)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    turn_log.close()
    fresh = TurnLog(path, retention_days=0, retention_rows=0)
    stored = {t["id"] for t in fresh.recent(limit=len(ids) + 1)}
    fresh.close()
    expected = sorted(ids)[-retention_rows:] if retention_rows else ids
    return {
        "written": len(ids),
        "lost": len(set(expected) - stored),
        "kept": len(stored),
        "elapsed": elapsed,
        **errors,
        "samples": samples,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "p99": percentile(latencies, 99),
        "max": max(latencies, default=0.0),
        "bytes": path.stat().st_size,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the load test and print its numbers; exit 1 when a turn was lost or a write failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=1, help="threads running the admin queries meanwhile")
    parser.add_argument("--retention-rows", type=int, default=100_000, help="log.retention_rows (0 = no limit)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each writer waits between turns")
    parser.add_argument("--quick", action="store_true", help="5 seconds, BENCHMARKS.md left alone")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory(prefix="kbbot-log-load-") as tmp:
        r = run(args.threads, seconds, args.readers, Path(tmp), args.retention_rows, args.pause)
    print(
        f"conversation log load: {args.threads} writer threads + {args.readers} reader(s) for {seconds:g} s, "
        f"{f'{args.pause:g} s between turns' if args.pause else 'no pause'} "
        f"({platform.python_implementation()} {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs)"
    )
    print(f"  turns written  {r['written']} ({r['written'] / r['elapsed']:.0f}/s), file {r['bytes'] / 1e6:.1f} MB")
    print(f"  turns lost     {r['lost']}   kept after retention ({args.retention_rows or 'no limit'}) {r['kept']}")
    print(f"  lock errors    {r['locked']}   other write errors {r['other']}   read errors {r['reads']}")
    print(
        f"  record latency p50 {r['p50']:.2f} ms  p95 {r['p95']:.2f} ms  p99 {r['p99']:.2f} ms  max {r['max']:.1f} ms"
    )
    for sample in r["samples"]:
        print(f"  e.g. {sample}")
    if not (args.quick or args.no_write):
        write_section(
            "log-load",
            "\n".join(
                [
                    "## Conversation log under load",
                    "",
                    f"`python -m benchmarks.log_load` ({time.strftime('%Y-%m-%d')}; SQLite {sqlite3.sqlite_version}, "
                    f"{os.cpu_count()} CPUs): {args.threads} writer threads record synthetic turns as fast as they can into "
                    f"one TurnLog (WAL) for {seconds:g} s while {args.readers} reader thread(s) run the admin queries; "
                    f"retention {args.retention_rows or 'off'} rows.",
                    "",
                    "| turns written | per second | lost | lock errors | other errors | record p50 / p95 / p99 / max ms |",
                    "|---|---|---|---|---|---|",
                    f"| {r['written']:,} | {r['written'] / r['elapsed']:.0f} | {r['lost']} | {r['locked']} | {r['other']} | "
                    f"{r['p50']:.2f} / {r['p95']:.1f} / {r['p99']:.1f} / {r['max']:.0f} |",
                ]
            ),
        )
    return 1 if r["lost"] or r["locked"] or r["other"] else 0


if __name__ == "__main__":
    sys.exit(main())
