"""The conversation log's behaviour written once, in SQL that SQLite and PostgreSQL both run (``?`` placeholders).

A backend supplies the connection (:meth:`SqlTurnLog._read`, :meth:`SqlTurnLog._write`), the insert that returns the
new turn's id and its :class:`~bot.conversations.log_store.Dialect`; recording, feedback, retention, masking, the inbox
and the admin queries live here, so both backends behave alike (tests/conversations/test_log_contract.py holds them to it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from bot.conversations import rollup
from bot.conversations.inbox import AskedTurn, Group, SessionTurn, TurnRecord, group_turns, normalise, strategy_name
from bot.conversations.log_store import Dialect, EntryHits, Purge, TurnLogError, TurnRow, utc_iso

# 'escalate': misses an older log handed off (bot/conversations/inbox.py RENAMED_STRATEGIES), still unanswered
UNANSWERED = "(strategy IN ('hyde', 'last_resort', 'escalate') OR rating = -1)"
JSON_COLUMNS = ("hits", "thresholds", "timings", "notices")
FILTERS = {  # {p}: the table's alias, where a query joins
    "session": "{p}session = ?",
    "source": "{p}source = ?",
    "strategy": "{p}strategy = ?",
    "mode": "{p}mode = ?",
    "rating": "{p}rating = ?",
    "since": "{p}time >= ?",
    "until": "{p}time < ?",
    "text": "",  # the dialect's ``contains``
}
MASKED_COLUMNS = ("question", "rewritten", "answer", "hypothetical", "reason")


def _label(value: str | None) -> str | None:
    return None if value is None else str(value)[:200]


def turn_row(
    turn: TurnRow,
    session: str | None,
    client: str | None,
    source: str | None,
    when: str,
    mask: Callable[[str | None], str | None],
) -> dict[str, Any]:
    """The turns row of one turn, personal data masked with ``mask``: column -> value."""
    hits = [{**h, "subquestion": mask(h["subquestion"])} if "subquestion" in h else h for h in turn.hits]
    question, rewritten = mask(turn.question) or "", mask(turn.rewritten)
    return {
        "time": when,
        "session": _label(session),
        "source": _label(source),
        "client": _label(client),
        "question": question,
        "rewritten": rewritten,
        "norm": normalise(rewritten or question),
        "strategy": turn.strategy,
        "mode": turn.mode,
        "hits": json.dumps(hits, ensure_ascii=False),
        "thresholds": json.dumps(dict(turn.thresholds)) if turn.thresholds is not None else None,
        "timings": json.dumps(dict(turn.timings)),
        "latency_ms": turn.timings.get("total"),
        "llm": turn.llm,
        "llm_used": int(turn.llm_used),
        "answer": mask(turn.text),
        "hypothetical": mask(turn.hypothetical),
        "notices": json.dumps(list(turn.notices), ensure_ascii=False),
        "finished": int(turn.finished),
        "top_relevance": max((h["relevance"] for h in turn.hits), default=None),
    }


def decode(row: Mapping) -> TurnRecord:
    """A stored turn as a dict: JSON columns decoded, flags as booleans."""
    d = dict(row)
    for key in JSON_COLUMNS:
        if d.get(key) is not None:
            d[key] = json.loads(d[key])
    d["llm_used"], d["finished"] = bool(d["llm_used"]), bool(d["finished"])
    d["strategy"] = strategy_name(d["strategy"])
    return cast("TurnRecord", d)


class SqlTurnLog:
    """``record`` a turn, ``feedback`` on it, retention and the admin queries, over a backend's connection."""

    dialect: Dialect

    def __init__(
        self,
        retention_days: int,
        retention_rows: int,
        prune_every: int,
        clock: Callable[[], datetime] | None,
        mask: Callable[[str | None], str | None] | None,
    ):
        # Personal data is masked before anything is stored (bot/conversations/privacy.py); None stores text as given.
        self.mask: Callable[[str | None], str | None] = mask or (lambda text: text)
        self.masking = mask is not None
        self.retention_days, self.retention_rows, self.prune_every = retention_days, retention_rows, prune_every
        self.clock = clock or (lambda: datetime.now(UTC))
        self._count_lock = threading.Lock()
        self._since_prune = 0
        # One connection per thread (``_local.conn``), each remembered so that close() reaches every thread's.
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[Any] = []

    # -- what a backend supplies ----------------------------------------------
    def _read(self, sql: str, args: Sequence[Any] = ()) -> list:
        """Rows (by name and by position) of one read statement."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:
        """A transaction: its ``execute`` and ``executemany`` take ``?`` statements; commits on a clean exit."""
        raise NotImplementedError

    def _insert_turn(self, c: Any, row: dict) -> int:
        """Insert ``row`` into turns inside the transaction ``c``; the new id."""
        raise NotImplementedError

    def _remember(self, conn: Any) -> Any:
        """``conn``, a new connection of this thread, kept for :meth:`close`."""
        with self._lock:
            self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close every connection this log opened (in any thread)."""
        with self._lock:
            conns, self._connections = self._connections, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def query(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        """Rows of a read-only statement written with ``?`` placeholders (the analytics tiles)."""
        return [tuple(r) for r in self._read(sql, args)]

    # -- the database, for tables other packages keep in it (bot/handoff) ------
    def read(self, sql: str, args: Sequence[Any] = ()) -> list:
        """Rows (by name and by position) of one read statement."""
        return self._read(sql, args)

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction (``?`` statements); commits on a clean exit, rolls back on an error."""
        return self._write()

    def create_tables(self, schema: str) -> None:
        """Run ``schema`` (idempotent statements in SQLite's spelling) in one transaction, under the schema lock."""
        statements = [s.strip() for s in self.dialect.spell(schema).split(";") if s.strip()]
        with self._write() as c:
            if self.dialect.schema_lock:
                c.execute(self.dialect.schema_lock)
            for statement in statements:
                c.execute(statement)

    # -- writing -------------------------------------------------------------
    def record(
        self,
        turn: TurnRow,
        session: str | None,
        client: str | None = None,
        *,
        source: str | None = None,
        now: datetime | None = None,
    ) -> int:
        """Store one answered turn (``source``: "web", "api", "widget", "wecom", "feishu", "cli"; ``client``: an opaque caller label); its id."""
        row = turn_row(turn, session, client, source, utc_iso(now or self.clock()), self.mask)
        used = sorted({h["id"] for h in json.loads(row["hits"]) if h["used"]})  # one lock order for every writer
        with self._write() as c:
            turn_id = self._insert_turn(c, row)
            c.executemany(
                "INSERT INTO used (turn_id, entry_id, time, source, mode) VALUES (?, ?, ?, ?, ?)",
                [(turn_id, entry, row["time"], row["source"], row["mode"]) for entry in used],
            )
            rollup.add_turn(c, row, used, self.dialect)
        with self._count_lock:
            self._since_prune += 1
            due = self.prune_every and self._since_prune >= self.prune_every
            if due:
                self._since_prune = 0
        if due:
            self.prune(now)
        return turn_id

    def feedback(self, turn_id: int, rating: int, reason: str | None = None, now: datetime | None = None) -> None:
        """Rate a turn +1 / -1 with an optional reason (the latest rating wins); TurnLogError for an unknown id."""
        if rating not in (1, -1):
            raise ValueError(f"rating must be +1 or -1, not {rating!r}")
        reason = self.mask((reason or "").strip()[:2000]) or None
        with self._write() as c:
            turn = c.execute(rollup.TURN_SQL + self.dialect.lock_row, (int(turn_id),)).fetchone()
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
                cutoff = utc_iso(when - timedelta(days=self.retention_days))
                gone += c.execute("DELETE FROM turns WHERE time < ?", (cutoff,)).rowcount
                c.execute("DELETE FROM dismissals WHERE dismissed_at < ?", (cutoff,))
            if self.retention_rows:
                # Ids are never reused and only the oldest go, so the newest N turns are the top N ids: O(log n).
                gone += c.execute(
                    "DELETE FROM turns WHERE id <= (SELECT MAX(id) FROM turns) - ?", (self.retention_rows,)
                ).rowcount
            if gone:
                rollup.trim(c, self.dialect)
            # A hidden group or a rejected suggestion keeps a question's normal form: it goes with the question.
            for table in ("dismissals", "rejected_suggestions"):
                c.execute(f"DELETE FROM {table} WHERE norm NOT IN (SELECT norm FROM turns)")
            note = json.dumps({"time": utc_iso(when), "removed": gone})
            c.execute(
                "INSERT INTO meta VALUES ('last_purge', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (note,),
            )
        if gone:
            self._purged()
        return gone

    def _purged(self) -> None:
        """After retention removed turns: a backend whose files keep copies of deleted text drops them."""

    def last_purge(self) -> Purge | None:
        """When retention last ran and how many turns it removed (None: never, in this log)."""
        rows = self._read("SELECT value FROM meta WHERE key = 'last_purge'")
        if not rows:
            return None
        note = json.loads(rows[0][0])
        return Purge(time=note["time"], removed=int(note["removed"]))

    def mask_stored(self, batch: int = 500) -> int:
        """Mask personal data in turns stored before masking was on (question, answers, reasons); rows changed."""
        changed, last = 0, 0
        columns = MASKED_COLUMNS
        while True:
            rows = self._read(
                f"SELECT id, {', '.join(columns)} FROM turns WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
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

    def reject_suggestion(self, norm: str, entry_id: str, now: datetime | None = None) -> None:
        """Never suggest this question (normal form) for this entry again."""
        when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        with self._write() as c:
            c.execute(
                "INSERT INTO rejected_suggestions VALUES (?, ?, ?) "
                "ON CONFLICT (norm, entry_id) DO UPDATE SET rejected_at = excluded.rejected_at",
                (norm, entry_id, when),
            )

    def dismiss(self, group_key: str, now: datetime | None = None, scan: int = 5000) -> int:
        """Hide the group holding ``group_key`` until one of its questions is asked again; turns hidden."""
        norm = normalise(group_key)
        group = next((g for g in group_turns(self._asked(scan)) if norm in g.norms or g.key == group_key), None)
        norms = sorted(group.norms if group else [norm])
        when = utc_iso(now or self.clock())
        with self._write() as c:
            c.executemany(
                "INSERT INTO dismissals VALUES (?, ?) ON CONFLICT (norm) DO UPDATE SET dismissed_at = "
                "excluded.dismissed_at",
                [(n, when) for n in norms],
            )
        return group.count if group else 0

    # -- reading -------------------------------------------------------------
    def get(self, turn_id: int) -> TurnRecord:
        """One turn as a dict (JSON columns decoded); TurnLogError for an unknown id."""
        rows = self._read("SELECT * FROM turns WHERE id = ?", (int(turn_id),))
        if not rows:
            raise TurnLogError(f"no turn {turn_id} in the conversation log (unknown, or deleted by retention)")
        return decode(rows[0])

    def recent(self, limit: int = 50, offset: int = 0, filters: Mapping[str, Any] | None = None) -> list[TurnRecord]:
        """The newest turns first; ``filters`` keys: session, source, strategy, mode, rating, since, until, text."""
        where, args = self._where(filters)
        sql = "SELECT * FROM turns" + (" WHERE " + " AND ".join(where) if where else "")
        rows = self._read(sql + " ORDER BY id DESC LIMIT ? OFFSET ?", (*args, int(limit), int(offset)))
        return [decode(r) for r in rows]

    def session_turns(self, scan: int = 5000) -> list[SessionTurn]:
        """The newest ``scan`` turns that belong to a conversation (id, time, session, question, strategy, hits,
        rating), oldest first: what suggestions and labels from traffic read (bot/conversations/suggestions.py)."""
        rows = self._read(
            "SELECT id, time, session, question, strategy, hits, rating FROM turns WHERE session IS NOT NULL "
            "ORDER BY id DESC LIMIT ?",
            (int(scan),),
        )
        return [cast("SessionTurn", dict(r, hits=json.loads(r["hits"]))) for r in reversed(rows)]

    def rejected_suggestions(self) -> set[tuple[str, str]]:
        """(normal form, entry id) of every rejected suggestion."""
        return {(r[0], r[1]) for r in self._read("SELECT norm, entry_id FROM rejected_suggestions")}

    def count(self) -> int:
        """How many turns the log holds."""
        return int(self._read("SELECT COUNT(*) FROM turns")[0][0])

    def hit_counts(self) -> dict[str, EntryHits]:
        """entry id -> turns whose answer used it and the time of the latest such turn."""
        rows = self._read("SELECT entry_id, COUNT(*), MAX(time) FROM used GROUP BY entry_id")
        return {r[0]: EntryHits(int(r[1]), r[2]) for r in rows}

    def _asked(self, scan: int, filters: Mapping[str, Any] | None = None) -> Iterator[AskedTurn]:
        where, args = self._where(filters, prefix="t.")
        rows = self._read(
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

    def _where(self, filters: Mapping[str, Any] | None, prefix: str = "") -> tuple[list[str], list[Any]]:
        """SQL conditions and their arguments for :data:`FILTERS` (None values ignored); ValueError for unknown keys."""
        where, args = [], []
        for key, value in (filters or {}).items():
            if key not in FILTERS:
                raise ValueError(f"unknown filter {key!r}; use: {', '.join(FILTERS)}")
            if value is not None:
                where.append(FILTERS[key].format(p=prefix) or self.dialect.contains.format(col=f"{prefix}question"))
                args.append(utc_iso(value) if isinstance(value, datetime) else value)
        return where, args
