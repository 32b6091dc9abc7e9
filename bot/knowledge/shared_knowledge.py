"""The knowledge shared by replicas (``knowledge.shared: postgres``): PostgreSQL holds it, each replica's knowledge
and history folders are a mirror of it.

Every file of the knowledge folder and of the history folder (kept versions, retired keys) is a row (area, path,
bytes, generation) of one table in the conversation log's database (``log.postgres.dsn_env``); a deleted file is a
row without bytes. ``knowledge_state.generation`` counts the edits. An edit (:meth:`SharedKnowledge.editing`, inside
the store's folder lock) locks that row (``FOR UPDATE``: one writer across every replica), brings the mirror up to
the latest generation, lets the store run its ordinary edit on the mirror (so optimistic versions, validation,
history and restore behave as on one machine: a stale version from another replica's edit is a StaleEditError),
then stores the files the edit changed and bumps the generation in the same transaction. A failed edit puts the
mirror files it touched back from the database. Reads (:meth:`SharedKnowledge.pull`: the index before each message,
the store before each read) cost one ``SELECT`` of the generation and copy in the rows of newer generations.

The first replica to start with an empty table stores its folder (seeding, once: under the same row lock);
afterwards the table wins over local files. When the database is down, reads serve the last mirror (logged, retried
after ``RETRY_SECONDS``) and edits are refused, nothing written anywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from bot.errors import ConfigError
from bot.fsutil import write_bytes_atomic
from bot.knowledge.entries import knowledge_files
from bot.knowledge.lock import FolderLock, LockTimeout
from bot.knowledge.store import LOCK_TIMEOUT, KnowledgeWriteError
from bot.storage.postgres import SchemaConnection, pg_dsn, psycopg_module

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0  # after a failed connection, reads serve the mirror this long before trying again
PULL_WAIT = 2.0  # seconds a read waits for a local edit before serving the mirror as it is
SCHEMA_LOCK = 7_402_418  # advisory lock id: replicas starting at once create the tables one at a time
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS knowledge_state (id integer PRIMARY KEY, generation bigint NOT NULL)",
    "INSERT INTO knowledge_state VALUES (1, 0) ON CONFLICT DO NOTHING",
    "CREATE TABLE IF NOT EXISTS knowledge_files (area text NOT NULL, path text NOT NULL, content bytea, "
    "generation bigint NOT NULL, PRIMARY KEY (area, path))",
    "CREATE INDEX IF NOT EXISTS knowledge_files_generation ON knowledge_files (generation)",
)
Files = dict[tuple[str, str], tuple[int, int, int]]  # (area, path) -> (inode, mtime_ns, size)


class SharedKnowledge:
    """One replica's mirror of the knowledge in PostgreSQL (a :class:`bot.knowledge.shared.KnowledgeSync`)."""

    def __init__(self, dsn: str, where: str, connect_timeout: int, folder: Path, lock_dir: Path, history_dir: Path):
        self.psycopg = psycopg_module("knowledge.shared", ConfigError)
        self.where = where
        self._connection = SchemaConnection(self.psycopg, dsn, connect_timeout, "kbbot-knowledge", SCHEMA_LOCK, SCHEMA)
        self.areas = {"knowledge": Path(folder), "history": Path(history_dir)}
        self._lock_dir = Path(lock_dir)
        self._folder_lock = FolderLock(lock_dir, PULL_WAIT)
        self._lock = threading.Lock()  # one user of the connection at a time
        self._generation: int | None = None  # the mirror's; None: unknown, compare every file on the next pull
        self._down_until = 0.0

    # -- edits -----------------------------------------------------------------------------------------------------
    @contextmanager
    def editing(self) -> Iterator[None]:
        """One edit of the mirror under the shared writer lock (call under the folder lock); its changes stored."""
        with self._lock:
            try:
                conn = self._connection.get()
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = '{int(LOCK_TIMEOUT * 1000)}ms'")
                    (generation,) = conn.execute(
                        "SELECT generation FROM knowledge_state WHERE id = 1 FOR UPDATE"
                    ).fetchone()
                    seeding = generation == 0
                    if seeding:
                        self._seed(conn)
                    else:
                        self._apply(conn, generation)
                    before = self._scan()
                    try:
                        yield
                    except BaseException:
                        self._revert(conn, before)
                        if seeding:  # rolled back with the edit: the table is empty again
                            self._generation = None
                        raise
                    generation = self._publish(conn, before, self._generation or 0)
                self._generation = generation
            except self.psycopg.errors.LockNotAvailable:
                raise KnowledgeWriteError(
                    f"知识库正被另一个副本修改，请稍后再试 / The knowledge is being changed by an edit on another replica "
                    f"(held for over {LOCK_TIMEOUT:g} s); try again in a moment. Nothing was written."
                ) from None
            except self.psycopg.Error as exc:
                self._generation = None  # the mirror may now differ from the database: compare every file next time
                raise KnowledgeWriteError(
                    f"共享知识库的数据库无法连接，未写入任何内容 / The shared knowledge database {self.where} cannot be "
                    f"reached ({type(exc).__name__}); nothing was written. Try again once it is back."
                ) from None

    def start(self) -> None:
        """Seed the shared knowledge from this folder when it is empty, else bring the mirror up to date; a database
        that is down is logged and this replica's folder serves until it answers."""
        try:
            with FolderLock(self._lock_dir, LOCK_TIMEOUT).hold(), self.editing():
                pass
        except (KnowledgeWriteError, LockTimeout) as exc:
            log.error("shared knowledge not synced at start, serving this replica's folder: %s", exc)

    def _seed(self, conn: Any) -> None:
        """The first replica's folder becomes the shared knowledge (the table is empty: generation 0)."""
        files = self._scan()
        for area, rel in files:
            self._store(conn, area, rel, self._read(area, rel), 1)
        conn.execute("UPDATE knowledge_state SET generation = 1 WHERE id = 1")
        self._generation = 1
        log.info("shared knowledge in %s seeded from this replica's folders: %d files", self.where, len(files))

    def _publish(self, conn: Any, before: Files, generation: int) -> int:
        """Store the files the edit changed as the next generation; the generation the mirror is at afterwards."""
        after = self._scan()
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if not changed:
            return generation
        generation += 1
        for area, rel in changed:
            self._store(conn, area, rel, self._read(area, rel) if (area, rel) in after else None, generation)
        conn.execute("UPDATE knowledge_state SET generation = %s WHERE id = 1", (generation,))
        return generation

    def _revert(self, conn: Any, before: Files) -> None:
        """Put back, from the database, the mirror files a failed edit changed (normally none: edits validate first)."""
        after = self._scan()
        for area, rel in sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)):
            row = conn.execute(
                "SELECT content FROM knowledge_files WHERE area = %s AND path = %s", (area, rel)
            ).fetchone()
            self._put(area, rel, None if row is None else row[0])

    @staticmethod
    def _store(conn: Any, area: str, rel: str, content: bytes | None, generation: int) -> None:
        conn.execute(
            "INSERT INTO knowledge_files (area, path, content, generation) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (area, path) DO UPDATE SET content = EXCLUDED.content, generation = EXCLUDED.generation",
            (area, rel, content, generation),
        )

    # -- reads -----------------------------------------------------------------------------------------------------
    def pull(self) -> bool:
        """Copy other replicas' edits into the mirror; True when it changed. The database down: the mirror serves."""
        if time.monotonic() < self._down_until:
            return False
        try:
            with self._lock:
                (generation,) = (
                    self._connection.get().execute("SELECT generation FROM knowledge_state WHERE id = 1").fetchone()
                )
            if generation == self._generation:
                return False
            with self._folder_lock.hold():  # the folder lock first, as an edit takes them
                before = self._generation
                if generation == 0:  # nobody seeded it yet (the database was down at start): this folder does
                    with self.editing():
                        pass
                else:
                    with self._lock:
                        self._apply(self._connection.get(), generation)
                return self._generation != before
        except LockTimeout:
            return False  # a local edit is running: it brings the mirror up to date itself
        except KnowledgeWriteError as exc:
            self._down_until = time.monotonic() + RETRY_SECONDS
            log.error("shared knowledge not seeded, serving this replica's copy: %s", exc)
            return False
        except self.psycopg.Error as exc:
            self._down_until = time.monotonic() + RETRY_SECONDS
            log.error(
                "shared knowledge in %s unreachable (%s); serving this replica's copy, retrying in %g s",
                self.where,
                type(exc).__name__,
                RETRY_SECONDS,
            )
            return False

    def _apply(self, conn: Any, generation: int) -> None:
        """Bring the mirror to ``generation``: the rows of newer generations, or (unknown state) every file."""
        if generation == self._generation:
            return
        if self._generation is None:
            rows = conn.execute("SELECT area, path, content FROM knowledge_files WHERE content IS NOT NULL").fetchall()
            shared = {(area, rel) for area, rel, _ in rows}
            stale = [(area, rel, None) for area, rel in self._scan() if (area, rel) not in shared]
            changed = [r for r in rows if self._read(r[0], r[1]) != bytes(r[2])] + stale
            if changed:
                log.info(
                    "knowledge mirror: %d local files replaced by the shared knowledge in %s", len(changed), self.where
                )
        else:
            changed = conn.execute(
                "SELECT area, path, content FROM knowledge_files WHERE generation > %s", (self._generation,)
            ).fetchall()
        for area, rel, content in changed:
            self._put(area, rel, None if content is None else bytes(content))
        self._generation = generation

    # -- the mirror ------------------------------------------------------------------------------------------------
    def _scan(self) -> Files:
        """Every mirrored file now: the loader's knowledge files and every kept history file (temp files skipped)."""
        found: Files = {}
        for area, root in self.areas.items():
            if not root.is_dir():
                continue
            paths = knowledge_files(root) if area == "knowledge" else root.rglob("*")
            for path in paths:
                try:
                    st = path.stat()
                except OSError:
                    continue
                if path.is_file() and not path.name.endswith(".tmp"):
                    found[(area, path.relative_to(root).as_posix())] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return found

    def _path(self, area: str, rel: str) -> Path:
        parts = PurePosixPath(rel).parts
        if area not in self.areas or not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise ConfigError(f"shared knowledge in {self.where} holds a path that is not a mirror file: {area}/{rel}")
        return self.areas[area].joinpath(*parts)

    def _read(self, area: str, rel: str) -> bytes | None:
        try:
            return self._path(area, rel).read_bytes()
        except FileNotFoundError:
            return None

    def _put(self, area: str, rel: str, content: bytes | None) -> None:
        path = self._path(area, rel)
        if content is None:
            path.unlink(missing_ok=True)
        elif self._read(area, rel) != content:
            write_bytes_atomic(path, content)

    def close(self) -> None:
        """Close the connection (the next use opens a new one)."""
        with self._lock:
            self._connection.close()


_mirrors: dict[tuple[str, str], SharedKnowledge] = {}
_mirrors_lock = threading.Lock()


def shared_knowledge(
    dsn_env: str, connect_timeout: int, folder: Path, lock_dir: Path, history_dir: Path
) -> SharedKnowledge:
    """The process's mirror of ``folder`` for the DSN in ``dsn_env``, brought up to date (or seeding the shared
    knowledge) when first opened; a database that is down then is logged and the local folder serves."""
    dsn = pg_dsn(dsn_env, "knowledge.shared", ConfigError)
    key = (dsn, str(Path(folder).resolve()))
    with _mirrors_lock:
        mirror = _mirrors.get(key)
        if mirror is None:
            mirror = _mirrors[key] = SharedKnowledge(
                dsn, f"PostgreSQL (${dsn_env})", connect_timeout, folder, lock_dir, history_dir
            )
            mirror.start()
        return mirror
