"""The fault table: each fault injected into a temporary copy of a tiny knowledge base, the outcome measured.

    .venv/bin/python -m benchmarks.faults [--no-write]

Every fault is injected into real files under a temp folder and handled by the product's own code through its
public APIs (``build_bot`` / ``build_index`` as app.py builds them, ``KnowledgeStore``, ``TurnLog``), the way
tests/test_faults.py, tests/search/test_healing.py, tests/knowledge/test_knowledge_safety.py and
tests/conversations/test_turn_log.py inject them.
The "as intended" column is computed from the observations, never typed. Prints a markdown table and writes it into
BENCHMARKS.md (section ``faults``).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import write_section
from benchmarks.faults_leaks import leak_rows
from benchmarks.faults_memory import BEFORE, memory_rows
from bot.config.settings import Settings, load_settings
from bot.config.variants import replace
from bot.conversations.turn_log import TurnLog
from bot.errors import KnowledgeError
from bot.factory import build_bot, build_index, build_knowledge_base
from bot.knowledge.entries import load_entries
from bot.knowledge.store import KnowledgeStore, StaleEditError
from bot.search.integrity import clean_stale_temp, file_digest
from bot.search.tantivy_searcher import TantivySearcher
from bot.search.tokenizer import Tokenizer
from tests.support.fault_injection import plant_stale_temp, save_same_id, scramble, segment_files
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

# The tiny knowledge base of tests/conftest.py (copied: a benchmark does not import the test suite).
Q = "怎么添加知识？"
WEIGHTS = {"query": 3, "metadata": 2, "document": 1}
HEALING = "being rebuilt"
CTX: Any = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


# -- helpers --------------------------------------------------------------------------------
class Captured(logging.Handler):
    """Every WARNING-or-above message of the ``bot`` loggers, for the outcome column."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def since(self, start: int, *needles: str) -> list[str]:
        return [m for m in self.messages[start:] if all(n in m for n in needles)]


CAPTURE = Captured()


def make_settings(tmp: Path, jieba: Path, name: str) -> Settings:
    """config.yaml with a copy of the tiny knowledge and state in ``tmp/name``, sparse mode, no LLM (as the tests)."""
    base = tmp / name
    write_knowledge(base / "knowledge", TINY)
    cfg = base / "config.yaml"
    shutil.copy(ROOT / "config.yaml", cfg)
    s = load_settings(cfg)
    s = replace(s, "knowledge.path", str(base / "knowledge"))
    s = replace(s, "state_dir", str(base / "state"))
    s = replace(s, "retrieval.mode", "sparse")
    s = with_cutoffs(s, "sparse", 0.5)
    shutil.copytree(jieba, base / "state" / "jieba")
    return s


def fasttext_settings(s: Settings) -> Settings:
    """The dense mode with a small, quick fastText model (tests/search/test_healing.py)."""
    s = replace(s, "retrieval.mode", "dense")
    s = replace(s, "retrieval.dense.encoder", "fasttext")
    s = replace(s, "retrieval.dense.fasttext.dim", 16)
    s = replace(s, "retrieval.dense.fasttext.target_tokens", 0)
    s = with_cutoffs(s, "dense-fasttext", 0.3)
    return s


def app_bot(s: Settings):
    """The bot as app.py builds it: background index workers, last good index kept."""
    return build_bot(s, watch_config=True, keep_last_good=True)


def top(answer) -> str:
    if not answer.hits:
        return "no hit"
    h = answer.hits[0]
    return f"{h.entry.id} ({h.searcher})"


