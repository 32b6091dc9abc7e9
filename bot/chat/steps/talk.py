"""The rungs that need no search: a reply to the previous offer, a request for a person, small talk; and the
hand-off itself (a ticket at the desk) and the offer of a person that other rungs make."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator

from bot.chat.answer import OFFERED, Answer, HandoffState, Strategy
from bot.chat.chitchat import ChitChat
from bot.chat.followup import reads_as_followup
from bot.chat.generate import finish
from bot.chat.offers import previous_offer, read_reply
from bot.chat.prompt import normalize_history
from bot.chat.respond import Responder
from bot.chat.standalone import last_user_message
from bot.chat.steps.base import Turn
from bot.chat.steps.knowledge import answer_from
from bot.errors import BotError
from bot.handoff.desk import Desk, Handed
from bot.handoff.tickets import Reason
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from bot.texts import HANDOFF_NO_DESK, HANDOFF_OFFER, REPHRASE_REPLY

log = logging.getLogger(__name__)


def hand_off(turn: Turn, desk: Desk, reason: Reason) -> Answer:
    """The finished hand-off: a ticket opened (staff told through the outbox) and what really happens next; when
    the log's database fails, the contact instead (a request is never said to be taken when it was not)."""
    try:
        handed = desk.hand_off(turn.conversation, turn.question, normalize_history(turn.history, 1000), reason)
    except BotError as exc:
        log.error("hand-off: no ticket could be opened (the visitor gets the contact): %s", exc)
        handed = Handed(HANDOFF_NO_DESK.format(contact=desk.contact))
    ticket = handed.ticket
    state = HandoffState(ticket.status.value, ticket.id) if ticket is not None else HandoffState("none")
    answer = turn.replace(text=handed.text, strategy=Strategy.HANDOFF, hits=[], options=(), handoff=state)
    return finish(answer, turn.timings, turn.start)


def offering_person(answer: Answer) -> Answer:
    """``answer`` with the offer of a person after its text (a button on pages, read back from the text)."""
    return dataclasses.replace(answer, text=f"{answer.text}\n\n{HANDOFF_OFFER}", handoff=OFFERED)


class ChoiceStep:
    """A reply to the previous offer ("2", "是的", "不是"), read from that message alone: a clarify or confirm
    question's pick, or a yes to the offer of a person."""

    name = "choice"

    def __init__(self, entries: Callable[[], list[Entry]], responder: Responder, desk: Desk | None = None):
        self.entries = entries
        self.responder = responder
        self.desk = desk

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer the picked entry, hand off on a yes to a person, or ask to rephrase on a "no"; else pass on."""
        offer = previous_offer(turn.history)
        reply = read_reply(turn.question, offer) if offer else None
        if offer is None or reply is None:
            return
        if offer.kind == "person" and reply.index is not None and self.desk is not None:
            yield hand_off(turn, self.desk, Reason.OFFER_ACCEPTED)
            return
        if reply.index is None or offer.kind == "person":
            rephrase = finish(turn.replace(text=REPHRASE_REPLY, strategy=Strategy.REPHRASE), turn.timings, turn.start)
            offer_one = offer.kind == "confirm" and self.desk is not None and self.desk.settings.on_confirm_no
            yield offering_person(rephrase) if offer_one else rephrase
            return
        picked = offer.questions[reply.index]
        entry = next((e for e in self.entries() if " ".join(e.query.split()) == picked), None)
        if entry is None:  # the knowledge changed since the offer: read the message as a question of its own
            return
        hit = Hit(entry, 1.0, 0.0, "choice")
        base = turn.replace(strategy=Strategy.CHOSEN, rewritten=entry.query, hits=[hit])
        yield from answer_from(self.responder, turn, base)


class HandoffStep:
    """An explicit request for a person ("转人工", "talk to a human", the offer's button): a ticket."""

    name = "handoff"

    def __init__(self, desk: Desk):
        self.desk = desk

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Hand off when the message asks for a person (an accepted offer when the bot had just offered one)."""
        if self.desk.is_request(turn.question):
            offer = previous_offer(turn.history)
            yield hand_off(turn, self.desk, Reason.OFFER_ACCEPTED if offer and offer.kind == "person" else Reason.ASKED)


class ChitChatStep:
    """Small talk, the whole message: the scenario's persona reply, no knowledge, no citations."""

    name = "chitchat"

    def __init__(self, chitchat: ChitChat):
        self.chitchat = chitchat

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Reply with the scenario's text when the whole message is small talk."""
        if turn.history and reads_as_followup(turn.question) and last_user_message(turn.history):
            return  # "那测试呢？" after a question asks about 测试, it is not someone testing the bot
        found = self.chitchat.match(turn.question)
        if found is not None:
            answer = dataclasses.replace(turn.base, text=found.reply, strategy=Strategy.CHITCHAT)
            yield finish(answer, turn.timings, turn.start)
