"""The turn's side of a hand-off already under way: while an agent holds the conversation the message goes to them
and the bot stays quiet; while its ticket waits, the bot answers and the exchange is noted for the agent. A failing
log database never breaks the chat: the turn goes on as if there were no ticket (logged)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from bot.chat.answer import Answer, HandoffState, Strategy
from bot.chat.generate import finish
from bot.errors import BotError
from bot.handoff.desk import Desk
from bot.handoff.tickets import Conversation, Status, Ticket

log = logging.getLogger(__name__)


def current_ticket(desk: Desk | None, conversation: Conversation | None) -> Ticket | None:
    """The conversation's open or claimed ticket, or None (also when the database cannot say)."""
    if desk is None or conversation is None:
        return None
    try:
        return desk.active(conversation)
    except BotError as exc:
        log.error("hand-off: the ticket of a conversation could not be read (the bot answers): %s", exc)
        return None


def held(desk: Desk, ticket: Ticket, base: Answer, timings: dict[str, float], start: float) -> Answer | None:
    """The quiet answer to a message an agent's held conversation relays to them; None when it could not be."""
    try:
        desk.relay(ticket, base.question)
    except BotError as exc:
        log.error("hand-off: a visitor's message could not reach the agent (the bot answers): %s", exc)
        return None
    quiet = dataclasses.replace(
        base, text="", strategy=Strategy.HELD, handoff=HandoffState(ticket.status.value, ticket.id)
    )
    return finish(quiet, timings, start)


def noted(desk: Desk, ticket: Ticket | None, snapshots: Iterator[Answer]) -> Iterator[Answer]:
    """``snapshots``; while ``ticket`` waits (open), the finished exchange is added to it and the answer carries it."""
    for answer in snapshots:
        if answer.finished and ticket is not None and ticket.status is Status.OPEN and answer.handoff is None:
            try:
                desk.note(ticket, answer.question, answer.text)
            except BotError as exc:
                log.error("hand-off: a message could not be added to ticket %d: %s", ticket.id, exc)
            answer = dataclasses.replace(answer, handoff=HandoffState(ticket.status.value, ticket.id))
        yield answer
