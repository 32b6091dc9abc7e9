"""The conversation log's role, whatever holds it: what the recorder, the inbox, suggestions, the admin pages and
analytics call (:class:`ConversationLog`), the SQL that differs between its backends (:class:`Dialect`), and the
small types both backends share.

Two backends implement it on one portable core (bot/conversations/log_sql.py): SQLite, the embedded default
(bot/conversations/turn_log.py), and PostgreSQL for replicas that share one log (bot/conversations/pg_log.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from bot.conversations.inbox import Group, SessionTurn, StoredHit, TurnRecord
from bot.conversations.log_schema import SCHEMA_VERSION
from bot.errors import BotError


class TurnLogError(BotError):
    """The conversation log cannot be opened or written, or a turn id is unknown."""


def refuse_newer_schema(found: str | None, log_name: str, fix: str) -> None:
    """Raise TurnLogError when the stored ``schema_version`` (``found``; None for a new log) is newer than this
    version of kbbot writes: a downgrade must not rewrite a log it does not understand."""
    if found is not None and int(found) > SCHEMA_VERSION:
        raise TurnLogError(
            f"{log_name} has schema version {found}, newer than this version of kbbot understands "
            f"({SCHEMA_VERSION}); {fix}"
        )


@dataclass(frozen=True)
class TurnRow:
    """One finished turn as the log stores it; the recorder builds it from the turn's answer (bot/chat/recorder.py)."""

    question: str
    strategy: str
    mode: str | None = None
    hits: tuple[StoredHit, ...] = ()  # the used hits first, then the other candidates, one per entry
    thresholds: Mapping[str, Any] | None = None  # the cutoffs that applied, as stored (Cutoffs.to_dict())
    timings: Mapping[str, float] = field(default_factory=dict)
    llm: str | None = None
    llm_used: bool = False
    text: str = ""
    rewritten: str | None = None
    hypothetical: str | None = None
    notices: tuple[str, ...] = ()
    finished: bool = True


class EntryHits(NamedTuple):
    """How many turns' answers used an entry, and the time (UTC ISO) of the latest."""

    turns: int
    latest: str


@dataclass(frozen=True)
class Purge:
    """One run of the retention purge: when (UTC ISO) and how many turns it removed."""

    time: str
    removed: int


@dataclass(frozen=True)
class Dialect:
    """The SQL fragments that differ between backends; every other statement is written once, with ``?``."""

    name: str
    # the first occurrence of a text argument in a column ({col}): SQLite instr, PostgreSQL strpos
    contains: str
    # a non-negative number ({x}) rounded down to an integer: SQLite's CAST truncates, PostgreSQL's rounds
    floor: str
    # appended to the SELECT that reads a row about to be updated (PostgreSQL FOR UPDATE; SQLite locks the file)
    lock_row: str = ""
    # SQLite's spelling of a column type -> this backend's (one schema text for both)
    types: tuple[tuple[str, str], ...] = ()
    # run first in a transaction that creates tables: replicas starting at once create them one at a time
    schema_lock: str = ""

    def spell(self, schema: str) -> str:
        """``schema`` (written in SQLite's spelling) in this backend's column types."""
        for sqlite_type, own in self.types:
            schema = schema.replace(sqlite_type, own)
        return schema


def utc_iso(moment: datetime | None = None) -> str:
    """A moment (default: now) as a sortable UTC ISO string with microseconds."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


class LogDatabase(Protocol):
    """The log's database as other packages use it for tables they own there (the hand-off's tickets): reads,
    write transactions and table creation, with ``?`` placeholders on either backend."""

    dialect: Dialect

    def read(self, sql: str, args: Sequence[Any] = ()) -> list:
        """Rows (by name and by position) of one read statement."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction: its ``execute`` takes ``?`` statements and returns a cursor; commits on a clean exit."""
        ...

    def create_tables(self, schema: str) -> None:
        """Run ``schema`` (idempotent statements in SQLite's spelling, ``;``-separated) in one transaction."""
        ...


class ConversationLog(LogDatabase, Protocol):
    """Every answered turn with its feedback, hit counts, the unanswered inbox and the analytics queries."""

    retention_days: int
    retention_rows: int
    masking: bool
    clock: Callable[[], datetime]
    dialect: Dialect

    def record(
        self,
        row: TurnRow,
        session: str | None,
        client: str | None = None,
        *,
        source: str | None = None,
        now: datetime | None = None,
    ) -> int:
        """Store one answered turn; its id."""
        ...

    def feedback(self, turn_id: int, rating: int, reason: str | None = None, now: datetime | None = None) -> None:
        """Rate a turn +1 / -1; TurnLogError for an unknown id."""
        ...

    def prune(self, now: datetime | None = None) -> int:
        """Apply retention; how many turns went."""
        ...

    def last_purge(self) -> Purge | None:
        """When retention last ran (None: never)."""
        ...

    def mask_stored(self, batch: int = 500) -> int:
        """Mask personal data in turns stored unmasked; rows changed."""
        ...

    def get(self, turn_id: int) -> TurnRecord:
        """One turn as a dict; TurnLogError for an unknown id."""
        ...

    def recent(self, limit: int = 50, offset: int = 0, filters: Mapping[str, Any] | None = None) -> list[TurnRecord]:
        """The newest turns first, filtered."""
        ...

    def session_turns(self, scan: int = 5000) -> list[SessionTurn]:
        """The newest turns of conversations, oldest first."""
        ...

    def reject_suggestion(self, norm: str, entry_id: str, now: datetime | None = None) -> None:
        """Never suggest this question for this entry again."""
        ...

    def rejected_suggestions(self) -> set[tuple[str, str]]:
        """(normal form, entry id) of every rejected suggestion."""
        ...

    def count(self) -> int:
        """How many turns the log holds."""
        ...

    def hit_counts(self) -> dict[str, EntryHits]:
        """entry id -> turns that used it and the time of the latest."""
        ...

    def unanswered(
        self, limit: int = 50, sort: str = "latest", scan: int = 5000, filters: Mapping[str, Any] | None = None
    ) -> list[Group]:
        """Groups of near-duplicate questions that were not answered."""
        ...

    def dismiss(self, group_key: str, now: datetime | None = None, scan: int = 5000) -> int:
        """Hide a group until asked again; turns hidden."""
        ...

    def query(self, sql: str, args: tuple | list = ()) -> list[tuple]:
        """Rows of a read-only statement written with ``?`` placeholders (the analytics tiles)."""
        ...

    def close(self) -> None:
        """Close every connection."""
        ...
