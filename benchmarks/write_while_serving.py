"""Chat latency while the index is being written: idle vs during a background re-index + fastText retrain.

    .venv/bin/python -m benchmarks.write_while_serving [--entries 3000 [100000 ...]] [--seconds 20] [--rate 50]
        [--check-interval S] [--no-write]

One scenario per ``--entries N``, each in its own temp folder, all in one process: the app's bot
(``build_bot(watch_config=True, keep_last_good=True)``: background index workers), hybrid mode with the fastText
encoder, over the starter knowledge plus a file of N entries (benchmarks/synth.py: LCQMC dev questions, then
synthetic ones; the starter knowledge as the source when ../shared/data is absent). Both indexes (tantivy, and
FAISS over a fastText model trained on the knowledge) are built before anything is measured.

A single thread then asks retrieval-only chat turns in the sparse mode (``Bot.answer``, which calls
``index.refresh()`` every turn: it looks at the folder at most every ``check_interval``, 1 s in the app), ``--rate``
turns per second (0: back to back): first for ``--seconds`` while nothing is written (idle), then while the
N-entry file is replaced by N other entries (same ids, every text new). A turn soon after schedules the reload; the
tantivy worker upserts all N entries, and since far more than ``retrain_after`` of the knowledge changed, the
FAISS worker retrains fastText in a staging folder and re-encodes every entry before model and vectors are
swapped in. The write phase lasts until the index is idle again (``KnowledgeIndex.wait_idle``); when each index
finished is read from the index's own log lines ("tantivy index synced", "trained fastText", "faiss index
synced"). Idle and busy turns run on an index of the same size, so the two p95 compare like with like.

Writes the tables into BENCHMARKS.md (section ``write-while-serving``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import resource
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import data_dir, write_section
from benchmarks.synth import source_entries, synthesize, write_knowledge
from bot.config.settings import load_settings
from bot.config.variants import update
from bot.evaluation import percentile
from bot.factory import build_bot
from bot.knowledge.entries import Entry, load_entries

FILE = "synthetic"  # the knowledge file of the N entries, replaced while serving


class _Events(logging.Handler):
    """The index's own INFO lines with the time they were logged: when each index synced, when fastText trained."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[float, logging.LogRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((time.perf_counter(), record))

    def synced(self, name: str, after: float) -> tuple[float, str] | None:
        """(when, reason) of the first "<name> index synced" line logged after ``after``."""
        for at, r in self.records:
            if at >= after and r.getMessage().startswith(f"{name} index synced"):
                return at, r.getMessage()
        return None

    def first(self, prefix: str, after: float) -> float | None:
        return next((at for at, r in self.records if at >= after and r.getMessage().startswith(prefix)), None)


