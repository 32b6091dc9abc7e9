"""The conversation log: every answered turn in a SQLite file, with feedback, hit counts and the unanswered inbox.

One file under ``state_dir`` (``log.path``), in WAL mode with a busy timeout and one connection per thread, so
concurrent chat sessions (and several processes) write safely. Nothing secret is stored: no keys, headers or
login names; the session id is an opaque id the front end chose. Old turns are deleted by age and by count
(``retention_days``, ``retention_rows``; 0 = no limit), checked on open and every ``prune_every`` records. A file
that is not a SQLite database is moved aside (``<name>.corrupt-<time>``) with a warning, and a fresh log started.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.conversations import rollup
from bot.conversations.inbox import AskedTurn, Group, group_turns, normalise, stored_hits
from bot.errors import BotError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: turns.top_relevance and the analytics indexes
UNANSWERED = "(strategy IN ('hyde', 'last_resort', 'escalate') OR rating = -1)"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, session TEXT, source TEXT, client TEXT,
    question TEXT NOT NULL, rewritten TEXT, norm TEXT NOT NULL, strategy TEXT NOT NULL, mode TEXT,
    hits TEXT NOT NULL, thresholds TEXT, timings TEXT, latency_ms REAL, llm TEXT, llm_used INTEGER NOT NULL,
    answer TEXT, hypothetical TEXT, notices TEXT, finished INTEGER NOT NULL,
    rating INTEGER, reason TEXT, rated_at TEXT, top_relevance REAL);
CREATE INDEX IF NOT EXISTS turns_time ON turns(time);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session);
DROP INDEX IF EXISTS turns_unanswered;
CREATE INDEX IF NOT EXISTS turns_unanswered_2 ON turns(id) WHERE {UNANSWERED};
CREATE TABLE IF NOT EXISTS used (
    turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE, entry_id TEXT NOT NULL, time TEXT NOT NULL,
    source TEXT, mode TEXT);
CREATE INDEX IF NOT EXISTS used_entry ON used(entry_id, time);
CREATE INDEX IF NOT EXISTS used_turn ON used(turn_id);
CREATE TABLE IF NOT EXISTS dismissals (norm TEXT PRIMARY KEY, dismissed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rejected_suggestions (
    norm TEXT NOT NULL, entry_id TEXT NOT NULL, rejected_at TEXT NOT NULL, PRIMARY KEY (norm, entry_id));
"""
# The analytics page (bot/conversations/analytics.py) aggregates a million turns in well under a second only from covering
# indexes: one over the filter columns and what the counts read, one over norm for top and trending questions.
# Created after the migration below, since an older file lacks top_relevance until then.
INDEXES = """
CREATE INDEX IF NOT EXISTS turns_stats ON turns(time, source, mode, strategy, rating, top_relevance);
CREATE INDEX IF NOT EXISTS turns_norm ON turns(norm, time, source, mode);
CREATE INDEX IF NOT EXISTS used_mode ON used(mode, time, entry_id, source);
CREATE INDEX IF NOT EXISTS used_source ON used(source, time, entry_id, mode);
"""
JSON_COLUMNS = ("hits", "thresholds", "timings", "notices")
FILTERS = {  # {p}: the table's alias, where a query joins
    "session": "{p}session = ?",
    "source": "{p}source = ?",
    "strategy": "{p}strategy = ?",
    "mode": "{p}mode = ?",
    "rating": "{p}rating = ?",
    "since": "{p}time >= ?",
    "until": "{p}time < ?",
    "text": "instr({p}question, ?) > 0",
}


@dataclass(frozen=True)
class Purge:
    """One run of the retention purge: when (UTC ISO) and how many turns it removed."""

    time: str
    removed: int


class TurnLogError(BotError):
    """The conversation log cannot be opened or written, or a turn id is unknown."""


