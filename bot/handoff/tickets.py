"""A hand-off as data: the conversation it belongs to, the ticket with its transcript, and the messages after it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Status(str, Enum):
    """Where a ticket is: waiting (open), held by an agent (claimed), or closed (resolved, expired)."""

    OPEN = "open"
    CLAIMED = "claimed"
    RESOLVED = "resolved"
    EXPIRED = "expired"

    @property
    def active(self) -> bool:
        """True while a person may still answer (open or claimed)."""
        return self in (Status.OPEN, Status.CLAIMED)


class Reason(str, Enum):
    """Why a ticket opened: the visitor asked for a person, or said yes to the offer made after misses (or to a
    "no" to a confirmation)."""

    ASKED = "asked"
    OFFER_ACCEPTED = "offer_accepted"
    MISSES = "misses"


class Said(str, Enum):
    """Who said a transcript line: the visitor, the bot (a reply the log has on record for this conversation), or
    text the client sent as the bot's that the bot has no record of saying."""

    VISITOR = "visitor"
    BOT = "bot"
    UNVERIFIED = "unverified"


class Role(str, Enum):
    """Who wrote a message after the hand-off: the visitor, an agent, the bot (answering while nobody holds the
    ticket), or a notice from the desk (claimed, resolved, the bot resumes)."""

    VISITOR = "visitor"
    AGENT = "agent"
    BOT = "bot"
    NOTICE = "notice"


@dataclass(frozen=True)
class Conversation:
    """Where a visitor talks: the front end (web, widget, wecom, api), a ``secret`` only that visitor's session
    holds, where an agent's reply is pushed (``address``: a WeCom UserID; None: the visitor's page fetches it), and
    the conversation log's session of the same chat (which replies the bot has on record)."""

    channel: str
    secret: str
    address: str | None = None
    session: str | None = None

    @property
    def id(self) -> str:
        """The stored id: the channel and a digest of the secret, so a stored id lets nobody read the conversation."""
        return f"{self.channel}:{hashlib.sha256(self.secret.encode('utf-8')).hexdigest()[:32]}"


@dataclass(frozen=True)
class Line:
    """One line of a ticket's transcript (personal data masked)."""

    said: Said
    text: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"said": self.said.value, "text": self.text}


@dataclass(frozen=True)
class Message:
    """A message after the hand-off: its id (increasing within the database), who wrote it, the agent's name."""

    id: int
    ticket: int
    role: Role
    text: str
    time: str
    author: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "role": self.role.value,
            "author": self.author,
            "text": self.text,
            "time": self.time,
        }


@dataclass(frozen=True)
class Ticket:
    """One hand-off: who asked (``conversation`` id, front end), why, the transcript up to it, and its progress.
    Times are UTC ISO strings; ``activity`` is the latest message from either side."""

    id: int
    conversation: str
    channel: str
    reason: Reason
    status: Status
    question: str
    transcript: tuple[Line, ...]
    created: str
    activity: str
    agent: str | None = None
    claimed_at: str | None = None
    first_reply_at: str | None = None
    closed_at: str | None = None
    address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the push address: a WeCom UserID)."""
        return {
            "id": self.id,
            "channel": self.channel,
            "reason": self.reason.value,
            "status": self.status.value,
            "question": self.question,
            "transcript": [line.to_dict() for line in self.transcript],
            "created": self.created,
            "activity": self.activity,
            "agent": self.agent,
            "claimed_at": self.claimed_at,
            "first_reply_at": self.first_reply_at,
            "closed_at": self.closed_at,
        }


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a ticket: won, or who holds it already (or that it is closed)."""

    won: bool
    ticket: Ticket


@dataclass(frozen=True)
class Updates:
    """What a visitor's page fetches: the ticket's status (None: no hand-off in this conversation) and the agents'
    replies and the desk's notices after the last one it has."""

    status: Status | None
    messages: tuple[Message, ...] = ()
    ticket: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "status": self.status.value if self.status else None,
            "ticket": self.ticket,
            "messages": [m.to_dict() for m in self.messages],
        }


@dataclass(frozen=True)
class Problem:
    """A staff notice that has not gone through yet: its channel, how often it was tried, the last error."""

    channel: str
    ticket: int | None
    attempts: int
    error: str
    due: str