class _FullCollections:
    """Python's full (generation 2) garbage collections: (start, seconds). Each holds the GIL from start to end."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float]] = []
        self._start: float | None = None

    def __call__(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None:
            self.pauses.append((self._start, time.perf_counter() - self._start))
            self._start = None

    def during(self, a: float, b: float) -> list[tuple[float, float]]:
        return [(at, s) for at, s in self.pauses if a <= at < b]


GC = _FullCollections()


@dataclass
class Phase:
    """Chat turns of one phase: latency (ms) and whether each was answered from the knowledge."""

    ms: list[float] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # perf_counter() when each turn started
    answered: int = 0
    notices: set[str] = field(default_factory=set)


@dataclass
class Result:
    n: int
    knowledge: int
    built: float
    idle: Phase
    busy: Phase
    written: float
    loaded: float | None
    tantivy: float | None
    trained: float | None
    faiss: float | None
    reasons: dict[str, str]
    held: dict[str, int]
    fresh: dict[str, int]
    after: Phase
    t0: float = 0.0  # perf_counter() when the file was replaced


def _turns(bot, questions: list[str], until, phase: Phase, rate: float) -> None:
    """Chat turns in the sparse mode, ``rate`` per second (0: back to back), until ``until()`` is true.

    A paced turn's latency counts from when it was due (never before the previous turn ended): waking late from
    the sleep, because another thread holds the GIL (a garbage collection, a long C call) or the CPU is busy,
    is part of it, as a request arriving then would wait for it. Late turns are not made up in a burst.
    """
    i = 0
    end = due = time.perf_counter()
    while not until():
        if rate > 0:
            due = max(due + 1 / rate, end)
            time.sleep(max(0.0, due - time.perf_counter()))
            start = due
        else:
            start = time.perf_counter()
        answer = bot.answer(questions[i % len(questions)], mode="sparse")
        end = time.perf_counter()
        phase.ms.append((end - start) * 1000)
        phase.at.append(start)
        phase.answered += bool(answer.hits)
        phase.notices.update(answer.notices)
        i += 1


def scenario(
    n: int, seconds: float, rate: float, check_interval: float | None, source: list[Entry], events: _Events
) -> Result:
    """Build over starter + ``n`` entries, chat idle for ``seconds``, then while all ``n`` are rewritten."""
    tmp = Path(tempfile.mkdtemp(prefix="kbbot-wws-"))
    try:
        settings = load_settings(ROOT / "config.yaml")
        shutil.copytree(ROOT / "knowledge", tmp / "knowledge")
        settings = update(
            settings,
            {
                "knowledge.path": str(tmp / "knowledge"),
                "state_dir": str(tmp / "state"),
                "retrieval.mode": "hybrid",
                "retrieval.dense.encoder": "fasttext",
            },
        )
        os.environ.pop(settings.llm.api_key_env, None)
        starter = load_entries(tmp / "knowledge")
        questions = [e.query for e in starter]
        made = synthesize(source, 2 * n, _cut)
        write_knowledge(made[:n], tmp / "knowledge", FILE)
        rewrite = tmp / f".{FILE}.rewrite.json"  # hidden: not knowledge until it replaces the file
        write_knowledge(made[n:], tmp, rewrite.stem)
        del made  # the benchmark's own copies would lengthen the bot's garbage collections

        print(f"[{n:,}] building the indexes over {len(starter) + n:,} entries…", flush=True)
        start = time.perf_counter()
        bot = build_bot(settings, watch_config=True, keep_last_good=True)
        if check_interval is not None:
            bot.index.check_interval = check_interval
        bot.answer(questions[0])  # schedules the hybrid build (sparse first)
        bot.index.wait_idle()
        built = time.perf_counter() - start
        print(f"[{n:,}] built in {built:.1f} s; idle turns for {seconds:.0f} s…", flush=True)

        idle = Phase()
        deadline = time.monotonic() + seconds
        _turns(bot, questions, lambda: time.monotonic() > deadline, idle, rate)

        done = threading.Event()
        old = bot.index.entries
        marks: dict[str, float] = {}

        def monitor() -> None:  # the reload replaces ``entries``; the syncs it schedules end with wait_idle()
            while bot.index.entries is old:
                time.sleep(0.01)
            marks["loaded"] = time.perf_counter()
            bot.index.wait_idle()
            done.set()

        print(f"[{n:,}] rewriting all {n:,} entries while serving…", flush=True)
        busy = Phase()
        t0 = time.perf_counter()
        os.replace(rewrite, tmp / "knowledge" / f"{FILE}.json")  # entry i keeps its id (FILE:i), its texts are new
        watcher = threading.Thread(target=monitor, name="wws-monitor", daemon=True)
        watcher.start()
        _turns(bot, questions, done.is_set, busy, rate)
        written = time.perf_counter() - t0
        after = Phase()
        deadline = time.monotonic() + min(seconds, 5.0)
        _turns(bot, questions, lambda: time.monotonic() > deadline, after, rate)

        tantivy, faiss = events.synced("tantivy", t0), events.synced("faiss", t0)
        trained = events.first("trained fastText", t0)
        mine = [e for e in bot.index.entries if e.id.startswith(f"{FILE}:")]
        assert [e.query for e in mine] == [
            e.query for e in load_entries(tmp / "knowledge") if e.id.startswith(f"{FILE}:")
        ] and len(mine) == n, "the reload did not read the new file"
        want = {e.id: e.content_hash for e in mine}
        held, fresh = {}, {}
        for leaf in bot.index.searcher("hybrid").leaves():
            hashes = leaf.indexed_hashes() or {}
            held[leaf.name] = len(hashes)
            fresh[leaf.name] = sum(hashes.get(k) == h for k, h in want.items())
        return Result(
            n=n,
            knowledge=len(starter) + n,
            built=built,
            idle=idle,
            busy=busy,
            written=written,
            loaded=marks.get("loaded", t0) - t0,
            tantivy=tantivy[0] - t0 if tantivy else None,
            trained=trained - t0 if trained else None,
            faiss=faiss[0] - t0 if faiss else None,
            reasons={k: v[1] for k, v in (("tantivy", tantivy), ("faiss", faiss)) if v},
            held=held,
            fresh=fresh,
            after=after,
            t0=t0,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_TOKENIZER = None


def _cut(text: str) -> list[str]:
    """jieba tokens (the bot's own tokenizer) for synth.py's cut points."""
    global _TOKENIZER
    if _TOKENIZER is None:
        from bot.search.tokenizer import Tokenizer

        _TOKENIZER = Tokenizer()
    return _TOKENIZER.tokenize(text)


def _timeline(r: Result, events: _Events) -> None:
    """Console only: the index's log lines, the slowest turns and the p95 per tenth of the write phase."""
    for at, rec in events.records:
        if at >= r.t0 - r.built - 60:
            print(f"  {at - r.t0:+9.1f} s  {rec.name}: {rec.getMessage()[:160]}")
    full = GC.during(r.t0, r.t0 + r.written)
    print(
        f"  full GC collections while writing: {len(full)}, longest "
        + ", ".join(f"{s * 1000:.0f} ms at {at - r.t0:+.1f} s" for at, s in sorted(full, key=lambda x: -x[1])[:5])
    )
    slow = sorted(zip(r.busy.ms, r.busy.at), reverse=True)[:10]
    print("  slowest turns while writing:", ", ".join(f"{ms:.0f} ms at {at - r.t0:+.1f} s" for ms, at in slow))
    if r.busy.ms:
        step = r.written / 10
        for k in range(10):
            part = [ms for ms, at in zip(r.busy.ms, r.busy.at) if k * step <= at - r.t0 < (k + 1) * step]
            if part:
                print(
                    f"  write {k * step:7.1f}-{(k + 1) * step:7.1f} s: {len(part):6} turns, p50 "
                    f"{percentile(part, 50):.1f}, p95 {percentile(part, 95):.1f}, max {max(part):.0f} ms"
                )


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _row(r: Result, label: str, p: Phase, note: str) -> str:
    return (
        f"| {r.knowledge:,} | {label} | {len(p.ms):,} | {p.answered / max(1, len(p.ms)):.0%} | "
        f"{percentile(p.ms, 50):.1f} | {percentile(p.ms, 95):.1f} | {percentile(p.ms, 99):.1f} | "
        f"{max(p.ms):.1f} | {note} |"
    )


def _stages(r: Result) -> list[tuple[str, float, float]]:
    """(name, from, to) seconds after the write: the reload, the tantivy sync, fastText's corpus + training, the
    re-encode + swap (the FAISS sync runs beside the tantivy one, so the first stages overlap)."""
    marks = [
        ("reload", 0.0, r.loaded),
        ("tantivy sync", r.loaded, r.tantivy),
        ("fastText corpus + training", r.tantivy, r.trained),
        ("re-encode + swap", r.trained, r.faiss),
    ]
    return [(name, a, b) for name, a, b in marks if a is not None and b is not None and b > a]


def _stage_of(r: Result, t: float) -> str:
    return next((name for name, a, b in _stages(r) if a <= t < b), "end")


def _p95_in(r: Result, a: float, b: float) -> str:
    part = [ms for ms, at in zip(r.busy.ms, r.busy.at) if a <= at - r.t0 < b]
    return f"{percentile(part, 95):.1f} ({len(part):,})" if part else "–"


def _machine() -> str:
    try:
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "",
        )
    except OSError:
        model = ""
    return f"{platform.machine()}{f' ({model})' if model else ''}, {os.cpu_count()} CPUs"