def utc_iso(moment: datetime | None = None) -> str:
    """A moment (default: now) as a sortable UTC ISO string with microseconds."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _label(value: str | None) -> str | None:
    return None if value is None else str(value)[:200]


class TurnLog:
    """The SQLite conversation log: ``record`` a turn, ``feedback`` on it, and the admin queries."""

    def __init__(
        self,
        path: str | Path,
        retention_days: int = 90,
        retention_rows: int = 100_000,
        prune_every: int = 200,
        clock: Callable[[], datetime] | None = None,
        timeout: float = 30.0,
        mask: Callable[[str | None], str | None] | None = None,
        prune_on_open: bool = True,
    ):
        self.path = Path(path)
        # Personal data is masked before anything is stored (bot/conversations/privacy.py); None stores text as given.
        self.mask: Callable[[str | None], str | None] = mask or (lambda text: text)
        self.masking = mask is not None
        self.retention_days, self.retention_rows, self.prune_every = retention_days, retention_rows, prune_every
        self.clock = clock or (lambda: datetime.now(UTC))
        self.timeout = timeout
        self.moved_aside: Path | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        # Writers of this process queue here; SQLite's busy handler (sleeps of up to 100 ms, unfair) only has to
        # arbitrate between processes. Without it 20 threads saw waits of over 2 s.
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._since_prune = 0
        self._open()
        if prune_on_open:
            self.prune()

    # -- connections ---------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        with self._lock:
            self._connections.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def _write(self) -> _Transaction:
        return _Transaction(self._conn(), self._write_lock)

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TurnLogError(f"cannot create the folder of conversation log {self.path}: {exc}") from exc
        try:
            self._init_schema()
        except (sqlite3.DatabaseError, TurnLogError) as exc:
            cause = exc.__cause__ if isinstance(exc, TurnLogError) else exc
            if not isinstance(cause, sqlite3.DatabaseError) or not _corrupt(cause):
                if isinstance(exc, TurnLogError):
                    raise
                raise TurnLogError(
                    f"cannot open conversation log {self.path}: {exc}; check log.path and that its folder is writable"
                ) from exc
            self._move_aside(exc)
            self._init_schema()

    def _init_schema(self) -> None:
        conn = self._conn()
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
        with self._write() as c:
            for statement in filter(str.strip, SCHEMA.split(";")):
                c.execute(statement)
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise TurnLogError(
                    f"conversation log {self.path} has schema version {row[0]}, newer than this "
                    f"version of kbbot understands ({SCHEMA_VERSION}); upgrade kbbot or set log.path"
                )
            fresh = row is None
            _migrate(c)
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'hourly'").fetchone() is None:
                for statement in filter(str.strip, rollup.SCHEMA.split(";")):
                    c.execute(statement)
                if not fresh:
                    rollup.rebuild(c)  # an older log: count the turns it already holds
            for statement in filter(str.strip, INDEXES.split(";")):
                c.execute(statement)
            c.execute(
                "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def _move_aside(self, exc: Exception) -> None:
        self.close()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                src.replace(Path(f"{target}{suffix}"))
        self.moved_aside = target
        log.warning(
            "conversation log %s is not a usable SQLite database (%s); moved it to %s and started a new one",
            self.path,
            exc,
            target,
        )

    def close(self) -> None:
        """Close every connection this log opened (in any thread)."""
        with self._lock:
            conns, self._connections = self._connections, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    # -- writing -------------------------------------------------------------
    def record(
        self,
        answer: Any,
        session: str | None,
        client: str | None = None,
        *,
        source: str | None = None,
        now: datetime | None = None,
    ) -> int:
        """Store one answered turn (``source``: "web", "api", "widget", "wecom", "cli"; ``client``: an opaque caller label); its id."""
        get = lambda name, default=None: getattr(answer, name, default)  # fields the Answer may gain or lack
        cutoffs, timings = get("thresholds"), dict(get("timings") or {})
        when, hits = utc_iso(now or self.clock()), stored_hits(answer)
        question, rewritten = self.mask(answer.question) or "", self.mask(get("rewritten"))
        for hit in hits:
            if "subquestion" in hit:
                hit["subquestion"] = self.mask(hit["subquestion"])
        row = {
            "time": when,
            "session": _label(session),
            "source": _label(source),
            "client": _label(client),
            "question": question,
            "rewritten": rewritten,
            "norm": normalise(rewritten or question),
            "strategy": str(getattr(answer.strategy, "value", answer.strategy)),
            "mode": get("mode"),
            "hits": json.dumps(hits, ensure_ascii=False),
            "thresholds": json.dumps(cutoffs.to_dict()) if cutoffs is not None else None,
            "timings": json.dumps(timings),
            "latency_ms": timings.get("total"),
            "llm": get("llm"),
            "llm_used": int(bool(get("llm_used"))),
            "answer": self.mask(get("text", "")),
            "hypothetical": self.mask(get("hypothetical")),
            "notices": json.dumps(list(get("notices") or ()), ensure_ascii=False),
            "finished": int(bool(get("finished", True))),
            "top_relevance": max((h["relevance"] for h in hits), default=None),
        }
        with self._write() as c:
            turn_id = c.execute(
                f"INSERT INTO turns ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
            ).lastrowid
            c.executemany(
                "INSERT INTO used (turn_id, entry_id, time, source, mode) VALUES (?, ?, ?, ?, ?)",
                [(turn_id, h["id"], when, row["source"], row["mode"]) for h in hits if h["used"]],
            )
            rollup.add_turn(c, row, [h["id"] for h in hits if h["used"]])
        with self._lock:
            self._since_prune += 1
            due = self.prune_every and self._since_prune >= self.prune_every
            if due:
                self._since_prune = 0
        if due:
            self.prune(now)
        assert turn_id is not None  # lastrowid of the INSERT above
        return int(turn_id)

    def feedback(self, turn_id: int, rating: int, reason: str | None = None, now: datetime | None = None) -> None:
        """Rate a turn +1 / -1 with an optional reason (the latest rating wins); TurnLogError for an unknown id."""
        if rating not in (1, -1):
            raise ValueError(f"rating must be +1 or -1, not {rating!r}")
        reason = self.mask((reason or "").strip()[:2000]) or None
        with self._write() as c:
            turn = c.execute(rollup.TURN_SQL, (int(turn_id),)).fetchone()
            if turn is not None:
                c.execute(
                    "UPDATE turns SET rating = ?, reason = ?, rated_at = ? WHERE id = ?",
                    (rating, reason, utc_iso(now or self.clock()), int(turn_id)),
                )
                rollup.rate(c, turn, rating)
        if turn is None:
            raise TurnLogError(f"no turn {turn_id} in the conversation log (unknown, or deleted by retention)")

    def prune(self, now: datetime | None = None) -> int:
        """Delete turns older than ``retention_days`` and beyond the newest ``retention_rows``; how many went.

        Each run is noted in the log itself (:meth:`last_purge`), so the page can say when it last ran.
        """
        gone = 0
        when = now or self.clock()
        with self._write() as c:
            if self.retention_days:
                cutoff = utc_iso((now or self.clock()) - timedelta(days=self.retention_days))
                gone += c.execute("DELETE FROM turns WHERE time < ?", (cutoff,)).rowcount
                c.execute("DELETE FROM dismissals WHERE dismissed_at < ?", (cutoff,))
            if self.retention_rows:
                # Ids are never reused and only the oldest go, so the newest N turns are the top N ids: O(log n).
                gone += c.execute(
                    "DELETE FROM turns WHERE id <= (SELECT MAX(id) FROM turns) - ?", (self.retention_rows,)
                ).rowcount
            if gone:
                rollup.trim(c)
            note = json.dumps({"time": utc_iso(when), "removed": gone})
            c.execute(
                "INSERT INTO meta VALUES ('last_purge', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (note,),
            )
        return gone

    def last_purge(self) -> Purge | None:
        """When retention last ran and how many turns it removed (None: never, in this log)."""
        row = self._conn().execute("SELECT value FROM meta WHERE key = 'last_purge'").fetchone()
        if row is None:
            return None
        note = json.loads(row[0])
        return Purge(time=note["time"], removed=int(note["removed"]))

    def mask_stored(self, batch: int = 500) -> int:
        """Mask personal data in turns stored before masking was on (question, answers, reasons); rows changed."""
        changed, last = 0, 0
        columns = ("question", "rewritten", "answer", "hypothetical", "reason")
        while True:
            rows = (
                self._conn()
                .execute(f"SELECT id, {', '.join(columns)} FROM turns WHERE id > ? ORDER BY id LIMIT ?", (last, batch))
                .fetchall()
            )
            if not rows:
                return changed
            last = rows[-1]["id"]
            updates = []
            for r in rows:
                masked = {c: self.mask(r[c]) for c in columns}
                if any(masked[c] != r[c] for c in columns):
                    norm = normalise(masked["rewritten"] or masked["question"] or "")
                    updates.append((*masked.values(), norm, r["id"]))
            if updates:
                with self._write() as c:
                    c.executemany(
                        f"UPDATE turns SET {', '.join(f'{c} = ?' for c in columns)}, norm = ? WHERE id = ?", updates
                    )
                changed += len(updates)

    # -- reading -------------------------------------------------------------
    def get(self, turn_id: int) -> dict:
        """One turn as a dict (JSON columns decoded); TurnLogError for an unknown id."""
        row = self._conn().execute("SELECT * FROM turns WHERE id = ?", (int(turn_id),)).fetchone()
        if row is None:
            raise TurnLogError(f"no turn {turn_id} in the conversation log (unknown, or deleted by retention)")
        return _decode(row)

    def recent(self, limit: int = 50, offset: int = 0, filters: Mapping[str, Any] | None = None) -> list[dict]:
        """The newest turns first; ``filters`` keys: session, source, strategy, mode, rating, since, until, text."""
        where, args = _where(filters)
        sql = "SELECT * FROM turns" + (" WHERE " + " AND ".join(where) if where else "")
        rows = self._conn().execute(sql + " ORDER BY id DESC LIMIT ? OFFSET ?", (*args, int(limit), int(offset)))
        return [_decode(r) for r in rows]

    def session_turns(self, scan: int = 5000) -> list[dict]:
        """The newest ``scan`` turns that belong to a conversation (id, time, session, question, strategy, hits),
        oldest first: what suggestions from traffic read (bot/conversations/suggestions.py)."""
        rows = self._conn().execute(
            "SELECT id, time, session, question, strategy, hits FROM turns WHERE session IS NOT NULL "
            "ORDER BY id DESC LIMIT ?",
            (int(scan),),
        )
        return [dict(r, hits=json.loads(r["hits"])) for r in reversed(rows.fetchall())]

    def reject_suggestion(self, norm: str, entry_id: str, now: datetime | None = None) -> None:
        """Never suggest this question (normal form) for this entry again."""
        when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        with self._write() as c:
            c.execute("INSERT OR REPLACE INTO rejected_suggestions VALUES (?, ?, ?)", (norm, entry_id, when))

    def rejected_suggestions(self) -> set[tuple[str, str]]:
        """(normal form, entry id) of every rejected suggestion."""
        return {(r[0], r[1]) for r in self._conn().execute("SELECT norm, entry_id FROM rejected_suggestions")}

    def count(self) -> int:
        """How many turns the log holds."""
        return self._conn().execute("SELECT COUNT(*) FROM turns").fetchone()[0]

    def hit_counts(self) -> dict[str, tuple[int, str]]:
        """entry id -> (turns whose answer used it, time of the latest such turn)."""
        rows = self._conn().execute("SELECT entry_id, COUNT(*), MAX(time) FROM used GROUP BY entry_id")
        return {r[0]: (r[1], r[2]) for r in rows}

    def _asked(self, scan: int, filters: Mapping[str, Any] | None = None) -> Iterator[AskedTurn]:
        where, args = _where(filters, prefix="t.")
        rows = self._conn().execute(
            f"SELECT t.id, t.time, t.question, t.rewritten, t.norm, t.strategy, t.rating, t.reason, t.hits, "
            f"t.thresholds FROM turns t LEFT JOIN dismissals d ON d.norm = t.norm WHERE {UNANSWERED} "
            f"AND (d.dismissed_at IS NULL OR t.time > d.dismissed_at){''.join(' AND ' + w for w in where)} "
            "ORDER BY t.id DESC LIMIT ?",
            (*args, scan),
        )
        return (AskedTurn.from_row(r) for r in rows)

    def unanswered(
        self, limit: int = 50, sort: str = "latest", scan: int = 5000, filters: Mapping[str, Any] | None = None
    ) -> list[Group]:
        """Groups of near-duplicate questions that fell back (HyDE, last resort) or got a thumbs down.

        Looks at the newest ``scan`` such turns (``filters`` as in :meth:`recent`); a dismissed group stays hidden
        until asked again.
        """
        return group_turns(self._asked(scan, filters), sort=sort)[:limit]

    def dismiss(self, group_key: str, now: datetime | None = None, scan: int = 5000) -> int:
        """Hide the group holding ``group_key`` until one of its questions is asked again; turns hidden."""
        norm = normalise(group_key)
        group = next((g for g in group_turns(self._asked(scan)) if norm in g.norms or g.key == group_key), None)
        norms = group.norms if group else frozenset([norm])
        when = utc_iso(now or self.clock())
        with self._write() as c:
            c.executemany(
                "INSERT INTO dismissals VALUES (?, ?) ON CONFLICT(norm) DO UPDATE SET dismissed_at = "
                "excluded.dismissed_at",
                [(n, when) for n in norms],
            )
        return group.count if group else 0


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) under the process's write lock."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock):
        self.conn, self.lock = conn, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.lock.release()
            raise TurnLogError(f"conversation log write failed: {exc}") from exc
        return self.conn

    def __exit__(self, kind, exc, tb) -> None:
        try:
            try:
                self.conn.execute("ROLLBACK" if kind else "COMMIT")
            except sqlite3.Error as failed:
                exc = exc or failed
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise TurnLogError(f"conversation log write failed: {exc}") from exc
        finally:
            self.lock.release()


def _where(filters: Mapping[str, Any] | None, prefix: str = "") -> tuple[list[str], list[Any]]:
    """SQL conditions and their arguments for :data:`FILTERS` (None values ignored); ValueError for unknown keys."""
    where, args = [], []
    for key, value in (filters or {}).items():
        if key not in FILTERS:
            raise ValueError(f"unknown filter {key!r}; use: {', '.join(FILTERS)}")
        if value is not None:
            where.append(FILTERS[key].format(p=prefix))
            args.append(utc_iso(value) if isinstance(value, datetime) else value)
    return where, args


def _migrate(c: sqlite3.Connection) -> None:
    """Bring a version-1 file up to date in place: turns.top_relevance from the stored hits, used.source/mode."""
    columns = {r[1] for r in c.execute("PRAGMA table_info(turns)")}
    if "top_relevance" not in columns:
        log.info("conversation log: adding top_relevance (schema 1 -> 2); older turns filled from their hits")
        c.execute("ALTER TABLE turns ADD COLUMN top_relevance REAL")
        c.execute(
            "UPDATE turns SET top_relevance = (SELECT MAX(json_extract(value, '$.relevance')) FROM json_each(hits))"
        )
    if "source" not in {r[1] for r in c.execute("PRAGMA table_info(used)")}:
        # The per-entry tiles filter by front end and mode without joining a million turns.
        c.execute("ALTER TABLE used ADD COLUMN source TEXT")
        c.execute("ALTER TABLE used ADD COLUMN mode TEXT")
        c.execute("UPDATE used SET (source, mode) = (SELECT source, mode FROM turns WHERE turns.id = used.turn_id)")


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """True when the file at the path is not (or no longer) a readable SQLite database."""
    name = getattr(exc, "sqlite_errorname", "")
    return name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or any(
        m in str(exc) for m in ("not a database", "malformed", "file is encrypted")
    )


def _decode(row: sqlite3.Row) -> dict:
    d = dict(row)
    for key in JSON_COLUMNS:
        if d.get(key) is not None:
            d[key] = json.loads(d[key])
    d["llm_used"], d["finished"] = bool(d["llm_used"]), bool(d["finished"])
    return d


def turn_log_from_settings(settings: Any, prune_on_open: bool = True) -> TurnLog | None:
    """The TurnLog that ``settings.log`` describes (its path relative to ``state_dir``), or None when disabled."""
    cfg = getattr(settings, "log", None)
    if cfg is None or not cfg.enabled:
        return None
    path = Path(cfg.path).expanduser()
    if not path.is_absolute():
        path = settings.resolve(settings.state_dir) / path
    from bot.conversations.privacy import PrivacyPolicy

    privacy = getattr(settings, "privacy", None)
    mask = PrivacyPolicy.from_settings(privacy).stored.mask if privacy is not None and privacy.mask else None
    return TurnLog(path, cfg.retention_days, cfg.retention_rows, mask=mask, prune_on_open=prune_on_open)
