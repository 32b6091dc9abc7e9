"""Tickets, their messages and the staff-notice outbox, as tables in the conversation log's database (SQLite, or
the PostgreSQL server replicas share), written once in SQL both run.

Every change is one short transaction, so a process killed at any moment leaves each ticket and message either
stored or never acknowledged. A claim is a conditional update (``WHERE status = 'open'``): of two agents, on one
replica or two, exactly one wins. At most one ticket per conversation is active (open or claimed), kept by a unique
partial index, so two replicas taking the same visitor's request at once open one ticket.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from bot.conversations.log_store import LogDatabase, TurnLogError, utc_iso
from bot.errors import BotError
from bot.handoff.tickets import Claim, Line, Message, Problem, Reason, Role, Said, Status, Ticket

SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (
    id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, channel TEXT NOT NULL, address TEXT,
    reason TEXT NOT NULL, status TEXT NOT NULL, question TEXT NOT NULL, transcript TEXT NOT NULL,
    created TEXT NOT NULL, activity TEXT NOT NULL, agent TEXT, claimed_at TEXT, first_reply_at TEXT,
    closed_at TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS tickets_active ON tickets(conversation) WHERE status IN ('open', 'claimed');
CREATE INDEX IF NOT EXISTS tickets_status ON tickets(status, created);
CREATE INDEX IF NOT EXISTS tickets_created ON tickets(created);
CREATE TABLE IF NOT EXISTS ticket_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ticket_id INTEGER NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
    role TEXT NOT NULL, author TEXT, text TEXT NOT NULL, time TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ticket_messages_ticket ON ticket_messages(ticket_id, id);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, ticket_id INTEGER, payload TEXT NOT NULL,
    created TEXT NOT NULL, due TEXT NOT NULL, attempts INTEGER NOT NULL, last_error TEXT, sent_at TEXT);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox(sent_at, due);
"""
log = logging.getLogger(__name__)
COLUMNS = (
    "id, conversation, channel, address, reason, status, question, transcript, created, activity, agent, "
    "claimed_at, first_reply_at, closed_at"
)
ACTIVE = "status IN ('open', 'claimed')"


class TicketError(BotError):
    """A ticket operation that cannot be done: unknown id, not held by this agent, already closed."""


class UnknownTicket(TicketError):
    """No ticket has this id (never, or deleted by retention)."""


def ticket_of(row: Mapping[str, Any]) -> Ticket:
    """A stored row as a Ticket."""
    lines = tuple(Line(Said(d["said"]), d["text"]) for d in json.loads(row["transcript"]))
    return Ticket(
        id=int(row["id"]),
        conversation=row["conversation"],
        channel=row["channel"],
        reason=Reason(row["reason"]),
        status=Status(row["status"]),
        question=row["question"],
        transcript=lines,
        created=row["created"],
        activity=row["activity"],
        agent=row["agent"],
        claimed_at=row["claimed_at"],
        first_reply_at=row["first_reply_at"],
        closed_at=row["closed_at"],
        address=row["address"],
    )


def message_of(row: Mapping[str, Any]) -> Message:
    """A stored row as a Message."""
    return Message(int(row["id"]), int(row["ticket_id"]), Role(row["role"]), row["text"], row["time"], row["author"])