def report(results: list[Result], args: argparse.Namespace, source_note: str, peak_mb: float, took: float) -> str:
    """The BENCHMARKS.md section."""
    shown = f"--entries {' '.join(str(n) for n in args.entries)} --seconds {args.seconds:g} --rate {args.rate:g}"
    interval = (
        "every turn"
        if args.check_interval == 0
        else (
            f"at most every {args.check_interval:g} s"
            if args.check_interval
            else "at most once a second, as in the app"
        )
    )
    lines = [
        "## Write while serving",
        "",
        (
            f"`python -m benchmarks.write_while_serving {shown}`: one run of {took / 60:.1f} min, one process (peak RSS "
            f"{peak_mb:,.0f} MB), on {_machine()} shared with other work, Python {platform.python_version()}. Per size "
            f"N, in a temp folder: the app's bot (`build_bot` as app.py builds it: background index workers), hybrid "
            f"mode with the fastText encoder and config.yaml's own training settings (`threads: 1`, `epoch: 20`, "
            f"`target_tokens`, `retrain_after` = "
            f"{load_settings(ROOT / 'config.yaml').retrieval.dense.fasttext.retrain_after}), over the starter knowledge "
            f"plus one file of N entries from benchmarks/synth.py ({source_note}). Both indexes (tantivy; FAISS over a "
            f"fastText model trained on the knowledge) are built before anything is measured. One thread asks "
            f"retrieval-only chat turns (the starter knowledge's questions, in turn) in the sparse mode, "
            f"{args.rate:g} per second (`Bot.answer`, whose `index.refresh()` looks at the folder {interval}): idle "
            f"for {args.seconds:g} s, then while the N-entry file is replaced by N other entries (same ids, every text "
            f"new: the background reload, a tantivy upsert of all N, and, far past `retrain_after`, a fastText retrain "
            f"in a staging folder with every entry re-encoded, then model and vectors swapped in), until the index is "
            f'idle again (`KnowledgeIndex.wait_idle`), then 5 s on the new snapshot. "answered" = turns that '
            f"returned hits from the knowledge."
        ),
        "",
        "| knowledge | phase | turns | answered | p50 ms | p95 ms | p99 ms | max ms | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines += [
            _row(r, "idle", r.idle, f"{args.seconds:g} s"),
            _row(r, "while writing", r.busy, f"{r.written:.1f} s: reload + re-index + retrain + swap"),
            _row(r, "after", r.after, "the new snapshot"),
        ]
    lines += [
        "",
        "**p95 while writing / p95 idle** and when each stage ended (seconds after the file was replaced, from the "
        "index's own log lines), with the p95 in ms (turns) of the chat turns during each stage:",
        "",
        "| N rewritten | build first | p95 ratio | reload read | tantivy synced | fastText trained "
        "| FAISS re-encoded + swapped | p95 reload → tantivy done | p95 training | p95 re-encode + swap | "
        "slowest turns while writing | indexes hold the new texts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = percentile(r.busy.ms, 95) / max(1e-9, percentile(r.idle.ms, 95))
        fresh = ", ".join(f"{k} {v:,}/{r.n:,} of {r.held[k]:,}" for k, v in r.fresh.items())
        slow = "; ".join(
            f"{ms:.0f} ms at +{at - r.t0:.1f} s ({_stage_of(r, at - r.t0)})"
            for ms, at in sorted(zip(r.busy.ms, r.busy.at), reverse=True)[:3]
        )
        lines.append(
            f"| {r.n:,} | {r.built:.0f} s | **{ratio:.2f}x** | {_s(r.loaded)} s | {_s(r.tantivy)} s | "
            f"{_s(r.trained)} s | {_s(r.faiss)} s | {_p95_in(r, 0, r.tantivy or 0)} | "
            f"{_p95_in(r, r.tantivy or 0, r.trained or 0)} | {_p95_in(r, r.trained or 0, r.written)} | {slow} | "
            f"{fresh} |"
        )
    notices = sorted({x for r in results for x in r.busy.notices})
    collections = "; ".join(
        f"N = {r.n:,}: {len(full)}, the longest {max(s for _, s in full) * 1000:.0f} ms"
        if full
        else f"N = {r.n:,}: none"
        for r in results
        for full in [GC.during(r.t0, r.t0 + r.written)]
    )
    lines += [
        "",
        (
            f"Notices during the write: {', '.join(notices) if notices else 'none'}; every turn was answered from the "
            "last good snapshot until the new one was swapped in. Full (generation 2) garbage collections while "
            f"writing, each holding the GIL throughout: {collections}."
        ),
        "",
        NOTES.strip().replace("BEFORE_TABLE", _before_table(results)),
    ]
    return "\n".join(lines)


NOTES = """
What keeps requests fast while the index is written (bot/search), and the same command on the code before these
changes (commit 190f89c), on this machine, about an hour earlier (other jobs on the machine differ from run to run):

BEFORE_TABLE

- **Tokenizing in worker processes** (`FastTextEncoder.training_lines` and `embed_documents` through
  `Tokenizer.tokenize_many`; the encoder's `batch_size` is `PARALLEL_MIN`, 20,000 texts, so a re-encode of a large
  knowledge base is tokenized by forked processes). jieba is pure Python: the FAISS worker tokenizing 2 x N texts
  held the GIL for most of the retrain's in-process part, and a chat turn, which gives the GIL up at every
  tantivy call, waited up to the 5 ms switch interval each time (turns of 40-110 ms).
- **A shorter switch interval while a worker runs** (`bot/search/background.py`: 0.5 ms instead of CPython's
  5 ms, restored when the last worker thread ends) for what stays in Python (fastText's vocabulary, SIF sums,
  the tantivy documents loop).
- **The processes an index worker starts run at a lower CPU priority** (nice +10: fastText's training, the jieba
  pool; `background.child_nice`), so the chat thread is not queued behind them on a busy CPU: before, turns during
  the training (a child process, one thread) had a p50 of ~6 ms instead of ~3. Not the worker threads themselves:
  what they run while holding the GIL (a garbage collection, a `json` call) would then take longer on a busy CPU
  while requests wait for it.
- **The knowledge files are parsed outside the index lock** (`KnowledgeIndex.load`): a request's `searcher()`
  waited for the whole parse of the knowledge (about 1 s for 100k entries, longer on a busy CPU).
- **The FAISS state is dumped item by item** (`faiss_searcher.json_by_item`, the same text as `json.dumps`): one
  `json.dumps` of the state of 100k entries held the GIL for ~0.4 s, twice per swap.

Left: the slowest turns now wait for Python's full garbage collections (counted above: with 100k entries loaded
twice over during a reload, one takes 0.1-0.9 s and holds the GIL; `gc.freeze()` after a load, or fewer
GC-tracked objects per entry, would shorten them) and for `json.loads` of a knowledge file (one call, ~0.16 s for
100k entries). fastText's in-process steps after training (vocabulary, SIF sums, FAISS adds) still share the GIL
with requests, at 0.5 ms slices. Below 20,000 texts (N = 3,000) tokenizing stays in-process, so the small
write's first and last second are what its p95 measures.
"""

# N -> the run before the changes (see NOTES): same command, same machine, the code of commit 190f89c, copied from
# its output: idle p95; while writing p50 / p95 / p99 / max and the p95 per stage (ms); how long the write took (s).
BEFORE: dict[int, dict[str, float]] = {
    3000: {
        "idle": 6.3,
        "p50": 3.0,
        "p95": 16.5,
        "p99": 74.6,
        "max": 184.0,
        "written": 14.7,
        "tantivy": 115.0,
        "training": 12.8,
        "swap": 69.9,
    },
    100000: {
        "idle": 6.4,
        "p50": 5.9,
        "p95": 18.7,
        "p99": 94.3,
        "max": 1247.8,
        "written": 652.2,
        "tantivy": 207.2,
        "training": 16.2,
        "swap": 107.9,
    },
}


def _before_table(results: list[Result]) -> str:
    rows = [
        "| N rewritten | code | idle p95 ms | while writing p50 / p95 / p99 / max ms | p95 ratio | p95 reload → "
        "tantivy done / training / re-encode + swap | write took |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = BEFORE.get(r.n)
        if b:
            rows.append(
                f"| {r.n:,} | before | {b['idle']:.1f} | {b['p50']:.1f} / {b['p95']:.1f} / {b['p99']:.1f} / "
                f"{b['max']:.0f} | {b['p95'] / b['idle']:.2f}x | {b['tantivy']:.1f} / {b['training']:.1f} / "
                f"{b['swap']:.1f} | {b['written']:.0f} s |"
            )
        q = [percentile(r.busy.ms, x) for x in (50, 95, 99)]
        idle = percentile(r.idle.ms, 95)
        stages = " / ".join(
            _p95_in(r, a, b).split(" ")[0]
            for a, b in ((0, r.tantivy or 0), (r.tantivy or 0, r.trained or 0), (r.trained or 0, r.written))
        )
        rows.append(
            f"| {r.n:,} | now | {idle:.1f} | {q[0]:.1f} / {q[1]:.1f} / {q[2]:.1f} / {max(r.busy.ms):.0f} | "
            f"{q[1] / idle:.2f}x | {stages} | {r.written:.0f} s |"
        )
    return "\n".join(rows)


def main(argv=None) -> None:
    """Run each size: build, idle, then while writing; print the tables and write them into BENCHMARKS.md."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--entries",
        type=int,
        nargs="+",
        default=[3000],
        help="sizes N: entries in the knowledge file, all rewritten while serving (one scenario each)",
    )
    p.add_argument("--seconds", type=float, default=20.0, help="length of the idle phase")
    p.add_argument(
        "--rate",
        type=float,
        default=50.0,
        help="chat turns per second (0: back to back, one thread always busy chatting)",
    )
    p.add_argument(
        "--check-interval",
        type=float,
        default=None,
        help="seconds between the index's looks at the knowledge folder (default: the app's, 1 s)",
    )
    p.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    args = p.parse_args(argv)
    began = time.perf_counter()
    gc.callbacks.append(GC)
    events = _Events()
    logger = logging.getLogger("bot.search")
    logger.addHandler(events)
    logger.setLevel(logging.INFO)
    source, source_note = source_entries(data_dir())
    results = []
    for n in args.entries:
        r = scenario(n, args.seconds, args.rate, args.check_interval, source, events)
        results.append(r)
        _timeline(r, events)
        print(
            f"[{n:,}] idle p95 {percentile(r.idle.ms, 95):.1f} ms, while writing p95 "
            f"{percentile(r.busy.ms, 95):.1f} ms (max {max(r.busy.ms):.0f} ms) over {r.written:.1f} s",
            flush=True,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    body = report(results, args, source_note, peak_mb, time.perf_counter() - began)
    print(body)
    if not args.no_write:
        write_section("write-while-serving", body)


if __name__ == "__main__":
    main()
