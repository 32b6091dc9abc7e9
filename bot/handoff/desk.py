"""The desk: what the ladder and the front ends ask of the hand-off, over the ticket store, business hours and the
outbox. It opens tickets (with the transcript marked and masked, and the staff notices queued), says what really
happens next, passes a held conversation's messages to its agent, serves agents' claims, replies and resolutions,
and hands idle conversations back to the bot.

Without the log's database (``log.enabled: false``) there are no tickets: a request gets ``handoff.contact``.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.config.base import default_of
from bot.config.handoff import HandoffSettings
from bot.config.settings import LogSettings
from bot.conversations.log_store import ConversationLog, utc_iso
from bot.handoff.channels import Channel, visitor_push
from bot.handoff.hours import BusinessHours, utc_now
from bot.handoff.outbox import Outbox
from bot.handoff.requests import is_handoff_request
from bot.handoff.store import TicketError, TicketStore
from bot.handoff.tickets import (
    Claim,
    Conversation,
    Line,
    Message,
    Problem,
    Reason,
    Role,
    Said,
    Status,
    Ticket,
    Updates,
)
from bot.messages import History
from bot.texts import (
    CONTACT_DEFAULT,
    HANDOFF_ALREADY,
    HANDOFF_CLOSED,
    HANDOFF_NEVER_OPEN,
    HANDOFF_NO_DESK,
    HANDOFF_PASSED,
    HANDOFF_WAIT,
    STAFF_EXPIRED,
    STAFF_IDLE,
    STAFF_JOINED,
    STAFF_LABEL,
    STAFF_RESOLVED,
)

log = logging.getLogger(__name__)

MAX_TRANSCRIPT = 50  # the newest lines of the history a ticket keeps
MAX_LINE_CHARS = 4000
MAX_REPLY_CHARS = 4000  # an agent's reply
VERIFY_SCAN = 200  # the conversation's recorded turns a transcript is checked against
SAID_PREFIX = 60  # letters and digits of a recorded answer that must begin a line for the bot to have said it
UPKEEP_PRUNE_EVERY = 3600.0
MIN_QUESTION = 4  # letters and digits: "是", "好的", "yes" answer the offer, "食堂在哪" asks something


@dataclass(frozen=True)
class Handed:
    """What a hand-off did: the reply the visitor reads, and the ticket (None: no ticket could be kept)."""

    text: str
    ticket: Ticket | None = None


def _squeeze(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def asked_about(transcript: Sequence[Line]) -> str | None:
    """The visitor's latest question before the hand-off: not the request itself nor a short "yes" to the offer."""
    for line in reversed(transcript):
        if line.said is Said.VISITOR and len(_squeeze(line.text)) >= MIN_QUESTION and not is_handoff_request(line.text):
            return line.text
    return None


