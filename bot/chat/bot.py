"""The Bot: retrieve, threshold, prompt, call the LLM, and fall back (HyDE, last resort) when nothing passes."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from bot.chat import services
from bot.chat.answer import Answer, Cutoffs, Part, Strategy
from bot.chat.cleaning import clean_message
from bot.chat.fallback import LastResort
from bot.chat.generate import finish
from bot.chat.knowledge_edit import KnowledgeEditor
from bot.chat.llm import ChatModel
from bot.chat.negatives import NegativeExamples
from bot.chat.parts import KnowledgeAids, LLMSteps, TurnLimits
from bot.chat.prompt import PromptBuilder
from bot.chat.respond import Responder
from bot.chat.routing import Route, routed
from bot.chat.staffed import current_ticket, held, noted
from bot.chat.steps import Ladder, Turn, build_steps
from bot.chat.turn_search import TurnSearch
from bot.conversations.popular import PopularEntries
from bot.conversations.privacy import NO_MASKING, PrivacyPolicy
from bot.conversations.recorder import TurnRecorder
from bot.errors import SearchBackendError
from bot.handoff.desk import Desk
from bot.handoff.tickets import Conversation, Status
from bot.knowledge.filters import EntryFilter, categories_of
from bot.knowledge.store import KnowledgeStore
from bot.search.base import Hit
from bot.search.index import KnowledgeIndex
from bot.texts import (
    EMPTY_REPLY,
    LONG_BUSY,
    SEARCH_DOWN_NOTICE,
)

log = logging.getLogger(__name__)


NO_LLM_STEPS = LLMSteps()
NO_AIDS = KnowledgeAids()


class Bot(TurnSearch):
    """Answers questions from the knowledge index, with an LLM when one is configured, retrieval-only otherwise."""

    def __init__(
        self,
        index: KnowledgeIndex,
        thresholds: Mapping[str, Cutoffs],
        prompt: PromptBuilder,
        last_resort: LastResort,
        *,
        limits: TurnLimits,
        llm: ChatModel | None = None,
        llm_steps: LLMSteps = NO_LLM_STEPS,
        aids: KnowledgeAids = NO_AIDS,
        ladder: Ladder | None = None,
        mode: str,
        mode_source: Callable[[], str] | None = None,
        recorder: TurnRecorder | None = None,
        privacy: PrivacyPolicy = NO_MASKING,
    ):
        self.index = index
        self.thresholds = dict(thresholds)
        self.prompt = prompt
        self.last_resort = last_resort
        self.llm = llm
        self.mode = mode  # the mode it started with; current_mode() follows the config file without changing it
        self.mode_source = mode_source  # the config file's mode now (ConfiguredMode), when the app follows it
        self.recorder = recorder or TurnRecorder(None)  # the conversation log (Bot.turn)
        self.privacy = privacy
        self.name: str | None = None  # the knowledge base this bot answers for, among several (bot/deployment.py)
        self.route: Route | None = None  # where a question this one finds nothing for goes (routing.route_to)
        self.ladder = ladder or Ladder()
        self.chain = list(self.ladder.chain)
        # limits.*: bounded work per turn
        self.top_k = limits.top_k
        self.max_message_chars = limits.max_message_chars
        self.max_answer_chars = limits.max_answer_chars
        self.max_search_chars = limits.max_search_chars  # text searched per search
        self.expensive = limits.expensive  # long messages' own concurrency limit (Bot.turn)
        # the LLM's other jobs: none without an LLM
        helpers = llm_steps if llm is not None else LLMSteps(dont_know=llm_steps.dont_know)
        self.hyde = helpers.hyde
        self.rewriter = helpers.rewriter
        self.multi_query = helpers.multi_query  # the "rewrite" step
        self.grader = helpers.grader
        self.splitter = aids.splitter
        self.negatives = aids.negatives or NegativeExamples()
        self.availability = aids.availability
        self.popular = aids.popular or PopularEntries(None)  # the most used entries (examples, "did you mean")
        self.responder = Responder(
            prompt, last_resort, self.llm, self.splitter, self.max_answer_chars, helpers.dont_know
        )
        self.steps = build_steps(
            self.ladder,
            self.chain,
            self.responder,
            self,
            lambda: self.index.entries,
            self.hyde,
            rewrite=self.multi_query is not None,
            translator=helpers.translator,
            popular=lambda n: self.popular.top(self.index.entries, n),
        )

    @property
    def desk(self) -> Desk | None:
        """The hand-off desk (tickets, agents' replies), None when hand-off is off."""
        return self.ladder.desk

    @property
    def retrieval_only(self) -> bool:
        """True when no LLM is configured."""
        return self.llm is None

    @property
    def llm_name(self) -> str | None:
        """The configured LLM's name, or None when retrieval-only."""
        return self.llm.name if self.llm is not None else None

    # -- services for front ends (bot/chat/services.py) ---------------------
    def status(self, mode: str | None = None) -> services.Status:
        """Mode, modes, entry count, LLM, notice and knowledge error; never builds or refreshes an index."""
        return services.status(self, mode)

    def catch_up(self) -> None:
        """Pick up knowledge files changed on disk since the last message (the CLI's or another process's edit),
        as a message would, before a page shows what is loaded."""
        self.index.refresh()

    def retrieve_all_modes(self, query: str, within: EntryFilter | None = None) -> dict[str, services.ModeRetrieval]:
        """Every mode's hits for ``query`` without the LLM (the retrieval-test tab); errors per mode as text."""
        return services.retrieve_all_modes(self, query, within)

    def categories(self) -> list[str]:
        """The categories the loaded entries list, sorted (what a category selector offers)."""
        return categories_of(self.index.entries)

    def examples(self, configured: Sequence[str], source: str) -> list[str]:
        """Example questions (``ui.examples_source``): the configured ones found in the loaded knowledge (fixed),
        the most used entries' (popular), or both in that order; else some of the knowledge's entries'."""
        limit = max(len(configured), services.EXAMPLES)
        entries = self.index.entries
        top = self.popular.top(entries, limit) if source != "fixed" else []
        popular = [services.example_of(e) or e.query for e in top]  # asked and answered: a title too
        return services.example_questions(entries, configured if source != "popular" else (), limit, popular)

    def editor(self, store: KnowledgeStore) -> KnowledgeEditor:
        """Knowledge edits through ``store`` that refresh this bot's index at once."""
        return KnowledgeEditor(self.index, store)

    def current_mode(self) -> str:
        """The default mode now: the config file's, when it changed while running (ConfiguredMode holds what the file
        says), else ``mode``, the one the bot started with (never changed: the bot keeps no mode state)."""
        mode = self.mode_source() if self.mode_source is not None else self.mode
        if mode not in self.index.modes:
            log.error("retrieval.mode %r is not one of %s; using %s", mode, self.index.modes, self.mode)
            return self.mode
        return mode

    def answer(
        self,
        message: str,
        history: Sequence[Any] | None = None,
        mode: str | None = None,
        *,
        session: str | None = None,
        source: str | None = None,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
    ) -> Answer:
        """The complete answer (the last snapshot of :meth:`stream`); with a ``source`` recorded, as :meth:`turn` does."""
        final = None
        for snapshot in (
            self.turn(message, history, mode, session=session, source=source, within=within, conversation=conversation)
            if source
            else self.stream(message, history, mode, within=within, conversation=conversation)
        ):
            final = snapshot
        assert final is not None
        return final

    def turn(
        self,
        message: str,
        history: Sequence[Any] | None = None,
        mode: str | None = None,
        *,
        session: str | None = None,
        source: str | None = None,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
    ) -> Iterator[Answer]:
        """A front end's turn: :meth:`stream`, the finished answer recorded in the conversation log (``turn_id``).

        ``session`` is an opaque id the front end chose, ``source`` "web" or "api"; a failing log never breaks it.
        ``within`` restricts the search to some categories (bot/knowledge/filters.py). ``conversation`` is where a
        hand-off to a person would answer (None: the front end cannot show a person's replies).
        """
        with self.expensive.slot(message) if self.expensive else nullcontext(True) as admitted:
            turns = (
                self.stream(message, history, mode, within=within, conversation=conversation)
                if admitted
                else iter([self._busy(message, mode)])
            )
            for answer in turns:
                yield self.recorder.record(answer, session, source) if answer.finished else answer

    def _busy(self, message: str, mode: str | None) -> Answer:
        question, _ = clean_message(message, self.max_message_chars)
        answer = Answer(question, LONG_BUSY, Strategy.LAST_RESORT, mode or self.current_mode(), llm=self.llm_name)
        return answer.noted(LONG_BUSY)

    def stream(
        self,
        message: str,
        history: Sequence[Any] | None = None,
        mode: str | None = None,
        *,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
    ) -> Iterator[Answer]:
        """:meth:`own_stream`, but a question this knowledge base finds nothing for goes to ``route`` (labelled)."""
        own = self.own_stream(message, history, mode, within=within, conversation=conversation)
        return routed(own, self.route, message, history, within)

    def own_stream(
        self,
        message: str,
        history: Sequence[Any] | None = None,
        mode: str | None = None,
        *,
        within: EntryFilter | None = None,
        conversation: Conversation | None = None,
    ) -> Iterator[Answer]:
        """Yield snapshots of the answer as it goes down the ladder; the last one has ``finished=True``. With
        ``within``, every search of the turn keeps to the entries it admits. While a person holds ``conversation``
        the message goes to them and the answer is empty (the bot stays quiet)."""
        start = time.perf_counter()
        mode = mode or self.current_mode()
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
            knowledge_base=self.name,
        ).noted(truncated)
        if not question:
            yield dataclasses.replace(base, text=EMPTY_REPLY, strategy=Strategy.LAST_RESORT, finished=True)
            return
        if refused:  # not searched, not sent; the log stores it masked
            yield finish(
                dataclasses.replace(base, text=self.privacy.refusal, strategy=Strategy.REFUSED), timings, start
            )
            return
        desk = self.ladder.desk
        ticket = current_ticket(desk, conversation)
        if desk is not None and ticket is not None and ticket.status is Status.CLAIMED:
            quiet = held(desk, ticket, base, timings, start)
            if quiet is not None:
                yield quiet
                return
        self.index.refresh()
        if self.index.error:
            base = dataclasses.replace(base, knowledge_error=str(self.index.error))
        turn = Turn(base, history, timings, start, self._retrieval, conversation)
        if desk is not None:
            yield from noted(desk, ticket, self._down_the_ladder(turn, mode))
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

    def compose(self, hits: Sequence[Hit], parts: Sequence[Part] = ()) -> str:
        """Retrieval-only reply: each part's best entry (a split message) or the best hit's document, then titles."""
        return self.responder.compose(hits, parts)
