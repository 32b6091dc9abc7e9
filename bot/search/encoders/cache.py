"""On-disk embedding cache: sha256(encoder signature, role, text) -> float32 vector, in SQLite (WAL mode).

One table keyed by the 32-byte digest, holding the raw float32 bytes and the time each row was last used
(a rowid table: a 1.5 KB e5 row fits in a page, where WITHOUT ROWID would spill it to overflow pages).
Readers check every blob's length against the expected dimension (a wrong-sized row is a miss, never a
wrong vector). Growth is bounded: above ``max_rows`` the least recently used rows are evicted down to 90 %
of the cap. A damaged database is moved aside (``<name>.damaged``) with a warning and an empty one is
created; a busy or unwritable one only costs re-encoding. It never raises.

Safe for several threads (one connection behind a lock) and several processes (SQLite's own locking,
WAL so readers never wait for a writer, a busy timeout for writers).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np

log = logging.getLogger(__name__)

CACHE_FILE = "embeddings.sqlite"
TABLE = "vectors_v1"  # a new layout gets a new table name, so an old file is simply ignored
DEFAULT_MAX_ROWS = 100_000  # ~220 MB of 384-dim e5 vectors at most; several times the largest knowledge tested
BUSY_SECONDS = 5.0  # how long a writer waits for another process' write before skipping the cache
CHUNK = 500  # keys per SQL statement (SQLite's default limit on bound parameters is 999 on old builds)

T = TypeVar("T")


def cache_key(signature: str, role: str, text: str) -> bytes:
    """The 32-byte key of a text embedded by the model ``signature`` in ``role`` (length-prefixed, unambiguous)."""
    blob = f"{len(signature)}:{signature}{len(role)}:{role}{text}"
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()


def _is_damage(exc: Exception) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB arrive as plain DatabaseError; busy, full or read-only as OperationalError."""
    return type(exc) is sqlite3.DatabaseError


class EmbeddingCache:
    """Vectors by key in one SQLite file; misses, not exceptions, when the file is busy or damaged."""

    def __init__(self, path: str | Path, max_rows: int = DEFAULT_MAX_ROWS):
        self.path = Path(path)
        self.max_rows = max(1, max_rows)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._rows_estimate: int | None = None  # rows after our last count plus rows we put since
        self._warned: set[str] = set()

    # -- connection ------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (key BLOB PRIMARY KEY, vector BLOB NOT NULL, used REAL NOT NULL)"
            )
            conn.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_used ON {TABLE} (used)")
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Close the connection (it is reopened on the next call)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None

    def _move_aside(self, exc: Exception) -> None:
        self._close()
        aside = self.path.with_name(self.path.name + ".damaged")
        try:
            if self.path.exists():
                os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):  # they belong to the damaged file
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        except OSError as move_exc:
            log.warning(
                "embedding cache %s is damaged (%s) and could not be moved aside (%s); delete it by hand",
                self.path,
                exc,
                move_exc,
            )
            return
        self._rows_estimate = None
        log.warning(
            "embedding cache %s is damaged (%s); moved it to %s and started an empty cache "
            "(vectors are re-encoded as needed)",
            self.path,
            exc,
            aside.name,
        )

    def _run(self, what: str, op: Callable[[sqlite3.Connection], T], default: T) -> T:
        """Run ``op`` on the connection; a damaged file is moved aside and ``op`` retried once."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None:
                        self._conn = self._connect()
                    return op(self._conn)
                except (sqlite3.Error, OSError) as exc:  # OSError: the state folder cannot be created
                    if _is_damage(exc) and attempt == 1:
                        self._move_aside(exc)
                        continue
                    self._warn_once(what, exc)
                    if self._conn is not None and self._conn.in_transaction:
                        try:
                            self._conn.rollback()
                        except sqlite3.Error:
                            self._close()
                    return default
            return default

    def _warn_once(self, what: str, exc: Exception) -> None:
        message = f"{what}: {exc}"
        if message not in self._warned:
            self._warned.add(message)
            log.warning("embedding cache %s: %s failed (%s); continuing without the cache for it", self.path, what, exc)

    # -- reads and writes ------------------------------------------------
    def get_many(self, keys: Iterable[bytes], dim: int | None, touch: bool = True) -> dict[bytes, np.ndarray]:
        """The cached vectors among ``keys``; rows whose size is not ``dim`` floats are misses.

        With ``dim`` None the first row found sets it. ``touch`` marks the rows as used now (for the LRU).
        """
        keys = list(dict.fromkeys(keys))

        def op(conn: sqlite3.Connection) -> dict[bytes, np.ndarray]:
            found, size, bad = {}, None if dim is None else 4 * dim, 0
            for i in range(0, len(keys), CHUNK):
                chunk = keys[i : i + CHUNK]
                sql = f"SELECT key, vector FROM {TABLE} WHERE key IN ({','.join('?' * len(chunk))})"
                for key, blob in conn.execute(sql, chunk):
                    if size is None and blob and len(blob) % 4 == 0:
                        size = len(blob)
                    if len(blob) != size:
                        bad += 1
                        continue
                    found[bytes(key)] = np.frombuffer(blob, dtype=np.float32).copy()
            if bad:
                log.warning(
                    "embedding cache %s: ignored %d vector(s) of the wrong size (%d bytes expected); "
                    "they are re-encoded",
                    self.path,
                    bad,
                    size or 0,
                )
            if touch and found:
                try:
                    self._touch(conn, list(found))
                except sqlite3.OperationalError:  # another process is writing: the LRU order is only a hint
                    pass
            return found

        return self._run("read", op, {}) if keys else {}

    @staticmethod
    def _touch(conn: sqlite3.Connection, keys: list[bytes]) -> None:
        now = time.time()
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            conn.execute(f"UPDATE {TABLE} SET used = ? WHERE key IN ({','.join('?' * len(chunk))})", [now, *chunk])

    def put_many(self, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Store vectors (float32) by key, replacing existing rows; then evict old rows if over the cap."""
        if not vectors:
            return
        now = time.time()
        rows = [(key, np.ascontiguousarray(vec, dtype=np.float32).tobytes(), now) for key, vec in vectors.items()]

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(f"INSERT OR REPLACE INTO {TABLE} (key, vector, used) VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if self._rows_estimate is not None:
                self._rows_estimate += len(rows)
            if self._rows_estimate is None or self._rows_estimate > self.max_rows:
                self._evict(conn)

        self._run("write", op, None)

    def _evict(self, conn: sqlite3.Connection) -> None:
        count = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        if count > self.max_rows:
            drop = count - int(self.max_rows * 0.9)
            oldest = f"SELECT rowid FROM {TABLE} ORDER BY used LIMIT ?"
            conn.execute(f"DELETE FROM {TABLE} WHERE rowid IN ({oldest})", (drop,))
            log.info(
                "embedding cache %s: evicted the %d least recently used vectors (cap %d)",
                self.path,
                drop,
                self.max_rows,
            )
            count -= drop
        self._rows_estimate = count

    def __len__(self) -> int:
        """Rows held now (0 when the file cannot be read)."""
        return self._run("count", lambda conn: conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0], 0)
