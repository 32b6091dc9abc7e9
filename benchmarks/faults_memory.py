"""Memory an anonymous client can take, before and after the caps: rows of the faults table (benchmarks/faults.py
imports :func:`memory_rows`), or alone:

    .venv/bin/python -m benchmarks.faults_memory [--before REF]

"Before" is the code of commit REF (default: the last one without the body and spreadsheet caps), unpacked by
``git archive`` into a temp folder; "after" is this checkout. Both serve the same tiny knowledge with the same
config.yaml in a child process (``python -m bot serve``), attacked over HTTP as an anonymous client would, and the
child's resident memory (VmRSS, sampled every 10 ms) is what is reported: the peak over its idle size while the
attack runs, and what it still holds a minute later. The spreadsheet is read by each tree's ``read_xlsx`` in a child
whose address space is capped at 2 GB (without a cap the old reader does not stop). Without git or the commit, the
"before" cells say so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bodies import chat_fn_index, chat_join_body, post_streamed
from tests.support.fault_injection import spreadsheet_bomb
from tests.support.knowledge import TINY, write_knowledge
from tests.support.ports import free_port

BEFORE = "d09645f"  # the last commit whose guard capped only uploads and whose .xlsx reader trusted the sheet
MB = 1024 * 1024
WIDGET_TOKEN = "widget-token-for-the-benchmark"
ORIGIN = "http://127.0.0.1:8081"  # an allowed origin of the widget
XLSX_ADDRESS_SPACE = 2 * 1024 * MB
Row = tuple[str, str, str, bool]  # (name, injected how, observed outcome, as intended)


def baseline_tree(ref: str, into: Path) -> tuple[Path | None, str]:
    """(folder holding commit ``ref``'s files, "") via ``git archive``, or (None, why not)."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", ref], capture_output=True, check=True, timeout=120
        )
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"not measured: no `git archive {ref}` ({type(exc).__name__})"
    return into, ""


def rss(pid: int) -> int:
    """A process's resident memory in bytes (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextmanager
def peak_rss(pid: int):
    """Yields a list that holds, after the block, the highest VmRSS sampled every 10 ms while it ran."""
    peak = [rss(pid)]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()
        peak[0] = max(peak[0], rss(pid))


@contextmanager
def latency_probe(base: str):
    """Yields a list that holds, after the block, the slowest of another client's GET /gradio_api/info meanwhile."""
    worst = [0.0]
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=120) as http:
            while not done.is_set():
                started = time.monotonic()
                http.get(base + "/gradio_api/info")
                worst[0] = max(worst[0], time.monotonic() - started)
                time.sleep(0.05)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        yield worst
    finally:
        done.set()
        prober.join()


@dataclass
class Served:
    """The app of one source tree in a child process on a free port."""

    tree: Path
    work: Path

    def __post_init__(self) -> None:
        write_knowledge(self.work / "knowledge", TINY)
        config = yaml.safe_load((self.tree / "config.yaml").read_text(encoding="utf-8"))
        config["knowledge"]["path"] = str(self.work / "knowledge")
        config["state_dir"] = str(self.work / "state")
        config["retrieval"]["mode"] = "sparse"
        config.setdefault("widget", {}).update(enabled=True, allowed_origins=[ORIGIN])
        (self.work / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(self.tree), "KBBOT_WIDGET_TOKEN": WIDGET_TOKEN}
        for var in ("OPENAI_API_KEY", "KBBOT_MODE", "KBBOT_ADMIN_USER", "KBBOT_ADMIN_PASSWORD"):
            env.pop(var, None)
        command = [sys.executable, "-m", "bot", "serve", "--config", str(self.work / "config.yaml")]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            cwd=self.tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.work / "server.log", "wb"),  # noqa: SIM115 (closed with the process)
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/gradio_api/info", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            self.stop()
            raise RuntimeError(f"the app of {self.tree} did not start: {(self.work / 'server.log').read_text()[-500:]}")
        time.sleep(2)  # let start-up allocations settle before the idle size is taken

    @property
    def rss(self) -> int:
        return rss(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)


def mb(n: float) -> str:
    return f"{n / MB:,.0f} MB"


# -- the attacks: each returns what it observed on one served app -----------------------------------------------
def big_join(app: Served, size: int) -> dict[str, Any]:
    """One chunked ``size``-byte chat event to /gradio_api/queue/join while another client asks /gradio_api/info."""
    idle = app.rss
    prefix, suffix = chat_join_body(chat_fn_index(app.base))
    with peak_rss(app.process.pid) as peak, latency_probe(app.base) as worst:
        started = time.monotonic()
        sent = post_streamed(app.base, "/gradio_api/queue/join", size, prefix, suffix, timeout=120)
        took = time.monotonic() - started
        time.sleep(1)
    return {"status": sent.status, "peak": peak[0] - idle, "worst": worst[0], "took": took}


