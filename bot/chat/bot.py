"""The Bot drives one turn: clean the message, apply the privacy policy, refresh the index, run the rungs."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import nullcontext

from bot.chat.answer import Answer, Strategy
from bot.chat.cleaning import clean_message
from bot.chat.generate import finish
from bot.chat.staffed import current_ticket, held, noted
from bot.chat.status import ModeRetrieval, Status, retrieve_all_modes, status_of
from bot.chat.steps import Step, Turn
from bot.chat.turn_search import TurnLimits, TurnSearch
from bot.conversations.popular import PopularEntries
from bot.conversations.privacy import NO_MASKING, PrivacyPolicy
from bot.errors import SearchBackendError
from bot.handoff import tickets
from bot.handoff.desk import Desk
from bot.handoff.tickets import Conversation
from bot.knowledge.filters import EntryFilter, categories_of
from bot.messages import History
from bot.search.base import Hit
from bot.search.index import KnowledgeIndex
from bot.texts import EMPTY_REPLY, LONG_BUSY, SEARCH_DOWN_NOTICE

log = logging.getLogger(__name__)


class Bot:
    """Answers questions from the knowledge index, with an LLM when one is configured, retrieval-only otherwise.

    Two doors into a turn: :meth:`stream` (the answer's snapshots) and :meth:`answer` (the finished one). Routing
    to another knowledge base and recording in the conversation log wrap :meth:`stream`; the factory applies them
    (bot/knowledge_base.py).
    """

    def __init__(
        self,
        search: TurnSearch,
        steps: Sequence[Step],
        limits: TurnLimits,
        *,
        llm_name: str | None = None,
        privacy: PrivacyPolicy = NO_MASKING,
        popular: PopularEntries | None = None,
        desk: Desk | None = None,
    ):
        self.search = search
        self.steps = list(steps)
        self.max_message_chars = limits.max_message_chars
        self.expensive = limits.expensive  # long messages' own concurrency limit
        self.llm_name = llm_name  # None: retrieval-only
        self.privacy = privacy
        self.popular = popular or PopularEntries(None)  # the most used entries (the last resort's "did you mean")
        self.desk = desk  # the hand-off to a person (None: off): a conversation it holds is relayed to them

    def stream(
        self,
        message: str,
        history: History | None = None,
        *,
        mode: str | None = None,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
        channel: str | None = None,
    ) -> Iterator[Answer]:
        """Snapshots of the answer as it goes down the ladder; the last one has ``finished=True``.

        With ``within`` every search of the turn keeps to the entries it admits. ``channel`` (one of CHANNELS) is
        where the message came from: a reply that is an entry's own text uses the entry's variant for it. ``conversation`` is where a
        hand-off to a person would answer (None: the front end cannot show a person's replies); while a person
        holds it, the message goes to them and the answer is empty. A long message waits for one of the few slots
        long messages have; when none frees up in time the answer says so.
        """
        with self.expensive.slot(message) if self.expensive else nullcontext(True) as admitted:
            if not admitted:
                yield self._busy(message, mode)
                return
            yield from self._ladder(message, history, mode, within, conversation, channel)

    def answer(
        self,
        message: str,
        history: History | None = None,
        *,
        mode: str | None = None,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
        channel: str | None = None,
    ) -> Answer:
        """The finished answer: the last snapshot of :meth:`stream`."""
        turn = self.stream(message, history, mode=mode, within=within, conversation=conversation, channel=channel)
        return deque(turn, maxlen=1)[0]

    @property
    def index(self) -> KnowledgeIndex:
        """The knowledge index this bot answers from."""
        return self.search.index

    def retrieve(
        self, query: str, mode: str | None = None, top_k: int | None = None, within: EntryFilter | None = None
    ) -> tuple[list[Hit], list[Hit]]:
        """(every hit, the hits that pass the mode's threshold) for ``query``, without the ladder or the LLM."""
        return self.search.retrieve(query, mode, top_k, within)

    def status(self, mode: str | None = None) -> Status:
        """Mode, modes, entry count, LLM, notice and knowledge error; never builds or refreshes an index."""
        return status_of(self.search, self.llm_name, mode)

    def retrieve_all_modes(self, query: str, within: EntryFilter | None = None) -> dict[str, ModeRetrieval]:
        """Every mode's hits for ``query`` without the LLM (the retrieval-test tab); errors per mode as text."""
        return retrieve_all_modes(self.search, query, within)

    def categories(self) -> list[str]:
        """The categories the loaded entries list, sorted (what a category selector offers)."""
        return categories_of(self.search.index.entries)

    def _busy(self, message: str, mode: str | None) -> Answer:
        question, _ = clean_message(message, self.max_message_chars)
        mode = mode or self.search.current_mode()
        return Answer(question, LONG_BUSY, Strategy.LAST_RESORT, mode, llm=self.llm_name).noted(LONG_BUSY)

    def _ladder(
        self,
        message: str,
        history: History | None,
        mode: str | None,
        within: EntryFilter | None,
        conversation: Conversation | None,
        channel: str | None,
    ) -> Iterator[Answer]:
        start = time.perf_counter()
        mode = mode or self.search.current_mode()
        timings: dict[str, float] = {}
        question, truncated = clean_message(message, self.max_message_chars)
        refused = self.privacy.refused(question)  # personal data, and privacy.refuse on
        if not refused:  # with privacy.mask_llm the search and the LLM see the masked text only
            question, history = self.privacy.for_search(question), self.privacy.for_history(history)
        base = Answer(
            question=question,
            text="",
            strategy=Strategy.DIRECT,
            mode=mode,
            llm=self.llm_name,
            finished=False,
            within=within,
            channel=channel,
        ).noted(truncated)
        if not question:
            yield dataclasses.replace(base, text=EMPTY_REPLY, strategy=Strategy.LAST_RESORT, finished=True)
            return
        if refused:  # not searched, not sent; the log stores it masked
            yield finish(
                dataclasses.replace(base, text=self.privacy.refusal, strategy=Strategy.REFUSED), timings, start
            )
            return
        ticket = current_ticket(self.desk, conversation)
        if self.desk is not None and ticket is not None and ticket.status is tickets.Status.CLAIMED:
            quiet = held(self.desk, ticket, base, timings, start)
            if quiet is not None:
                yield quiet
                return
        index = self.search.index
        index.refresh()
        if index.error:
            base = dataclasses.replace(base, knowledge_error=str(index.error))
        turn = Turn(base, history, timings, start, self.search.retrieval, conversation)
        if self.desk is not None:
            yield from noted(self.desk, ticket, self._down_the_ladder(turn, mode))
        else:
            yield from self._down_the_ladder(turn, mode)

    def _down_the_ladder(self, turn: Turn, mode: str) -> Iterator[Answer]:
        """The rungs in order until one finishes the answer; a search backend that fails ends it with a notice."""
        timings, start = turn.timings, turn.start
        try:
            for step in self.steps:
                for snapshot in step.run(turn):
                    yield snapshot
                    if snapshot.finished:
                        return
        except SearchBackendError as exc:
            # The detail (hosts, index names) goes to the log, not to a possibly public chat page.
            log.error("search failed in mode %s: %s", mode, exc)
            down = dataclasses.replace(turn.base, text=SEARCH_DOWN_NOTICE, strategy=Strategy.LAST_RESORT)
            yield finish(down.noted(SEARCH_DOWN_NOTICE), timings, start)
