"""Load test of the browser app: N concurrent chat sessions through the Gradio API, each with its own history.

    .venv/bin/python -m benchmarks.load [--sessions 50] [--seconds 60] [--concurrency 16] [--quick] [--no-write]

Everything runs on 127.0.0.1 in this process: the app (build_bot + build_demo, queued like app.py) over the
starter knowledge with state in a temp folder, and the scripted LLM server from tests/support/llm_server.py. The LLM
echoes the session token of the question it answers, how many earlier user turns of the same conversation
reached it, and which sessions those turns came from, so every reply can be checked for cross-talk between
sessions. Writes its table into BENCHMARKS.md between the load markers (other sections are left alone).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_section
from bot.chat.llm import OpenAIChat
from bot.config.llm import LLMSettings
from bot.config.settings import Settings, load_settings
from bot.config.variants import replace
from bot.evaluation import percentile
from bot.factory import build_bot, build_knowledge_base
from bot.texts import RATE_LIMITED
from tests.support.llm_server import LocalLLMServer

QUESTIONS = [
    "这个机器人是什么？",
    "怎么添加知识？",
    "怎么连接 DeepSeek？",
    "How do I switch to dense retrieval?",
    "怎么切换检索模式？",
    "阈值是什么意思？",
    "What is HyDE?",
    "如何重建索引？",
]
TOKEN = re.compile(r"\[S(\d+)-T(\d+)\]")
REWRITE_MARK, HYDE_MARK = "Standalone question:", "Answer the question below"
FILLER = "根据参考资料 [1]，这是模拟的大模型回答，用来让流式输出有一定长度。"


def echo_reply(body: dict) -> str:
    """The scripted LLM: name the session and turn asked about, and what history of whose arrived with it."""
    messages = body["messages"]
    last = messages[-1]["content"]
    if REWRITE_MARK in last:  # keep the follow-up as it is, so retrieval sees the session's own question
        return last.split("Last question: ")[-1].splitlines()[0].strip()
    if HYDE_MARK in last:
        return last.strip().splitlines()[-1]
    found = TOKEN.findall(last)
    if not found:
        return "no session token in the question"
    session, turn = found[-1]
    prior = [m for m in messages[:-1] if m["role"] == "user" and TOKEN.search(m["content"])]
    sessions = sorted({s for m in prior for s, _ in TOKEN.findall(m["content"])} | {session})
    return f"<S{session}-T{turn}> prior={len(prior)} sessions={','.join(sessions)} · {FILLER}"


def reply_text(history: list) -> str:
    """The last message's text, whether Gradio sent a string or a list of parts."""
    content = history[-1]["content"] if history else ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content if isinstance(p, dict))