def unread_joins(app: Served, count: int, size: int, wait: float, in_history: bool = False) -> dict[str, Any]:
    """``count`` chunked chat events of ``size`` bytes, each in its own session, whose results nobody reads; with
    ``in_history`` the bytes are a past message of the conversation (echoed whole) rather than the new one."""
    idle = app.rss
    fn = chat_fn_index(app.base)
    statuses = []
    for n in range(count):
        history = [{"role": "user", "content": "a" * (size - 200)}] if in_history else None
        prefix, suffix = chat_join_body(fn, session=f"unread{n:04d}", history=history)
        total = len(prefix) + len(suffix) + (10 if in_history else size)
        statuses.append(post_streamed(app.base, "/gradio_api/queue/join", total, prefix, suffix, timeout=120).status)
    time.sleep(wait)
    return {"statuses": statuses, "held": app.rss - idle}


def big_widget(app: Served, size: int) -> dict[str, Any]:
    """One chunked ``size``-byte message to /widget/chat from an allowed origin with the right token."""
    idle = app.rss
    prefix = b'{"session": "benchmark-session", "token": "' + WIDGET_TOKEN.encode() + b'", "message": "'
    with peak_rss(app.process.pid) as peak:
        sent = post_streamed(app.base, "/widget/chat", size, prefix, b'"}', headers={"Origin": ORIGIN}, timeout=120)
        time.sleep(1)
    return {"status": sent.status, "peak": peak[0] - idle}


def echoed(app: Served, size: int) -> dict[str, Any]:
    """The bytes the page's event stream sends back for one chat message of ``size`` characters."""
    session = "echo" + os.urandom(4).hex()
    prefix, suffix = chat_join_body(chat_fn_index(app.base), session=session)
    joined = post_streamed(app.base, "/gradio_api/queue/join", size, prefix, suffix, timeout=120)
    if joined.status != 200:
        return {"status": joined.status, "bytes": 0}
    received = 0
    with httpx.stream("GET", app.base + "/gradio_api/queue/data", params={"session_hash": session}, timeout=120) as r:
        for line in r.iter_lines():
            received += len(line)
            if "process_completed" in line or "close_stream" in line:
                break
    return {"status": 200, "bytes": received}


XLSX_READER = """
import json, sys, time
from bot.errors import KnowledgeError
from bot.knowledge.csv_io import read_xlsx
started = time.monotonic()
try:
    rows = sum(len(f.unkeyed) for f in read_xlsx(open(sys.argv[1], "rb").read(), "faq.json").values())
    out = {"result": f"{rows} row(s) read"}
except KnowledgeError as exc:
    out = {"result": exc.problems[0].problem}
out["seconds"] = time.monotonic() - started
status = open("/proc/self/status").read()  # VmHWM: this program's peak (ru_maxrss would count the forked parent)
out["peak"] = int(status.split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps(out, ensure_ascii=False))
"""


def read_bomb(tree: Path, bomb: Path) -> dict[str, Any]:
    """``read_xlsx`` of ``tree`` on ``bomb`` in a child capped at XLSX_ADDRESS_SPACE: result, seconds, peak."""

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (XLSX_ADDRESS_SPACE, XLSX_ADDRESS_SPACE))

    done = subprocess.run(
        [sys.executable, "-c", XLSX_READER, str(bomb)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=capped,
    )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"result": f"exit {done.returncode}: {done.stderr.strip()[-200:]}", "seconds": 0.0, "peak": 0}


# -- the rows ------------------------------------------------------------------------------------------------
def on_both(trees: dict[str, Path | None], work: Path, attack: Callable[[Served], dict[str, Any]]) -> dict[str, Any]:
    """``attack`` on a fresh app of each tree ("before", "after"); a tree that is None gets nothing."""
    out: dict[str, Any] = {}
    for label, tree in trees.items():
        if tree is None:
            continue
        app = Served(tree, Path(tempfile.mkdtemp(prefix=f"{label}-", dir=work)))
        try:
            out[label] = attack(app)
        finally:
            app.stop()
    return out


