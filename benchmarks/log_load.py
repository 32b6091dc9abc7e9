"""Load test of the conversation log: concurrent writer threads recording turns into one log, SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.log_load [--threads 20] [--seconds 60] [--readers 1] [--pause 0] [--quick]
        [--backend both|sqlite|postgres]

PostgreSQL is the server in ``$KBBOT_PG_DSN`` when set, else a throwaway local one (tests/support/postgres.py, as
the tests start it: Debian's initdb + pg_ctl, fsync off); without either only SQLite runs.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_section
from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.chat.recorder import row_of
from bot.conversations.log_store import ConversationLog
from bot.conversations.pg_log import PgTurnLog
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


Opener = Callable[[int, int], ConversationLog]  # (retention_days, retention_rows) -> a log on the same store


def run(
    threads: int, seconds: float, readers: int, opener: Opener, retention_rows: int = 100_000, pause: float = 0.0
) -> dict:
    """Hammer one log from ``opener``; the counts and latencies (turns pruned by ``retention_rows`` are not lost)."""
    turn_log = opener(90, retention_rows)
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
                turn_id = turn_log.record(row_of(answer), f"session-{n}", source="web")
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
    fresh = opener(0, 0)
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
    }


@contextmanager
def postgres() -> Iterator[str | None]:
    """A DSN: $KBBOT_PG_DSN, else a throwaway local server's (None when neither is possible)."""
    if os.environ.get("KBBOT_PG_DSN"):
        yield os.environ["KBBOT_PG_DSN"]
        return
    from tests.support.postgres import PgServer, skip_reason

    reason = skip_reason()
    if reason:
        print(f"PostgreSQL skipped: {reason}")
        yield None
        return
    server = PgServer()
    try:
        yield server.dsn(server.new_schema())
    finally:
        server.close()


def measure(backends: list[str], args: argparse.Namespace, seconds: float) -> dict[str, dict]:
    """backend -> the numbers of :func:`run` on it."""
    out = {}
    common = (args.threads, seconds, args.readers)
    if "sqlite" in backends:
        with tempfile.TemporaryDirectory(prefix="kbbot-log-load-") as tmp:
            path = Path(tmp) / "turns.sqlite"
            opener: Opener = lambda days, rows: TurnLog(path, retention_days=days, retention_rows=rows)
            out["SQLite " + sqlite3.sqlite_version] = run(*common, opener, args.retention_rows, args.pause)
    if "postgres" in backends:
        with postgres() as dsn:
            if dsn is not None:
                pg: Opener = lambda days, rows: PgTurnLog(dsn, retention_days=days, retention_rows=rows)
                log = pg(0, 0)
                version = log.query("SHOW server_version")[0][0].split()[0]
                log.close()
                out["PostgreSQL " + version] = run(*common, pg, args.retention_rows, args.pause)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the load test and print its numbers; exit 1 when a turn was lost or a write failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=1, help="threads running the admin queries meanwhile")
    parser.add_argument("--retention-rows", type=int, default=100_000, help="log.retention_rows (0 = no limit)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each writer waits between turns")
    parser.add_argument("--backend", choices=("both", "sqlite", "postgres"), default="both")
    parser.add_argument("--quick", action="store_true", help="5 seconds, BENCHMARKS.md left alone")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    seconds = 5.0 if args.quick else args.seconds
    results = measure(["sqlite", "postgres"] if args.backend == "both" else [args.backend], args, seconds)
    print(
        f"conversation log load: {args.threads} writer threads + {args.readers} reader(s) for {seconds:g} s, "
        f"{f'{args.pause:g} s between turns' if args.pause else 'no pause'} "
        f"({platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs)"
    )
    for backend, r in results.items():
        print(f"  {backend}: turns written {r['written']} ({r['written'] / r['elapsed']:.0f}/s)")
        print(
            f"    turns lost     {r['lost']}   kept after retention ({args.retention_rows or 'no limit'}) {r['kept']}"
        )
        print(f"    lock errors    {r['locked']}   other write errors {r['other']}   read errors {r['reads']}")
        print(
            f"    record latency p50 {r['p50']:.2f} ms  p95 {r['p95']:.2f} ms  p99 {r['p99']:.2f} ms  max {r['max']:.1f} ms"
        )
        for sample in r["samples"]:
            print(f"    e.g. {sample}")
    if not (args.quick or args.no_write):
        rows = [
            f"| {backend} | {r['written']:,} | {r['written'] / r['elapsed']:.0f} | {r['lost']} | {r['locked']} | "
            f"{r['other']} | {r['p50']:.2f} / {r['p95']:.1f} / {r['p99']:.1f} / {r['max']:.0f} |"
            for backend, r in results.items()
        ]
        write_section(
            "log-load",
            "\n".join(
                [
                    "## Conversation log under load",
                    "",
                    f"`python -m benchmarks.log_load` ({time.strftime('%Y-%m-%d')}; {os.cpu_count()} CPUs shared with "
                    f"other work, load average {os.getloadavg()[0]:.1f} at the end): "
                    f"{args.threads} writer threads record synthetic turns as fast as they can into one log for "
                    f"{seconds:g} s per backend while {args.readers} reader thread(s) run the admin queries; retention "
                    f"{args.retention_rows or 'off'} rows. SQLite in WAL mode; PostgreSQL a local server on the same "
                    "machine (fsync off, as the tests start it), one connection per writer thread.",
                    "",
                    "| backend | turns written | per second | lost | lock errors | other errors | "
                    "record p50 / p95 / p99 / max ms |",
                    "|---|---|---|---|---|---|---|",
                    *rows,
                ]
            ),
        )
    failed = any(r["lost"] or r["locked"] or r["other"] for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