@dataclass
class SessionStats:
    """What one session saw."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    crosstalk: list[str] = field(default_factory=list)
    rate_limited: int = 0


def run_session(
    url: str,
    index: int,
    deadline: list[float],
    ready: threading.Barrier,
    max_turns: int,
    history_turns: int,
    stats: SessionStats,
) -> None:
    """One user: its own client and history; asks until ``deadline[0]`` (or ``max_turns``), checking each reply.

    The deadline is read through a list because it is only set once every session has connected.
    """
    from gradio_client import Client

    try:
        client = Client(url, verbose=False)
    except Exception as exc:
        stats.errors.append(f"connect: {type(exc).__name__}: {exc}")
        ready.wait()
        return
    ready.wait()
    history: list = []
    turn = 0
    while time.monotonic() < deadline[0] and turn < max_turns:
        question = f"{QUESTIONS[(index + turn) % len(QUESTIONS)]} [S{index:02d}-T{turn:02d}]"
        start = time.perf_counter()
        try:
            history, _, _ = client.predict(question, history, "sparse", api_name="/chat")
        except Exception as exc:
            stats.errors.append(
                f"S{index:02d}-T{turn:02d} after {time.perf_counter() - start:.1f} s: "
                f"{type(exc).__name__}: {str(exc)[:200]}"
            )
            turn += 1
            time.sleep(0.2)  # a failing app must not be hammered in a tight loop
            continue
        stats.latencies.append(time.perf_counter() - start)
        reply = reply_text(history)
        if reply == RATE_LIMITED:  # the app said "slow down": counted apart, and the turn is taken back
            stats.rate_limited += 1
            history = history[:-2]
            time.sleep(1.0)
            continue
        expected = f"&lt;S{index:02d}-T{turn:02d}&gt; prior={min(turn, history_turns)} sessions={index:02d} "
        if expected not in reply:
            stats.crosstalk.append(f"S{index:02d}-T{turn:02d} got: {reply[:120]}")
        turn += 1
    client.close()


def serve(base: Settings, state: Path, concurrency: int, llm_url: str, rate_limit: int):
    """Build the app like app.py does (starter knowledge, temp state) and serve it on a free loopback port."""
    import socket

    from bot.ui.app import build_demo

    settings = base.model_copy(deep=True)
    settings = replace(settings, "state_dir", str(state))
    settings = replace(settings, "retrieval.mode", "sparse")
    settings = replace(settings, "ui.rate_limit_per_minute", rate_limit)
    llm_block = LLMSettings(base_url=llm_url, model="local-load", timeout=30, max_retries=0)
    llm = OpenAIChat(llm_block, "sk-local-load-not-a-real-key")
    bot = build_bot(settings, llm=llm)
    demo = build_demo(build_knowledge_base(settings, bot), settings).queue(default_concurrency_limit=concurrency)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return demo, f"http://127.0.0.1:{port}/", settings


def run(
    sessions: int,
    seconds: float,
    concurrency: int,
    chunk_delay: float = 0.005,
    rate_limit: int = 0,
    max_turns: int = 10_000,
    settings: Settings | None = None,
) -> dict:
    """Serve the app, drive ``sessions`` users for ``seconds``, and return the figures."""
    base = settings or load_settings(ROOT / "config.yaml")
    server = LocalLLMServer()
    server.reply, server.chunk_delay = echo_reply, chunk_delay
    server.start()
    with tempfile.TemporaryDirectory(prefix="kbbot-load-") as tmp:
        demo, url, settings = serve(base, Path(tmp) / "state", concurrency, server.url, rate_limit)
        try:
            stats = [SessionStats() for _ in range(sessions)]
            ready = threading.Barrier(sessions + 1)
            deadline_box: list[float] = []
            threads = []
            for i in range(sessions):
                t = threading.Thread(
                    target=lambda i=i: run_session(
                        url, i, deadline_box, ready, max_turns, settings.prompt.max_history_turns, stats[i]
                    ),
                    daemon=True,
                )
                threads.append(t)
            # The deadline is fixed once every client is connected, so connecting is not part of the timed run.
            deadline_box.append(float("inf"))
            for t in threads:
                t.start()
            ready.wait(timeout=120)
            start = time.monotonic()
            deadline_box[0] = start + seconds
            for t in threads:
                # A request in flight at the deadline may finish; one stuck past this bound is reported, not awaited.
                t.join(timeout=max(0.0, start + seconds + 60 - time.monotonic()))
            elapsed = time.monotonic() - start
            stuck = sum(t.is_alive() for t in threads)
        finally:
            demo.close()
            server.stop()
    latencies = [x for s in stats for x in s.latencies]
    errors = [e for s in stats for e in s.errors]
    crosstalk = [c for s in stats for c in s.crosstalk]
    return {
        "sessions": sessions,
        "seconds": seconds,
        "concurrency": concurrency,
        "chunk_delay": chunk_delay,
        "requests": len(latencies) + len(errors),
        "ok": len(latencies),
        "errors": len(errors) + stuck,
        "stuck": stuck,
        "crosstalk": len(crosstalk),
        "elapsed": elapsed,
        "rate_limit": rate_limit,
        "rate_limited": sum(s.rate_limited for s in stats),
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "max": max(latencies, default=0.0),
        "mean": statistics.fmean(latencies) if latencies else 0.0,
        "throughput": len(latencies) / elapsed if elapsed else 0.0,
        "llm_requests": len(server.requests),
        "error_samples": errors[:5],
        "crosstalk_samples": crosstalk[:5],
    }


def markdown(results: list[dict]) -> str:
    """A markdown table of one or more runs."""
    lines = [
        (
            "| sessions | seconds | LLM chunk delay (ms) | concurrency limit | requests | errors | cross-talk | "
            "p50 (s) | p95 (s) | max (s) | throughput (req/s) |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['sessions']} | {r['seconds']:g} | {r['chunk_delay'] * 1000:g} | {r['concurrency']} | "
            f"{r['requests']} | {r['errors']} | "
            f"{r['crosstalk']} | {r['p50']:.3f} | {r['p95']:.3f} | {r['max']:.3f} | {r['throughput']:.1f} |"
        )
    return "\n".join(lines)


def section(results: list[dict]) -> str:
    """The BENCHMARKS.md section for these runs."""
    import gradio

    r = results[-1]
    return (
        "## Chat load (Gradio API)\n\n"
        f"{r['sessions']} concurrent sessions for {r['seconds']:g} s, each with its own `gradio_client.Client` and its "
        "own growing history, asking the starter-knowledge questions through `/chat` (mode sparse, LLM used: "
        "follow-ups also go through the rewrite call). The app is served in-process on 127.0.0.1 with "
        f"`.queue(default_concurrency_limit=N)`; the LLM is tests/support/llm_server.py streaming 4-character chunks (the "
        "delay between chunks is a column; about 20 chunks per answer, 7 per rewrite). Latency is one whole streamed turn as the client sees it. Cross-talk = replies "
        "that do not name their own session and turn, or that carry history of another session or of the wrong "
        f"length. Python {platform.python_version()}, Gradio {gradio.__version__}, {os.cpu_count()} CPUs. "
        "Produced by `python -m benchmarks.load`.\n\n"
        f"{markdown(results)}\n"
    )


def main(argv=None) -> int:
    """Run the load test; exit 1 when any request failed or crossed sessions."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=None,
        help="Gradio default_concurrency_limit (default: ui.concurrency from config.yaml); "
        "several values run one after the other",
    )
    p.add_argument(
        "--chunk-delay",
        type=float,
        nargs="+",
        default=[0.005],
        help="seconds between streamed LLM chunks; several values run one after the other",
    )
    p.add_argument(
        "--rate-limit",
        type=int,
        default=0,
        help="ui.rate_limit_per_minute for the run (default 0 = off, so the sessions measure the app, "
        "not the limiter; rate-limited replies are counted apart)",
    )
    p.add_argument("--quick", action="store_true", help="5 sessions x 5 s, for a smoke test")
    p.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.seconds = 5, 5.0
    # Read once: every run then uses the same settings even if config.yaml is edited meanwhile.
    settings = load_settings(ROOT / "config.yaml")
    args.concurrency = args.concurrency or [settings.ui.concurrency]
    results = []
    for delay in args.chunk_delay:
        for limit in args.concurrency:
            r = run(args.sessions, args.seconds, limit, delay, args.rate_limit, settings=settings)
            results.append(r)
            print(markdown([r]).splitlines()[-1], flush=True)
            for sample in r["error_samples"] + r["crosstalk_samples"]:
                print("  ", sample, flush=True)
            if r["rate_limited"]:
                print(f"   {r['rate_limited']} replies were rate limited (ui.rate_limit_per_minute={r['rate_limit']})")
    print()
    print(markdown(results))
    if not args.no_write and not args.quick:
        write_section("load", section(results))
    return 1 if any(r["errors"] or r["crosstalk"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
