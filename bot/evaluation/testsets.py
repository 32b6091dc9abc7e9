"""Test sets an admin keeps: labelled questions (question → expected entry id, or "none"), run on the current
knowledge with the same numbers as ``python -m bot eval``, with a history of runs and what changed since the last.

Stored in ``state_dir/testsets.sqlite`` (embedded state, admin-only). A file is CSV (columns ``question`` and
``expected``: an entry id, several joined by ``|``, or ``none``) or JSON lines in the eval format
(``{"question", "gold_ids", "kind"?}``); a bad row names its line and nothing is stored.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from bot.errors import ConfigError
from bot.evaluation.decisions import decide, summarize
from bot.evaluation.questions import EvalQuestion, load_questions
from bot.evaluation.run import run_questions
from bot.knowledge.entries import Entry

if TYPE_CHECKING:
    from bot.chat.bot import Bot

TOP_K = 10  # as python -m bot eval (--top-k default)
SCHEMA = """
CREATE TABLE IF NOT EXISTS testsets (name TEXT PRIMARY KEY, filename TEXT NOT NULL, text TEXT NOT NULL,
    saved_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, testset TEXT NOT NULL, time TEXT NOT NULL,
    mode TEXT NOT NULL, summary TEXT NOT NULL, results TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_testset ON runs(testset, id);
"""


def parse_cases(text: str, filename: str, entries: Sequence[Entry]) -> list[EvalQuestion]:
    """The labelled questions of a CSV or JSON-lines test set (gold ids resolved against ``entries``);
    ConfigError naming the file and line of the first problem."""
    text = text.removeprefix("\ufeff")
    if filename.lower().endswith(".csv"):
        lines = []
        reader = csv.DictReader(io.StringIO(text))
        missing = {"question", "expected"} - set(reader.fieldnames or ())
        if missing:
            raise ConfigError(
                f"{filename}: the CSV needs the columns question and expected (missing {sorted(missing)})"
            )
        for n, row in enumerate(reader, 2):
            expected = (row.get("expected") or "").strip()
            if not (row.get("question") or "").strip() or not expected:
                raise ConfigError(f"{filename}:{n}: question and expected (an entry id or none) are both required")
            gold = [] if expected.lower() == "none" else [g.strip() for g in expected.split("|") if g.strip()]
            kind = "answerable" if gold else "unanswerable"
            lines.append(
                json.dumps({"id": str(n), "question": row["question"].strip(), "gold_ids": gold, "kind": kind})
            )
        text = "\n".join(lines)
    with tempfile.TemporaryDirectory(prefix="kbbot-testset-") as tmp:
        path = Path(tmp) / "cases.jsonl"
        path.write_text(text, encoding="utf-8")
        try:
            return load_questions(path, list(entries))
        except ValueError as exc:
            raise ConfigError(str(exc).replace(str(path), filename)) from None


class CaseResult(TypedDict):
    """One case's outcome in a run (JSON, stored and shown): the question, the ladder's decision, the entries it
    answered from or offered, and whether that was right."""

    question: str
    decision: str
    entries: list[str]
    right: bool


@dataclass(frozen=True)
class CasesRun:
    """A test set run on the bot: the numbers as eval reports them (JSON) and each case's outcome by case id."""

    summary: dict[str, Any]
    results: dict[str, CaseResult]


@dataclass(frozen=True)
class TestRun:
    """One run of a test set: the numbers (as eval reports them) and each case's outcome."""

    __test__ = False  # not a pytest test class

    id: int
    testset: str
    time: str
    mode: str
    summary: dict[str, Any]  # as eval reports it: questions, recall, decision_f1, decisions, wrong_per_100, ...
    results: dict[str, CaseResult]  # by case id


@dataclass(frozen=True)
class RunDiff:
    """Cases that got better (now right) and worse (no longer right) than in the previous run."""

    better: tuple[str, ...]
    worse: tuple[str, ...]


def run_cases(bot: Bot, mode: str, questions: Sequence[EvalQuestion]) -> CasesRun:
    """The bot's retrieval and its whole ladder over the questions, as eval runs them."""
    bot.index.searcher(mode)
    run = run_questions(lambda q: bot.retrieve(q, mode=mode, top_k=TOP_K), questions, mode)
    decided = decide(bot, questions, mode)
    numbers = {
        "questions": len(questions),
        "recall": {"1": run.recall(1), "3": run.recall(3)},
        "decision_f1": run.decision_f1,
        **summarize(decided).to_dict(),
    }
    results = {
        d.question.id: CaseResult(
            question=d.question.question,
            decision=d.decision,
            entries=list(d.entries),
            right=d.right_or_resolved if d.question.gold else d.decision != "answer",
        )
        for d in decided
    }
    return CasesRun(numbers, results)


class TestSetStore:
    """Test sets and their runs in one SQLite file; reads never wait for a write (WAL)."""

    __test__ = False  # not a pytest test class

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as c:
            c.execute("PRAGMA journal_mode = WAL")
            c.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.row_factory = sqlite3.Row
        return conn

    def save(self, name: str, filename: str, text: str, entries: Sequence[Entry]) -> int:
        """Store (or replace) a test set after checking every row; returns its number of cases."""
        name = (name or "").strip() or Path(filename).stem
        cases = parse_cases(text, filename, entries)
        if not cases:
            raise ConfigError(f"{filename}: no questions in it")
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock, self._connect() as c:
            c.execute("INSERT OR REPLACE INTO testsets VALUES (?, ?, ?, ?)", (name, filename, text, now))
        return len(cases)

    def names(self) -> list[str]:
        """The stored test sets, by name."""
        with self._connect() as c:
            return [r[0] for r in c.execute("SELECT name FROM testsets ORDER BY name")]

    def cases(self, name: str, entries: Sequence[Entry]) -> list[EvalQuestion]:
        """The questions of a stored test set; ConfigError when there is none by that name."""
        with self._connect() as c:
            row = c.execute("SELECT filename, text FROM testsets WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ConfigError(f"no test set named {name!r}; stored: {', '.join(self.names()) or 'none'}")
        return parse_cases(row["text"], row["filename"], entries)

    def run(self, name: str, bot: Bot, mode: str) -> TestRun:
        """Run a stored test set on the bot's current knowledge and keep the run."""
        ran = run_cases(bot, mode, self.cases(name, bot.index.entries))
        summary, results = ran.summary, ran.results
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock, self._connect() as c:
            cur = c.execute(
                "INSERT INTO runs (testset, time, mode, summary, results) VALUES (?, ?, ?, ?, ?)",
                (name, now, mode, json.dumps(summary), json.dumps(results, ensure_ascii=False)),
            )
            run_id = int(cur.lastrowid or 0)
        return TestRun(run_id, name, now, mode, summary, results)

    def history(self, name: str, limit: int = 20) -> list[TestRun]:
        """The newest runs of a test set first."""
        with self._connect() as c:
            rows = c.execute("SELECT * FROM runs WHERE testset = ? ORDER BY id DESC LIMIT ?", (name, limit))
            return [
                TestRun(r["id"], r["testset"], r["time"], r["mode"], json.loads(r["summary"]), json.loads(r["results"]))
                for r in rows
            ]


def diff(previous: TestRun | None, current: TestRun) -> RunDiff:
    """Which cases changed between two runs of a test set (by case id)."""
    if previous is None:
        return RunDiff((), ())
    before = {k: v["right"] for k, v in previous.results.items()}
    better = tuple(k for k, v in current.results.items() if v["right"] and before.get(k) is False)
    worse = tuple(k for k, v in current.results.items() if not v["right"] and before.get(k) is True)
    return RunDiff(better, worse)
