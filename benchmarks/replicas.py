"""Load on one app replica against two: the same clients through the OpenAI-compatible API, shared search and log.

    .venv/bin/python -m benchmarks.replicas [--clients 16] [--seconds 60] [--chunk-delay 0.005] [--quick] [--no-write]

Every replica is a ``python -m bot serve`` process of its own (tests/support/replicas.py) with sparse retrieval on one
osmem-server (the OpenSearch-compatible test server), the knowledge, the conversation log and the limits in one PostgreSQL
(``$KBBOT_PG_DSN`` when set, else a throwaway local server as the tests start it), and the scripted streaming LLM of
tests/support/llm_server.py. Clients are threads sending the starter-knowledge questions as
``POST /v1/chat/completions`` (streamed), spread over the replicas in turn, as a round-robin load balancer does.
At the end the log table is counted: every answered request must be one logged turn ("lost" = answered - logged).
Writes its table into BENCHMARKS.md between the replicas markers.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx

from benchmarks.common import write_section
from bot.evaluation import percentile
from tests.support.es_server import start_server
from tests.support.llm_server import LocalLLMServer
from tests.support.postgres import PgServer, skip_reason
from tests.support.replicas import Replica, starter_config, write_config

QUESTIONS = ["这个机器人是什么？", "怎么添加知识？", "怎么连接 DeepSeek？", "How do I switch to dense retrieval?"]
TOKEN = "replica-bench-token"
REPLY = "根据参考资料 [1]，这是模拟的大模型回答，用来让流式输出有一定长度。" * 2


@dataclass
class Tally:
    """What the clients saw in one run."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, latency: float | None, error: str | None = None) -> None:
        """Count one request (a latency, or an error)."""
        with self.lock:
            if error is not None:
                self.errors.append(error)
            elif latency is not None:
                self.latencies.append(latency)


def ask_until(urls: list[str], turn: itertools.count, deadline: float, tally: Tally) -> None:
    """One client: streamed chat requests, each to the next replica in turn, until ``deadline``."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=60) as http:
        while time.monotonic() < deadline:
            n = next(turn)
            body = {
                "model": "kbbot",
                "stream": True,
                "messages": [{"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]}],
            }
            start = time.perf_counter()
            try:
                with http.stream("POST", f"{urls[n % len(urls)]}/v1/chat/completions", json=body, headers=headers) as r:
                    text = "".join(r.iter_text())
                if r.status_code != 200 or "[DONE]" not in text:
                    tally.add(None, f"HTTP {r.status_code}: {text[:160]}")
                    continue
            except httpx.HTTPError as exc:
                tally.add(None, f"{type(exc).__name__}: {exc}")
                continue
            tally.add(time.perf_counter() - start)


def logged_turns(dsn: str) -> int:
    """Turns in the shared log table."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        try:
            row = conn.execute("SELECT count(*) FROM turns").fetchone()
        except psycopg.errors.UndefinedTable:  # no replica has started on this database yet
            return 0
    return int(row[0]) if row else 0