def memory_rows(before: str = BEFORE, join_mb: int = 128, unread_mb: int = 32, wait: float = 60.0) -> dict[int, Row]:
    """Rows 23-27 of the faults table: the same attacks on the app before and after the caps."""
    work = Path(tempfile.mkdtemp(prefix="kbbot-memory-"))
    try:
        old, why = baseline_tree(before, work / "before")
        trees = {"before": old, "after": ROOT}

        def cells(results: dict[str, Any], show: Callable[[dict[str, Any]], str]) -> str:
            shown = [f"before ({before}): {show(results['before']) if 'before' in results else why}"]
            return "; ".join([*shown, f"after: {show(results['after'])}"])

        rows: dict[int, Row] = {}
        join = on_both(trees, work, lambda app: big_join(app, join_mb * MB))
        rows[23] = (
            "an oversized chat event on `/gradio_api/queue/join`",
            f"one chunked {join_mb} MB body (a valid chat event) from an anonymous client, while another client "
            "asks `/gradio_api/info` every 50 ms",
            cells(
                join,
                lambda r: (
                    f"HTTP {r['status']}, peak +{mb(r['peak'])} over idle, the other client's slowest answer "
                    f"{r['worst'] * 1000:,.0f} ms"
                ),
            ),
            join["after"]["status"] == 413 and join["after"]["peak"] < 64 * MB,
        )
        unread = on_both(trees, work, lambda app: unread_joins(app, 4, unread_mb * MB, wait))
        near = on_both(trees, work, lambda app: unread_joins(app, 20, 1000 * 1024, wait, in_history=True))
        rows[24] = (
            "chat events whose results are never read",
            f"4 chunked {unread_mb} MB chat events (own sessions, results never read), and separately 20 whose "
            f"history carries 1,000 kB (under the 1,024 kB cap; echoed whole); resident memory {wait:.0f} s later",
            cells(unread, lambda r: f"HTTP {sorted(set(r['statuses']))}, +{mb(r['held'])} held")
            + " | under the cap: "
            + cells(near, lambda r: f"HTTP {sorted(set(r['statuses']))}, +{mb(r['held'])} held"),
            unread["after"]["held"] < 64 * MB and near["after"]["held"] < 256 * MB,
        )
        widget = on_both(trees, work, lambda app: big_widget(app, join_mb * MB))
        rows[25] = (
            "an oversized widget message",
            f"one chunked {join_mb} MB body to `/widget/chat` from an allowed origin with the widget token",
            cells(widget, lambda r: f"HTTP {r['status']}, peak +{mb(r['peak'])} over idle"),
            widget["after"]["status"] == 413 and widget["after"]["peak"] < 64 * MB,
        )
        echo = on_both(trees, work, lambda app: {"small": echoed(app, 1_000_000), "big": echoed(app, 16 * MB)})
        rows[26] = (
            "a huge chat message echoed back",
            "a chat message of 1 million characters (under the body cap), then one of 16 MB; the bytes of the "
            "page's event stream that answer it",
            cells(
                echo,
                lambda r: (
                    f"1 M: HTTP {r['small']['status']}, {r['small']['bytes']:,} bytes back; 16 MB: HTTP "
                    f"{r['big']['status']}, {r['big']['bytes']:,} bytes back"
                ),
            ),
            echo["after"]["small"]["bytes"] < 100_000 and echo["after"]["big"]["status"] == 413,
        )
        bomb = work / "bomb.xlsx"
        bomb.write_bytes(spreadsheet_bomb([("question", "answer"), ("停车场怎么收费？", "五元。")]))
        xlsx = {label: read_bomb(tree, bomb) for label, tree in trees.items() if tree is not None}
        rows[27] = (
            "a spreadsheet bomb",
            f"a {bomb.stat().st_size:,}-byte .xlsx (one data row) whose sheet claims `A1:XFD1048576` and ends with an "
            f"empty row 1048576, read by `read_xlsx` in a child capped at {mb(XLSX_ADDRESS_SPACE)} of address space",
            cells(
                xlsx,
                lambda r: f"{r['seconds']:.1f} s, peak {mb(r['peak'])}, “{r['result'][:110]}”",
            ),
            xlsx["after"]["result"] == "1 row(s) read" and xlsx["after"]["peak"] < 256 * MB,
        )
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cli(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default=BEFORE, help="the commit whose code is 'before' (default %(default)s)")
    p.add_argument("--wait", type=float, default=60.0, help="seconds before the memory of unread events is read")
    args = p.parse_args(argv)
    for n, (name, how, outcome, ok) in sorted(memory_rows(args.before, wait=args.wait).items()):
        print(f"| {n}. {name} | {how} | {outcome} | {ok} |")


if __name__ == "__main__":
    cli()
