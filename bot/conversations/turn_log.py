"""The conversation log in a SQLite file (the embedded default): every answered turn, feedback, hits, the inbox.

One file under ``state_dir`` (``log.path``), in WAL mode with a busy timeout and one connection per thread, so
concurrent chat sessions (and several processes) write safely. Nothing secret is stored: no keys, headers or
login names; the session id is an opaque id the front end chose. Old turns are deleted by age and by count
(``retention_days``, ``retention_rows``; 0 = no limit), checked on open and every ``prune_every`` records. A file
that is not a SQLite database is moved aside (``<name>.corrupt-<time>``) with a warning, and a fresh log started.
The behaviour shared with the PostgreSQL backend is in bot/conversations/log_sql.py; :func:`turn_log_from_settings`
picks the backend (``log.backend``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config.base import default_of
from bot.config.settings import LogSettings
from bot.conversations import rollup
from bot.conversations.log_schema import INDEXES, SCHEMA, SCHEMA_VERSION
from bot.conversations.log_sql import UNANSWERED, SqlTurnLog
from bot.conversations.log_store import ConversationLog, Dialect, Purge, TurnLogError, refuse_newer_schema, utc_iso

__all__ = [
    "SCHEMA_VERSION",
    "SQLITE",
    "ConversationLog",
    "Purge",
    "TurnLog",
    "TurnLogError",
    "turn_log_from_settings",
    "utc_iso",
]

log = logging.getLogger(__name__)

SQLITE = Dialect(name="sqlite", contains="instr({col}, ?) > 0", floor="CAST({x} AS INTEGER)")


class TurnLog(SqlTurnLog):
    """The SQLite conversation log: ``record`` a turn, ``feedback`` on it, and the admin queries."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        retention_days: int = default_of(LogSettings, "retention_days"),
        retention_rows: int = default_of(LogSettings, "retention_rows"),
        prune_every: int = 200,
        clock: Callable[[], datetime] | None = None,
        timeout: float = 30.0,
        mask: Callable[[str | None], str | None] | None = None,
        prune_on_open: bool = True,
    ):
        super().__init__(retention_days, retention_rows, prune_every, clock, mask)
        self.path = Path(path)
        self.timeout = timeout
        self.moved_aside: Path | None = None
        # Writers of this process queue here; SQLite's busy handler (sleeps of up to 100 ms, unfair) only has to
        # arbitrate between processes. Without it 20 threads saw waits of over 2 s.
        self._write_lock = threading.Lock()
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
        # A 64 MiB page cache keeps the indexes the analytics tiles scan in memory between tiles (the default is 2 MiB).
        conn.execute("PRAGMA cache_size = -65536")
        # Deleted rows are overwritten with zeros, not left in free pages: purged questions are gone from the file.
        conn.execute("PRAGMA secure_delete = ON")
        return self._remember(conn)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list:
        return self._conn().execute(sql, tuple(args)).fetchall()

    def _write(self) -> _Transaction:
        return _Transaction(self._conn(), self._write_lock)

    def _insert_turn(self, c: sqlite3.Connection, row: dict) -> int:
        turn_id = c.execute(
            f"INSERT INTO turns ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
        ).lastrowid
        assert turn_id is not None  # lastrowid of an INSERT
        return int(turn_id)

    def _purged(self) -> None:
        """Write the WAL into the file and empty it: the WAL keeps copies of the pages the purge rewrote."""
        with self._write_lock:
            busy, _, _ = self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:  # a reader holds an old snapshot; the next purge (or the last connection's close) empties it
            log.info("conversation log %s: the WAL could not be emptied after a purge (a reader is busy)", self.path)

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
            for statement in filter(str.strip, SCHEMA.format(unanswered=UNANSWERED).split(";")):
                c.execute(statement)
            row = c.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            refuse_newer_schema(
                row[0] if row else None, f"conversation log {self.path}", "upgrade kbbot or set log.path"
            )
            fresh = row is None
            _migrate(c)
            if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'hourly'").fetchone() is None:
                for statement in filter(str.strip, rollup.SCHEMA.format(without_rowid=" WITHOUT ROWID").split(";")):
                    c.execute(statement)
                if not fresh:
                    rollup.rebuild(c, SQLITE)  # an older log: count the turns it already holds
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


def turn_log_from_settings(settings: Any, prune_on_open: bool = True) -> ConversationLog | None:
    """The log that ``settings.log`` describes (SQLite: its path relative to ``state_dir``; PostgreSQL: the server
    whose DSN is in the environment variable ``log.postgres.dsn_env``), or None when disabled."""
    cfg = getattr(settings, "log", None)
    if cfg is None or not cfg.enabled:
        return None
    from bot.conversations.privacy import PrivacyPolicy

    privacy = getattr(settings, "privacy", None)
    mask = PrivacyPolicy.from_settings(privacy).stored.mask if privacy is not None and privacy.mask else None
    if getattr(cfg, "backend", "sqlite") == "postgres":
        from bot.conversations.pg_log import PgTurnLog
        from bot.storage.postgres import pg_dsn

        pg = cfg.postgres
        return PgTurnLog(
            pg_dsn(pg.dsn_env, "log.backend", TurnLogError),
            cfg.retention_days,
            cfg.retention_rows,
            mask=mask,
            prune_on_open=prune_on_open,
            connect_timeout=pg.connect_timeout,
            dsn_env=pg.dsn_env,
        )
    path = Path(cfg.path).expanduser()
    if not path.is_absolute():
        path = settings.resolve(settings.state_dir) / path
    return TurnLog(path, cfg.retention_days, cfg.retention_rows, mask=mask, prune_on_open=prune_on_open)