class TicketStore:
    """Tickets, messages and the outbox in ``db``; ``clock`` (aware UTC) stamps every change."""

    def __init__(self, db: LogDatabase, clock: Callable[[], datetime]):
        self._db = db
        self.clock = clock
        self._ready = False
        try:
            self.db  # noqa: B018 - create the tables now when the database answers
        except TurnLogError as exc:  # e.g. PostgreSQL down at start: created on first use once it answers
            log.error("hand-off tickets: %s; tried again on the next hand-off", exc)

    @property
    def db(self) -> LogDatabase:
        """The database, its tables created (on first use, again after a failed attempt)."""
        if not self._ready:
            self._db.create_tables(SCHEMA)
            self._ready = True
        return self._db

    def now(self) -> str:
        """The clock as a stored time."""
        return utc_iso(self.clock())

    # -- tickets ----------------------------------------------------------------
    def open(
        self,
        conversation: str,
        channel: str,
        address: str | None,
        reason: Reason,
        question: str,
        transcript: Iterable[Line],
        notices: Mapping[str, dict[str, Any]],
    ) -> tuple[Ticket, bool]:
        """(the conversation's active ticket, True) after opening one with its staff ``notices`` (channel ->
        payload) queued in the same transaction; (the one already active, False) when there is one."""
        found = self.active(conversation)
        if found is not None:
            return found, False
        now = self.now()
        body = json.dumps([line.to_dict() for line in transcript], ensure_ascii=False)
        try:
            with self.db.transaction() as c:
                cursor = c.execute(
                    "INSERT INTO tickets (conversation, channel, address, reason, status, question, transcript, "
                    "created, activity) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?) RETURNING id",
                    (conversation, channel, address, reason.value, question, body, now, now),
                )
                ticket_id = int(cursor.fetchone()[0])
                for name, payload in notices.items():
                    self._queue(c, name, ticket_id, {**payload, "ticket": ticket_id}, now)
        except TurnLogError:
            # another replica (or thread) opened one for this conversation in the meantime: the unique index
            found = self.active(conversation)
            if found is None:
                raise
            return found, False
        return self.get(ticket_id), True

    def get(self, ticket_id: int) -> Ticket:
        """One ticket; TicketError when there is none."""
        rows = self.db.read(f"SELECT {COLUMNS} FROM tickets WHERE id = ?", (int(ticket_id),))
        if not rows:
            raise UnknownTicket(f"no ticket {ticket_id}")
        return ticket_of(rows[0])

    def active(self, conversation: str) -> Ticket | None:
        """The conversation's open or claimed ticket, if any."""
        rows = self.db.read(f"SELECT {COLUMNS} FROM tickets WHERE conversation = ? AND {ACTIVE}", (conversation,))
        return ticket_of(rows[0]) if rows else None

    def latest(self, conversation: str) -> Ticket | None:
        """The conversation's newest ticket, whatever its status."""
        rows = self.db.read(
            f"SELECT {COLUMNS} FROM tickets WHERE conversation = ? ORDER BY id DESC LIMIT 1", (conversation,)
        )
        return ticket_of(rows[0]) if rows else None

    def tickets(self, status: Status | None = None, limit: int = 200) -> list[Ticket]:
        """Tickets with ``status`` (all when None): the active ones oldest first (the longest waiting on top), closed
        ones newest first."""
        if status is None:
            rows = self.db.read(f"SELECT {COLUMNS} FROM tickets ORDER BY id DESC LIMIT ?", (int(limit),))
        else:
            order = "ASC" if status.active else "DESC"
            rows = self.db.read(
                f"SELECT {COLUMNS} FROM tickets WHERE status = ? ORDER BY id {order} LIMIT ?", (status.value, limit)
            )
        return [ticket_of(r) for r in rows]

    def count(self, status: Status | None = None) -> int:
        """How many tickets there are (with ``status``)."""
        if status is None:
            return int(self.db.read("SELECT COUNT(*) FROM tickets")[0][0])
        return int(self.db.read("SELECT COUNT(*) FROM tickets WHERE status = ?", (status.value,))[0][0])

    def claim(self, ticket_id: int, agent: str) -> Claim:
        """Take an open ticket for ``agent``: won, or the ticket as it is (held by another, or closed)."""
        now = self.now()
        with self.db.transaction() as c:
            won = c.execute(
                "UPDATE tickets SET status = 'claimed', agent = ?, claimed_at = ?, activity = ? "
                "WHERE id = ? AND status = 'open'",
                (agent, now, now, int(ticket_id)),
            ).rowcount
        return Claim(bool(won), self.get(ticket_id))

    def close(self, ticket_id: int, status: Status, only: Status | None = None, idle_before: str | None = None) -> bool:
        """Close an active ticket as ``status`` (resolved, expired); with ``only`` / ``idle_before`` only when it
        is in that status / had no activity since then. True when this call closed it."""
        sql = f"UPDATE tickets SET status = ?, closed_at = ? WHERE id = ? AND {ACTIVE}"
        args: list[Any] = [status.value, self.now(), int(ticket_id)]
        if only is not None:
            sql += " AND status = ?"
            args.append(only.value)
        if idle_before is not None:
            sql += " AND activity < ?"
            args.append(idle_before)
        with self.db.transaction() as c:
            return bool(c.execute(sql, args).rowcount)

    def idle(self, claimed_before: str, opened_before: str) -> list[Ticket]:
        """Claimed tickets without activity since ``claimed_before``, and open ones created before ``opened_before``."""
        rows = self.db.read(
            f"SELECT {COLUMNS} FROM tickets WHERE (status = 'claimed' AND activity < ?) "
            "OR (status = 'open' AND created < ?)",
            (claimed_before, opened_before),
        )
        return [ticket_of(r) for r in rows]

    # -- messages -----------------------------------------------------------------
    def add_message(
        self,
        ticket_id: int,
        role: Role,
        text: str,
        author: str | None = None,
        deliveries: Mapping[str, dict[str, Any]] | None = None,
        first_reply: bool = False,
    ) -> Message:
        """Store a message (and the pushes of it queued in ``deliveries``) and mark the ticket active now."""
        now = self.now()
        with self.db.transaction() as c:
            cursor = c.execute(
                "INSERT INTO ticket_messages (ticket_id, role, author, text, time) VALUES (?, ?, ?, ?, ?) RETURNING id",
                (int(ticket_id), role.value, author, text, now),
            )
            message_id = int(cursor.fetchone()[0])
            c.execute("UPDATE tickets SET activity = ? WHERE id = ?", (now, int(ticket_id)))
            if first_reply:
                c.execute(
                    "UPDATE tickets SET first_reply_at = ? WHERE id = ? AND first_reply_at IS NULL", (now, ticket_id)
                )
            for name, payload in (deliveries or {}).items():
                self._queue(c, name, ticket_id, payload, now)
        return Message(message_id, int(ticket_id), role, text, now, author)

    def messages(self, ticket_id: int, after: int = 0, roles: Iterable[Role] | None = None) -> list[Message]:
        """The ticket's messages after id ``after``, oldest first (only ``roles`` when given)."""
        sql = "SELECT * FROM ticket_messages WHERE ticket_id = ? AND id > ?"
        args: list[Any] = [int(ticket_id), int(after)]
        wanted = [r.value for r in roles or ()]
        if wanted:
            sql += f" AND role IN ({', '.join('?' * len(wanted))})"
            args += wanted
        return [message_of(r) for r in self.db.read(sql + " ORDER BY id", args)]

    def conversation_messages(self, conversation: str, after: int, roles: Iterable[Role]) -> list[Message]:
        """Messages of ``roles`` in every ticket of the conversation after id ``after``, oldest first."""
        wanted = [r.value for r in roles]
        rows = self.db.read(
            "SELECT m.* FROM ticket_messages m JOIN tickets t ON t.id = m.ticket_id WHERE t.conversation = ? "
            f"AND m.id > ? AND m.role IN ({', '.join('?' * len(wanted))}) ORDER BY m.id",
            (conversation, int(after), *wanted),
        )
        return [message_of(r) for r in rows]

    # -- the outbox -----------------------------------------------------------------
    @staticmethod
    def _queue(c: Any, channel: str, ticket_id: int | None, payload: dict[str, Any], now: str) -> None:
        c.execute(
            "INSERT INTO outbox (channel, ticket_id, payload, created, due, attempts) VALUES (?, ?, ?, ?, ?, 0)",
            (channel, ticket_id, json.dumps(payload, ensure_ascii=False), now, now),
        )

    def due(self, limit: int = 20) -> list[tuple[int, str, dict[str, Any], str, int]]:
        """Unsent notices whose time has come: (id, channel, payload, due, attempts), oldest first."""
        rows = self.db.read(
            "SELECT id, channel, payload, due, attempts FROM outbox WHERE sent_at IS NULL AND due <= ? "
            "ORDER BY due, id LIMIT ?",
            (self.now(), int(limit)),
        )
        return [(int(r[0]), r[1], json.loads(r[2]), r[3], int(r[4])) for r in rows]

    def lease(self, notice_id: int, was_due: str, seconds: float) -> bool:
        """Take a due notice for ``seconds`` (its due time moves on; an attempt is counted); False when another
        worker took it first."""
        until = utc_iso(self.clock() + timedelta(seconds=seconds))
        with self.db.transaction() as c:
            return bool(
                c.execute(
                    "UPDATE outbox SET due = ?, attempts = attempts + 1 WHERE id = ? AND due = ? AND sent_at IS NULL",
                    (until, int(notice_id), was_due),
                ).rowcount
            )

    def sent(self, notice_id: int) -> None:
        """Mark a notice delivered."""
        with self.db.transaction() as c:
            c.execute("UPDATE outbox SET sent_at = ?, last_error = NULL WHERE id = ?", (self.now(), int(notice_id)))

    def failed(self, notice_id: int, error: str, retry_in: float) -> None:
        """Record why a notice failed and when to try it again."""
        due = utc_iso(self.clock() + timedelta(seconds=retry_in))
        with self.db.transaction() as c:
            c.execute("UPDATE outbox SET due = ?, last_error = ? WHERE id = ?", (due, error[:500], int(notice_id)))

    def problems(self, limit: int = 20) -> list[Problem]:
        """Notices that failed at least once and are not delivered yet, newest first (for admins and agents)."""
        rows = self.db.read(
            "SELECT channel, ticket_id, attempts, last_error, due FROM outbox WHERE sent_at IS NULL "
            "AND last_error IS NOT NULL ORDER BY id DESC LIMIT ?",
            (int(limit),),
        )
        return [Problem(r[0], r[1], int(r[2]), r[3], r[4]) for r in rows]

    def pending(self) -> int:
        """Notices not delivered yet."""
        return int(self.db.read("SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL")[0][0])

    def drop_notices(self, ticket_id: int, channels: Iterable[str]) -> None:
        """Stop trying to deliver a closed ticket's staff notices on ``channels`` (nobody needs them any more)."""
        names = list(channels)
        if not names:
            return
        with self.db.transaction() as c:
            c.execute(
                f"UPDATE outbox SET sent_at = ?, last_error = 'dropped: the ticket was closed' WHERE ticket_id = ? "
                f"AND sent_at IS NULL AND channel IN ({', '.join('?' * len(names))})",
                (self.now(), int(ticket_id), *names),
            )

    def prune(self, before: str) -> int:
        """Delete tickets closed before ``before`` (with their messages) and notices sent before it; tickets gone."""
        with self.db.transaction() as c:
            c.execute(
                "DELETE FROM ticket_messages WHERE ticket_id IN (SELECT id FROM tickets WHERE closed_at < ?)",
                (before,),
            )
            gone = c.execute("DELETE FROM tickets WHERE closed_at < ?", (before,)).rowcount
            c.execute("DELETE FROM outbox WHERE sent_at < ?", (before,))
        return int(gone)

    # -- analytics -------------------------------------------------------------------
    def created_between(self, since: str | None, until: str | None) -> list[Ticket]:
        """Tickets created in [since, until), oldest first."""
        where, args = [], []
        if since:
            where.append("created >= ?")
            args.append(since)
        if until:
            where.append("created < ?")
            args.append(until)
        sql = f"SELECT {COLUMNS} FROM tickets" + (" WHERE " + " AND ".join(where) if where else "")
        return [ticket_of(r) for r in self.db.read(sql + " ORDER BY id", args)]