class Desk:
    """The hand-off service: tickets in ``store`` (None: no log database), told to ``staff_channels``, answered by
    agents when ``staffed`` (agents or an admin exist), within ``hours``."""

    def __init__(
        self,
        settings: HandoffSettings,
        store: TicketStore | None,
        *,
        turns: ConversationLog | None = None,
        mask: Callable[[str | None], str | None] | None = None,
        staffed: bool = False,
        staff_channels: Sequence[str] = (),
        retention_days: int = default_of(LogSettings, "retention_days"),
        clock: Callable[[], datetime] = utc_now,
    ):
        self.settings = settings
        self.store = store
        self.turns = turns  # which replies the bot has on record (the transcript's marks)
        self.mask = mask or (lambda text: text)
        self.staffed = staffed and store is not None
        self.staff_channels = tuple(staff_channels) if store is not None else ()
        self.hours = BusinessHours(settings.hours)
        self.retention_days = retention_days
        self.clock = clock
        self._pruned_at = 0.0
        self.outbox: Outbox | None = None  # the notices' worker, in a server (start_outbox)

    @property
    def contact(self) -> str:
        """How to reach a person outside the chat (``handoff.contact``, else the site's published contacts)."""
        return self.settings.contact.strip() or CONTACT_DEFAULT

    def is_request(self, message: str) -> bool:
        """True when the message asks for a person."""
        return self.settings.enabled and is_handoff_request(message)

    # -- the visitor's side ------------------------------------------------------------
    def hand_off(
        self, conversation: Conversation | None, question: str, history: History | None, reason: Reason
    ) -> Handed:
        """Open the conversation's ticket (or find the one waiting) and say what really happens next."""
        if self.store is None or conversation is None:
            return Handed(HANDOFF_NO_DESK.format(contact=self.contact))
        transcript = self.transcript(conversation, history, question)
        masked = asked_about(transcript) or self.mask(question) or ""
        payload = {
            "reason": reason.value,
            "channel": conversation.channel,
            "question": masked,
            "transcript": [line.to_dict() for line in transcript],
            "time": utc_iso(self.clock()),
        }
        ticket, new = self.store.open(
            conversation.id,
            conversation.channel,
            conversation.address,
            reason,
            masked,
            transcript,
            {name: payload for name in self.staff_channels},
        )
        if not new:
            return Handed(HANDOFF_ALREADY, ticket)
        log.info("hand-off: ticket %d opened (%s, %s)", ticket.id, reason.value, conversation.channel)
        return Handed(self._promise(), ticket)

    def _promise(self) -> str:
        """What happens now that a ticket is open, as the configuration makes it true."""
        if self.staffed:
            now = self.clock()
            opening = self.hours.next_open(now)
            if opening is None:
                return HANDOFF_NEVER_OPEN.format(contact=self.contact)
            if opening <= now:
                return HANDOFF_WAIT
            when_zh, when_en = self.hours.describe(opening, now)
            return HANDOFF_CLOSED.format(when_zh=when_zh, when_en=when_en)
        if self.staff_channels:
            return HANDOFF_PASSED.format(contact=self.contact)
        return HANDOFF_NO_DESK.format(contact=self.contact)

    def transcript(self, conversation: Conversation, history: History | None, question: str) -> list[Line]:
        """The history and the question as transcript lines, masked: the visitor's, the bot's replies the log has on
        record for this conversation, and assistant text the client sent that the bot never said (unverified)."""
        said = self._said(conversation.session)
        lines = []
        for message in [*(history or []), {"role": "user", "content": question}][-MAX_TRANSCRIPT:]:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                continue
            text = (self.mask(message["content"]) or "")[:MAX_LINE_CHARS]
            if message.get("role") == "user":
                lines.append(Line(Said.VISITOR, text))
            elif message.get("role") == "assistant":
                squeezed = _squeeze(text)
                bot = any(squeezed.startswith(prefix) for prefix in said)
                lines.append(Line(Said.BOT if bot else Said.UNVERIFIED, text))
        return lines

    def _said(self, session: str | None) -> list[str]:
        """The beginnings (letters and digits) of the replies recorded for the log's ``session``."""
        if session is None or self.turns is None:
            return []
        try:
            turns = self.turns.recent(VERIFY_SCAN, filters={"session": session})
        except Exception as exc:  # the log down: nothing is on record, every line stays unverified
            log.warning("hand-off: the conversation log could not be read for the transcript: %s", exc)
            return []
        return [p for p in (_squeeze(t.get("answer") or "")[:SAID_PREFIX] for t in turns) if p]

    def active(self, conversation: Conversation | None) -> Ticket | None:
        """The conversation's open or claimed ticket (an idle one is handed back to the bot first)."""
        if self.store is None or conversation is None:
            return None
        ticket = self.store.active(conversation.id)
        if ticket is not None and self._expire_if_idle(ticket):
            return None
        return ticket

    def holding(self, conversation: Conversation | None) -> Ticket | None:
        """The ticket of an agent who holds this conversation now (the bot stays quiet), or None."""
        ticket = self.active(conversation)
        return ticket if ticket is not None and ticket.status is Status.CLAIMED else None

    def relay(self, ticket: Ticket, text: str) -> None:
        """A visitor's message to the agent holding the ticket (masked, as everything stored)."""
        assert self.store is not None  # a ticket came from it
        self.store.add_message(ticket.id, Role.VISITOR, self.mask(text) or "")

    def note(self, ticket: Ticket, question: str, reply: str) -> None:
        """While a ticket waits, the visitor's message and the bot's reply, for the agent who takes it."""
        assert self.store is not None
        self.store.add_message(ticket.id, Role.VISITOR, self.mask(question) or "")
        if reply:
            self.store.add_message(ticket.id, Role.BOT, self.mask(reply) or "")

    def updates(self, conversation: Conversation, after: int = 0) -> Updates:
        """What the visitor's page shows after message ``after``: agents' replies and the desk's notices, and the
        status of the newest ticket (nothing for a conversation without one, or an id guessed by someone else)."""
        if self.store is None:
            return Updates(None)
        self.active(conversation)  # hands an idle conversation back (and says so) before it is read
        latest = self.store.latest(conversation.id)
        if latest is None:
            return Updates(None)
        shown = self.store.conversation_messages(conversation.id, after, (Role.AGENT, Role.NOTICE))
        return Updates(latest.status, tuple(shown), latest.id)

    @staticmethod
    def shown_text(message: Message) -> str:
        """A message as the visitor reads it: an agent's reply under the agent's name, marked as a person's."""
        if message.role is Role.AGENT:
            return f"{STAFF_LABEL.format(name=message.author or '')}：{message.text}"
        return message.text

    # -- the agents' side ----------------------------------------------------------------
    def _store(self) -> TicketStore:
        if self.store is None:
            raise TicketError("tickets need the conversation log (log.enabled: true)")
        return self.store

    def queue(self, status: Status | None = Status.OPEN) -> list[Ticket]:
        """Tickets with ``status`` (open: the longest waiting first)."""
        self.upkeep()
        return self._store().tickets(status)

    def ticket(self, ticket_id: int) -> tuple[Ticket, list[Message]]:
        """One ticket and its messages."""
        store = self._store()
        return store.get(ticket_id), store.messages(ticket_id)

    def claim(self, ticket_id: int, agent: str) -> Claim:
        """Take an open ticket; the visitor is told who joined. Lost: the ticket says who holds it."""
        store = self._store()
        claim = store.claim(ticket_id, agent)
        if claim.won:
            self._tell(claim.ticket, STAFF_JOINED.format(name=agent))
            log.info("hand-off: ticket %d claimed by %s", ticket_id, agent)
        return claim

    def reply(self, ticket_id: int, agent: str, text: str) -> Message:
        """An agent's reply to the visitor; TicketError unless ``agent`` holds the ticket."""
        store = self._store()
        text = text.strip()[:MAX_REPLY_CHARS]
        if not text:
            raise TicketError("the reply is empty")
        ticket = store.get(ticket_id)
        if ticket.status is not Status.CLAIMED or ticket.agent != agent:
            holder = f"held by {ticket.agent}" if ticket.status is Status.CLAIMED else ticket.status.value
            raise TicketError(f"ticket {ticket_id} is {holder}; claim it first")
        message = store.add_message(
            ticket_id, Role.AGENT, text, agent, self._push(ticket, STAFF_LABEL.format(name=agent) + "：" + text), True
        )
        return message

    def resolve(self, ticket_id: int, agent: str) -> Ticket:
        """Close a ticket the agent holds (or an open one): the visitor is told the bot answers again."""
        store = self._store()
        ticket = store.get(ticket_id)
        if ticket.status is Status.CLAIMED and ticket.agent != agent:
            raise TicketError(f"ticket {ticket_id} is held by {ticket.agent}")
        if not store.close(ticket_id, Status.RESOLVED):
            raise TicketError(f"ticket {ticket_id} is already {ticket.status.value}")
        self._tell(ticket, STAFF_RESOLVED)
        store.drop_notices(ticket_id, self.staff_channels)
        log.info("hand-off: ticket %d resolved by %s", ticket_id, agent)
        return store.get(ticket_id)

    def problems(self) -> list[Problem]:
        """Staff notices that have failed and wait for another try (for admins and agents, never visitors)."""
        return self.store.problems() if self.store is not None else []

    # -- upkeep ----------------------------------------------------------------------------
    def start_outbox(self, channels: Mapping[str, Channel]) -> Outbox | None:
        """Deliver the queued notices through ``channels`` (name -> channel) and run the upkeep, on a background
        worker every ``handoff.notify.poll_seconds``; the worker (None without tickets). Idempotent."""
        if self.store is None:
            return None
        if self.outbox is None:
            n = self.settings.notify
            self.outbox = Outbox(
                self.store,
                channels,
                n.retry_seconds,
                n.max_retry_seconds,
                upkeep=self.upkeep,
                lease_seconds=n.lease_seconds,
            )
            self.outbox.start(n.poll_seconds)
            missing = sorted(set(self.staff_channels) - set(channels))
            if missing:
                log.warning("hand-off notices for %s wait: no such channel in this process", ", ".join(missing))
        return self.outbox

    def stop(self) -> None:
        """End the notices' worker, if one runs."""
        if self.outbox is not None:
            self.outbox.stop()

    def upkeep(self) -> None:
        """Hand idle conversations back to the bot and expire tickets nobody took (and, hourly, apply retention)."""
        if self.store is None:
            return
        now = self.clock()
        claimed = utc_iso(now - timedelta(seconds=self.settings.idle_timeout))
        opened = utc_iso(now - timedelta(hours=self.settings.open_timeout_hours))
        for ticket in self.store.idle(claimed, opened):
            self._expire_if_idle(ticket)
        if self.retention_days and now.timestamp() - self._pruned_at > UPKEEP_PRUNE_EVERY:
            self._pruned_at = now.timestamp()
            self.store.prune(utc_iso(now - timedelta(days=self.retention_days)))

    def _expire_if_idle(self, ticket: Ticket) -> bool:
        """Expire ``ticket`` when it has idled past its timeout (telling the visitor); True when it is closed now."""
        assert self.store is not None
        now = self.clock()
        if ticket.status is Status.CLAIMED:
            cutoff = utc_iso(now - timedelta(seconds=self.settings.idle_timeout))
            if ticket.activity >= cutoff or not self.store.close(ticket.id, Status.EXPIRED, Status.CLAIMED, cutoff):
                return False
            self._tell(ticket, STAFF_IDLE)
        elif ticket.status is Status.OPEN:
            cutoff = utc_iso(now - timedelta(hours=self.settings.open_timeout_hours))
            if ticket.created >= cutoff or not self.store.close(ticket.id, Status.EXPIRED, Status.OPEN):
                return False
            self._tell(ticket, STAFF_EXPIRED.format(contact=self.contact))
        else:
            return False
        self.store.drop_notices(ticket.id, self.staff_channels)
        log.info("hand-off: ticket %d expired (%s)", ticket.id, ticket.status.value)
        return True

    def _tell(self, ticket: Ticket, text: str) -> None:
        """A notice to the visitor of ``ticket`` (pushed to IM visitors, fetched by pages)."""
        assert self.store is not None
        self.store.add_message(ticket.id, Role.NOTICE, text, None, self._push(ticket, text))

    @staticmethod
    def _push(ticket: Ticket, text: str) -> dict[str, dict[str, Any]]:
        """The outbox delivery of ``text`` to a visitor whose front end is pushed to (WeCom, Feishu), else none."""
        if ticket.address is None:
            return {}
        return {visitor_push(ticket.channel): {"user": ticket.address, "text": text}}