def run(replicas: int, clients: int, seconds: float, dsn: str, es_url: str, llm_url: str, work: Path) -> dict:
    """Start ``replicas`` app processes on one log schema, drive ``clients`` for ``seconds``, and count."""
    env = {"KBBOT_PG_DSN": dsn, "KBBOT_API_TOKEN": TOKEN, "KBBOT_REPLICA_LLM_KEY": "sk-local-not-a-real-key"}
    index = f"kbbot-replicas-{replicas}-{os.getpid()}"
    limits = {"backend": "postgres", "chat_per_minute": 0}
    started = []
    for i in range(replicas):
        folder = work / f"r{replicas}-{i}"
        config = starter_config(folder / "state", es_url, index, llm_url, limits=limits)
        started.append(Replica(f"r{i}", write_config(config, folder / "config.yaml"), env))
    before = logged_turns(dsn)
    try:
        for replica in started:
            replica.wait_ready(TOKEN)
        tally, turn = Tally(), itertools.count()
        urls = [r.url for r in started]
        deadline = time.monotonic() + seconds
        start = time.monotonic()
        threads = [
            threading.Thread(target=ask_until, args=(urls, turn, deadline, tally), daemon=True) for _ in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=seconds + 90)
        elapsed = time.monotonic() - start
        time.sleep(2.0)  # a turn is logged after its reply's last chunk: give the last ones time to land
        logged = logged_turns(dsn) - before
    finally:
        for replica in started:
            replica.stop()
    ok = len(tally.latencies)
    return {
        "replicas": replicas,
        "clients": clients,
        "seconds": seconds,
        "requests": ok + len(tally.errors),
        "ok": ok,
        "errors": len(tally.errors),
        "lost": ok - logged,
        "logged": logged,
        "p50": percentile(tally.latencies, 50),
        "p95": percentile(tally.latencies, 95),
        "throughput": ok / elapsed if elapsed else 0.0,
        "error_samples": tally.errors[:3],
    }


def section(results: list[dict], chunk_delay: float) -> str:
    """The BENCHMARKS.md section for these runs."""
    base = results[0]["throughput"] or 1.0
    lines = [
        "| replicas | clients | seconds | requests | errors | lost turns | p50 (s) | p95 (s) | throughput (req/s) | vs one |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['replicas']} | {r['clients']} | {r['seconds']:g} | {r['requests']} | {r['errors']} | {r['lost']} | "
            f"{r['p50']:.3f} | {r['p95']:.3f} | {r['throughput']:.1f} | {r['throughput'] / base:.2f}x |"
        )
    return (
        "## Replicas (two app processes, one search server, one PostgreSQL)\n\n"
        f"`python -m benchmarks.replicas` ({time.strftime('%Y-%m-%d')}; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs shared by the replicas, the search server, PostgreSQL, the LLM stand-in and the "
        "clients). Each replica is its own `python -m bot serve` process; retrieval is sparse on one osmem-server "
        "index, the knowledge (`knowledge.shared`: one generation check per message), the log and the limits are in one "
        "PostgreSQL schema; the clients stream "
        "`/v1/chat/completions` for the starter-knowledge questions, spread round-robin over the replicas. The LLM "
        f"stand-in streams 4-character chunks {chunk_delay * 1000:g} ms apart. Lost turns = answered requests "
        "missing from the shared log. One app process does its turn work on about one core (Python's GIL); a "
        "second replica uses the machine's second core, which the servers and clients also need, so the ratio is "
        "a floor for what a second machine adds.\n\n" + "\n".join(lines) + "\n"
    )


def main(argv=None) -> int:
    """Run one replica then two with the same clients; exit 1 on any error or lost turn."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--chunk-delay", type=float, default=0.005, help="seconds between streamed LLM chunks")
    p.add_argument("--quick", action="store_true", help="4 clients x 5 s, for a smoke test")
    p.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.seconds = 4, 5.0
    own_pg = None
    if not os.environ.get("KBBOT_PG_DSN"):
        reason = skip_reason()
        if reason:
            print(f"skipped: no PostgreSQL ({reason})")
            return 0
        own_pg = PgServer()
    es = start_server()
    llm = LocalLLMServer()
    llm.reply, llm.chunk_delay = (lambda body: REPLY), args.chunk_delay
    llm.start()
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="kbbot-replicas-") as tmp:
            for count in (1, 2):
                dsn = own_pg.dsn(own_pg.new_schema()) if own_pg else os.environ["KBBOT_PG_DSN"]
                result = run(count, args.clients, args.seconds, dsn, es.url, llm.url, Path(tmp))
                print(result)
                results.append(result)
    finally:
        llm.stop()
        es.close()
        if own_pg:
            own_pg.close()
    text = section(results, args.chunk_delay)
    print(text)
    if not args.no_write and not args.quick:
        write_section("replicas", text)
    return 1 if any(r["errors"] or r["lost"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