def short(text: str | None, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def notice_of(answer) -> str:
    return f"notice “{short(answer.notice, 60)}”" if answer.notice else "no notice"


def chats_until_idle(bot, limit: float = 120.0) -> tuple[list, float, bool]:
    """Ask Q every ~50 ms until the index is idle (at least once): the answers, the seconds taken, idle or not."""
    answers, start = [], time.monotonic()
    while True:
        answers.append(bot.answer(Q))  # an exception fails the row
        if bot.index.wait_idle(0.05) or time.monotonic() - start > limit:
            break
    idle = bot.index.wait_idle(max(0.0, limit - (time.monotonic() - start)))
    return answers, time.monotonic() - start, idle


def tally(answers, own: str) -> tuple[str, bool]:
    """A summary of the chats asked while an index heals, and whether each was sound.

    Sound: answered ``faq:add``, and carrying a notice when a stand-in (not ``own``) answered; or, with no hit at
    all, a notice that does not claim another mode is answering.
    """
    right = [a for a in answers if a.hits and a.hits[0].entry.id == "faq:add"]
    empty = [a for a in answers if not a.hits]
    stand_in_silent = [a for a in right if a.hits[0].searcher != own and not a.notice]
    empty_claiming = [a for a in empty if "answering from" in (a.notice or "")]
    empty_unexplained = [a for a in empty if not a.notice]
    searchers = sorted({a.hits[0].searcher for a in right})
    parts = [
        f"{len(answers)} chats while it healed: {len(right)} answered faq:add ({', '.join(searchers) or '-'}), "
        f"{len(empty)} no hit"
    ]
    if stand_in_silent:
        parts.append(f"{len(stand_in_silent)} answered by the stand-in without a notice")
    if empty_claiming:
        parts.append(f"{len(empty_claiming)} with no hit but notice “{short(empty_claiming[0].notice, 60)}”")
    if empty_unexplained:
        parts.append(f"{len(empty_unexplained)} with no hit and no notice")
    notices = sorted({short(a.notice, 60) for a in answers if a.notice})
    if notices and not empty_claiming:
        parts.append("notice “" + "” / “".join(notices) + "”")
    sound = (
        bool(answers)
        and len(right) + len(empty) == len(answers)
        and not (stand_in_silent or empty_claiming or empty_unexplained)
    )
    return "; ".join(parts), sound


# -- the faults -----------------------------------------------------------------------------
def fault_tantivy_segments(tmp: Path, jieba: Path):
    s = make_settings(tmp, jieba, "f1")
    bot = app_bot(s)
    ready = bot.index.wait_idle(60) and top(bot.answer(Q)).startswith("faq:add")
    folder = s.resolve(s.state_dir) / "tantivy"
    segments = segment_files(folder)
    for f in segments:
        scramble(f)
    mark = len(CAPTURE.messages)
    answers, took, idle = chats_until_idle(bot)
    during, sound = tally(answers, "tantivy")  # sparse alone: no stand-in, so no hit + the healing notice is right
    healing = any(HEALING in (a.notice or "") for a in answers)
    after = bot.answer(Q)
    whole = TantivySearcher(folder, bot.index.tokenizer, WEIGHTS).indexed_hashes() is not None
    warned = CAPTURE.since(mark)
    outcome = (
        f"{during}; rebuilt in {took:.1f} s; then {top(after)}, {notice_of(after)}; on-disk index whole again: "
        f"{whole}; log: “{short((warned[0] if warned else '').replace(str(tmp) + '/', '<tmp>/'), 110)}”"
    )
    ok = (
        ready
        and sound
        and healing
        and idle
        and bool(after.hits)
        and after.hits[0].entry.id == "faq:add"
        and HEALING not in (after.notice or "")
        and whole
    )
    return (
        f"scrambled 20 % of the bytes of all {len(segments)} segment files in place while the app bot serves",
        outcome,
        ok,
    )


def fault_faiss_and_fasttext(tmp: Path, jieba: Path):
    """Fault 2 (vectors.faiss body) and fault 3 (fasttext.bin), one after the other on the same state folder."""
    from bot.search.faiss_files import INDEX_FILE

    s = fasttext_settings(make_settings(tmp, jieba, "f2"))
    first = app_bot(s)
    built = first.index.wait_idle(120) and top(first.answer(Q)).endswith("(faiss)")
    state = s.resolve(s.state_dir)

    # 2: damaged FAISS body, then a restart.
    scramble(state / "faiss" / INDEX_FILE, share=0.3)
    mark = len(CAPTURE.messages)
    bot = app_bot(s)
    answers, took, idle = chats_until_idle(bot)
    during, sound = tally(answers, "faiss")
    a2 = bot.answer(Q)
    warned = CAPTURE.since(mark, "faiss")
    checksum = any("checksum" in m for m in warned)
    rel = max((h.relevance for h in a2.hits), default=0.0)
    out2 = (
        f"restart did not raise; damage logged: “{short((warned[0] if warned else '').replace(str(tmp) + '/', '<tmp>/'), 110)}”; {during}; "
        f"dense rebuilt {took:.1f} s after the restarted bot was up; then {top(a2)}, {notice_of(a2)}, relevance {rel:.2f}"
    )
    ok2 = (
        built
        and idle
        and checksum
        and sound
        and bool(a2.hits)
        and a2.hits[0].searcher == "faiss"
        and not a2.notice
        and rel <= 1.0
    )
    row2 = (
        f"scrambled 30 % of `faiss/{INDEX_FILE}` in place (same size), then restarted the app bot (dense, fastText)",
        out2,
        ok2,
    )

    # 3: damaged fastText model, then a restart.
    model = state / "fasttext" / "fasttext.bin"
    scramble(model, share=0.05)
    mark = len(CAPTURE.messages)
    bot = app_bot(s)  # a restart: must not raise
    answers, took, idle = chats_until_idle(bot)
    during, sound = tally(answers, "faiss")
    b2 = bot.answer(Q)
    meta = json.loads((state / "fasttext" / "fasttext.json").read_text(encoding="utf-8"))
    digest_ok = meta.get("model_digest") == file_digest(model)
    staging = [p for p in model.parent.iterdir() if p.name.startswith(".kbbot-ft-")]
    warned = CAPTURE.since(mark, "fasttext")
    out3 = (
        f"restart did not raise; damage logged: “{short((warned[0] if warned else '').replace(str(tmp) + '/', '<tmp>/'), 110)}”; {during}; "
        f"retrained, dense ready {took:.1f} s after the restarted bot was up; then {top(b2)}, {notice_of(b2)}; new model digest "
        f"recorded: {digest_ok}; staging folders left: {len(staging)}"
    )
    ok3 = (
        idle
        and sound
        and bool(b2.hits)
        and b2.hits[0].searcher == "faiss"
        and not b2.notice
        and digest_ok
        and not staging
        and bool(warned)
    )
    row3 = (
        "scrambled 5 % of `fasttext/fasttext.bin` in place, then restarted the app bot "
        "(`retrieval.dense.encoder: fasttext`)",
        out3,
        ok3,
    )
    return row2, row3


def fault_stale_temp(tmp: Path, jieba: Path):
    s = make_settings(tmp, jieba, "f4")
    state = s.resolve(s.state_dir)
    planted = plant_stale_temp(state)
    dead_pid, live, mine = planted.dead_pid, planted.live, planted.mine
    build_index(s)
    removed = [p for p in planted.stale if not p.exists()]
    again = clean_stale_temp([state])
    outcome = (
        f"at start: {len(removed)}/4 of the dead pid {dead_pid}'s items removed (3 temp files + a staging folder, "
        f"8 KB); live parent pid's file kept: {live.exists()}; this process's own temp file kept: "
        f"{mine.exists()}; a second clean found {again}"
    )
    ok = len(removed) == 4 and live.exists() and mine.exists() and again == 0
    return (
        (
            "3 temp files and a `.kbbot-ft-<pid>-…` staging folder of an exited pid, one temp file of a live pid, one of "
            "this process; then `build_index`"
        ),
        outcome,
        ok,
    )


def fault_lone_surrogate(tmp: Path, jieba: Path):
    s = make_settings(tmp, jieba, "f5")
    kb = s.resolve(s.knowledge.path)
    # At start, the CLI's / a script's view: the error names file and entry.
    (kb / "s.json").write_text('{"a": {"query": "bad \\ud800 x", "document": "d"}}', encoding="utf-8")
    try:
        build_bot(s)
        start_error = ""
    except KnowledgeError as exc:
        start_error = "; ".join(str(p) for p in exc.problems)
    (kb / "s.json").unlink()
    # While serving: the app keeps the last good index.
    bot = app_bot(s)
    bot.index.wait_idle(60)
    bot.index.check_interval = 0
    (kb / "s.json").write_text('{"a": {"query": "bad \\ud800 x", "document": "d"}}', encoding="utf-8")
    a = bot.answer(Q)
    bot.index.wait_idle(60)
    b = bot.answer(Q)
    err = "; ".join(str(p) for p in bot.index.error.problems) if bot.index.error else ""
    outcome = (
        f"at start (no index yet) build_bot refused: “{short(start_error, 90)}”; while serving the next chats "
        f"answered {top(a)} / {top(b)} from the last good index, index.error: “{short(err, 90)}”"
    )
    ok = (
        "s.json" in start_error
        and "surrogate" in start_error
        and bool(b.hits)
        and b.hits[0].entry.id == "faq:add"
        and "s.json" in err
        and "surrogate" in err
    )
    return '`s.json` with `"query": "bad \\ud800 x"` at start, and again saved while the app bot serves', outcome, ok


def fault_malformed_json(tmp: Path, jieba: Path):
    s = make_settings(tmp, jieba, "f6")
    kb = s.resolve(s.knowledge.path)
    bot = app_bot(s)
    bot.index.wait_idle(60)
    bot.index.check_interval = 0
    (kb / "faq.json").write_text('{"add": {"query": "怎么添加知识？", "document": ', encoding="utf-8")
    a = bot.answer(Q)
    bot.index.wait_idle(60)
    b = bot.answer("食堂在哪里？")
    err = "; ".join(str(p) for p in bot.index.error.problems) if bot.index.error else ""
    # Then the file is fixed (with one more entry): the next chat picks it up.
    write_knowledge(
        kb, {**TINY, "gym": {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"}}
    )
    start = time.monotonic()
    bot.answer(Q)
    bot.index.wait_idle(60)
    took = time.monotonic() - start
    c = bot.answer("体育馆几点关门？")
    outcome = (
        f"next chats answered {top(a)}, {top(b)} from the last good index; index.error: “{short(err, 70)}”; "
        f"after the file was fixed (+1 entry) the new entry answered in {took:.1f} s: {top(c)}, "
        f"index.error cleared: {bot.index.error is None}"
    )
    ok = (
        bool(a.hits)
        and a.hits[0].entry.id == "faq:add"
        and bool(b.hits)
        and b.hits[0].entry.id == "faq:canteen"
        and "faq.json" in err
        and bool(c.hits)
        and c.hits[0].entry.id == "faq:gym"
        and bot.index.error is None
    )
    return "`faq.json` overwritten with truncated JSON while the app bot serves (then fixed)", outcome, ok


def fault_same_id(tmp: Path, rounds: int = 20):
    both = one = loads = 0
    refusal = ""
    for attempt in range(rounds):
        folder = tmp / "f7" / f"kb{attempt}"
        write_knowledge(folder / "sub", {"other": {"query": "q", "document": "d"}}, "dup.json")
        barrier, results = CTX.Barrier(2), CTX.Queue()
        workers = [
            CTX.Process(target=save_same_id, args=(str(folder), str(tmp / "f7" / "locks"), f, barrier, results))
            for f in ("dup.json", "sub/dup.json")
        ]
        for w in workers:
            w.start()
        got = dict(results.get(timeout=30) for _ in workers)
        for w in workers:
            w.join(30)
        oks = sum(v == "ok" for v in got.values())
        both += oks == 2
        one += oks == 1
        refusal = refusal or next((v for v in got.values() if v != "ok"), "")
        try:
            loads += [e.id for e in load_entries(folder)].count("dup:x") == 1
        except KnowledgeError:
            pass
    outcome = (
        f"{rounds} rounds: both succeeded {both}, exactly one {one}; the folder loads with one `dup:x` "
        f"after {loads}/{rounds}; the loser got “{short(refusal, 80)}”"
    )
    ok = both == 0 and one == rounds and loads == rounds and "duplicate id" in refusal
    return (
        (
            f"two processes released by a barrier save id `x` into `dup.json` and `sub/dup.json` (same id `dup:x`), "
            f"{rounds} rounds"
        ),
        outcome,
        ok,
    )


def fault_stale_edit(tmp: Path):
    kb = tmp / "f8" / "knowledge"
    write_knowledge(kb, TINY)
    store = KnowledgeStore(kb, tmp / "f8" / "state" / "locks")
    loaded = store.version("faq.json", "add")
    store.upsert_entry("faq.json", "add", "someone else", "d", "")
    before = (kb / "faq.json").read_bytes()
    refused = []
    for write in (
        lambda: store.upsert_entry("faq.json", "add", "mine", "d", "", expected_version=loaded),
        lambda: store.delete_entry("faq.json", "add", expected_version=loaded),
    ):
        try:
            write()
            refused.append("")
        except StaleEditError as exc:
            refused.append(str(exc))
    unchanged = (kb / "faq.json").read_bytes() == before
    store.upsert_entry("faq.json", "add", "mine", "d", "", expected_version=store.version("faq.json", "add"))
    current_ok = dict(store.entries("faq.json"))["add"]["query"] == "mine"
    outcome = (
        f"edit and delete with the old version both refused ({sum(bool(r) for r in refused)}/2): "
        f"“{short(refused[0], 90)}”; file byte-identical: {unchanged}; the same edit with the current version "
        f"saved: {current_ok}"
    )
    ok = all(refused) and unchanged and current_ok
    return (
        "`faq:add` edited by someone else after its version was loaded, then edited/deleted with that version",
        outcome,
        ok,
    )


def fault_overwrite_restore(tmp: Path):
    kb = tmp / "f9" / "knowledge"
    write_knowledge(kb, TINY)
    state = tmp / "f9" / "state"
    store = KnowledgeStore(kb, state / "locks", history_dir=state / "history")
    original = (kb / "faq.json").read_bytes()
    store.import_file("faq.json", '[{"query": "only", "document": "one"}]', overwrite=True)
    after_import = len(load_entries(kb))
    versions = store.history("faq.json")
    store.restore("faq.json", versions[-1].version)
    entries = load_entries(kb)
    identical = (kb / "faq.json").read_bytes() == original
    outcome = (
        f"the import left {after_import} entry; history kept {len(versions)} version "
        f"({versions[-1].entries} entries); `restore` brought back {len(entries)}/{len(TINY)} entries, "
        f"file byte-identical: {identical}"
    )
    ok = (
        after_import == 1
        and versions[-1].entries == len(TINY)
        and identical
        and [e.id for e in entries] == [f"faq:{k}" for k in TINY]
    )
    return (
        "`import_file(…, overwrite=True)` of a 1-entry file over the 6-entry `faq.json`, then `restore` of the kept version",
        outcome,
        ok,
    )


def fault_corrupt_log(tmp: Path, jieba: Path):
    s = make_settings(tmp, jieba, "f10")
    path = s.resolve(s.state_dir) / s.log.path
    path.parent.mkdir(parents=True, exist_ok=True)
    garbage = b"this is not a database, just some text " * 100
    path.write_bytes(garbage)
    mark = len(CAPTURE.messages)
    bot = build_bot(s)
    kb = build_knowledge_base(s, bot)
    answer = kb.ask(Q, session="s", source="web")
    tl = kb.recorder.log
    aside = tl.moved_aside if isinstance(tl, TurnLog) else None
    kept = aside is not None and aside.read_bytes() == garbage
    count = tl.count() if tl is not None else -1
    recent = tl.recent(1) if tl is not None else []
    warned = CAPTURE.since(mark, "moved it to")
    outcome = (
        f"bot started; the file was moved to `{aside.name if aside else None}` (content kept: {kept}); "
        f"the chat answered {top(answer)} and the fresh log holds {count} turn "
        f"(“{recent[0]['question'] if recent else ''}”); log: “{short(warned[0] if warned else '', 70)}”"
    )
    ok = kept and count == 1 and bool(recent) and recent[0]["question"] == Q and bool(warned)
    return "`state/log/turns.sqlite` replaced by 3.9 KB of text, then `build_bot` and one web turn", outcome, ok


# -- the table ------------------------------------------------------------------------------
def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def guarded(fn, *args):
    """Run one fault; an exception is an observed outcome too (and not as intended)."""
    try:
        return fn(*args)
    except Exception as exc:  # the table reports it
        traceback.print_exc()
        return None, f"raised {type(exc).__name__}: {short(str(exc), 120)}", False


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    args = p.parse_args(argv)
    for var in ("OPENAI_API_KEY", "KBBOT_MODE"):
        os.environ.pop(var, None)
    logging.basicConfig(level=logging.CRITICAL)  # the console stays quiet; warnings go to CAPTURE
    logging.getLogger().handlers[0].setLevel(logging.CRITICAL)
    logging.getLogger("bot").addHandler(CAPTURE)
    logging.getLogger("bot").setLevel(logging.WARNING)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="kbbot-faults-"))
    try:
        jieba = tmp / "jieba"
        Tokenizer(cache_dir=jieba).tokenize("预热")
        rows: dict[int, tuple] = {}
        # Forking (fault 7) first, before any background index worker thread exists.
        rows[7] = guarded(fault_same_id, tmp)
        rows[8] = guarded(fault_stale_edit, tmp)
        rows[9] = guarded(fault_overwrite_restore, tmp)
        rows[4] = guarded(fault_stale_temp, tmp, jieba)
        rows[10] = guarded(fault_corrupt_log, tmp, jieba)
        rows[5] = guarded(fault_lone_surrogate, tmp, jieba)
        rows[6] = guarded(fault_malformed_json, tmp, jieba)
        rows[1] = guarded(fault_tantivy_segments, tmp, jieba)
        try:
            rows[2], rows[3] = fault_faiss_and_fasttext(tmp, jieba)
        except Exception as exc:
            traceback.print_exc()
            rows[2] = rows[3] = (None, f"raised {type(exc).__name__}: {short(str(exc), 120)}", False)
        try:  # attacks on the served app and a misbehaving LLM
            leaks = leak_rows(lambda name: make_settings(tmp, jieba, name))
        except Exception as exc:
            traceback.print_exc()
            leaks = {
                11: ("attacks on the served app", "", f"raised {type(exc).__name__}: {short(str(exc), 120)}", False)
            }
        rows.update({n: row[1:] for n, row in leaks.items()})
        try:  # memory an anonymous client can take, before and after the caps
            memory = memory_rows()
        except Exception as exc:
            traceback.print_exc()
            memory = {23: ("memory attacks", "", f"raised {type(exc).__name__}: {short(str(exc), 120)}", False)}
        rows.update({n: row[1:] for n, row in memory.items()})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = {
        1: "random bytes in tantivy segment files while serving",
        2: "damaged FAISS body (vectors file)",
        3: "damaged fasttext.bin at start",
        4: "stale temporary files of a killed process, at start",
        5: "a knowledge file with a lone `\\ud800` escape",
        6: "malformed JSON saved while serving",
        7: "two simultaneous saves of the same id into two files",
        8: "a stale edit (entry changed since loaded)",
        9: "an overwrite import, then `restore` from history",
        10: "a corrupt conversation-log file",
        **{n: row[0] for n, row in leaks.items()},
        **{n: row[0] for n, row in memory.items()},
    }
    lines = ["| fault | injected how | observed outcome | as intended |", "|---|---|---|---|"]
    for n in sorted(rows):
        how, outcome, ok = rows[n]
        outcome = outcome.replace(str(tmp) + "/", "<tmp>/")  # the temp folder's name says nothing
        lines.append(f"| {n}. {cell(names[n])} | {cell(how or '')} | {cell(outcome)} | {bool(ok)} |")
    took = time.monotonic() - started
    table = "\n".join(lines)
    print(table)
    bad = [n for n in sorted(rows) if not rows[n][2]]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} as intended ({took:.0f} s)" + (f"; not: {bad}" if bad else ""))
    if not args.no_write:
        header = (
            f"## Faults\n\nOne run of `python -m benchmarks.faults` ({took:.0f} s, "
            f"{os.cpu_count()} CPUs shared with other work, Python {platform.python_version()}): each fault "
            "injected into a temp copy of the tiny test knowledge base (6 entries) and handled by the product's "
            "code (`build_bot` as app.py builds it, `build_index`, `KnowledgeStore`, `TurnLog`); rows 11-19 attack "
            "the real served app over HTTP (benchmarks/faults_leaks.py), rows 20-22 use the local test LLM "
            "(tests/support/llm_server.py). Rows 23-27 (benchmarks/faults_memory.py) measure the memory an anonymous "
            "client can take, side by side: *before* is the code of commit "
            f"{BEFORE} (unpacked by `git archive`), *after* this checkout, each serving the tiny knowledge in a child "
            "process (`python -m bot serve`) whose resident memory (VmRSS) is sampled every 10 ms; the spreadsheet is "
            "read by each tree's `read_xlsx` in a child with a 2 GB address-space cap. "
            '"As intended" is computed from the observations. Times include the shared-CPU noise.'
        )
        write_section("faults", header + "\n\n" + table)
        print("\nwrote the faults section of BENCHMARKS.md")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
