"""The rungs that need no search: a reply to the previous offer, a request for a person, small talk."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from bot.chat.answer import Answer, Strategy
from bot.chat.chitchat import ChitChat
from bot.chat.followup import reads_as_followup
from bot.chat.generate import finish
from bot.chat.handoff import Handoff
from bot.chat.offers import previous_offer, read_reply
from bot.chat.prompt import normalize_history
from bot.chat.respond import Responder
from bot.chat.standalone import last_user_message
from bot.chat.steps.base import Turn
from bot.chat.steps.knowledge import answer_from
from bot.knowledge.entries import Entry
from bot.messages import Message
from bot.search.base import Hit
from bot.texts import REPHRASE_REPLY


def hand_off(turn: Turn, handoff: Handoff, reason: str) -> Answer:
    """The finished hand-off answer; the transcript goes to the webhook in the background (never blocks)."""
    transcript: list[Message] = [*normalize_history(turn.history, 1000), {"role": "user", "content": turn.question}]
    handoff.notify(transcript, reason)
    # asked for a person: HANDOFF; sent there by misses or a "no": ESCALATE, which the Unanswered inbox lists
    strategy = Strategy.HANDOFF if reason == "request" else Strategy.ESCALATE
    answer = turn.replace(text=handoff.reply, strategy=strategy, hits=[], options=())
    return finish(answer, turn.timings, turn.start)


class ChoiceStep:
    """A reply to the previous clarify or confirm question ("2", "是的", "不是"), read from that message alone."""

    name = "choice"

    def __init__(self, entries: Callable[[], list[Entry]], responder: Responder, handoff: Handoff | None = None):
        self.entries = entries
        self.responder = responder
        self.handoff = handoff

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer the picked entry, or ask to rephrase (or hand off) on a "no"; pass on anything else."""
        offer = previous_offer(turn.history)
        reply = read_reply(turn.question, offer) if offer else None
        if offer is None or reply is None:
            return
        if reply.index is None:
            if offer.kind == "confirm" and self.handoff is not None and self.handoff.on_confirm_no:
                yield hand_off(turn, self.handoff, "confirm_no")
                return
            yield finish(turn.replace(text=REPHRASE_REPLY, strategy=Strategy.REPHRASE), turn.timings, turn.start)
            return
        picked = offer.questions[reply.index]
        entry = next((e for e in self.entries() if " ".join(e.query.split()) == picked), None)
        if entry is None:  # the knowledge changed since the offer: read the message as a question of its own
            return
        hit = Hit(entry, 1.0, 0.0, "choice")
        base = turn.replace(strategy=Strategy.CHOSEN, rewritten=entry.query, hits=[hit])
        yield from answer_from(self.responder, turn, base)


class HandoffStep:
    """An explicit request for a person ("转人工", "talk to a human"): the configured hand-off."""

    name = "handoff"

    def __init__(self, handoff: Handoff):
        self.handoff = handoff

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Hand off when the message asks for a person."""
        if self.handoff.is_request(turn.question):
            yield hand_off(turn, self.handoff, "request")


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
