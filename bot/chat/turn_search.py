"""How a turn searches the knowledge, and against which thresholds.

Split parts, entries' negative examples, a failed searcher healed and the search repeated, follow-ups (the LLM's
standalone rewrite, or the retrieval-only substitution), optional LLM grading, and the thresholds of the searcher
that answered.

:class:`TurnSearch` is its own object: the factory builds it and gives it to the Bot, which hands
:meth:`TurnSearch.retrieval` to each :class:`Turn`, and to the rungs that search again (HyDE, rewrite, translate).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from bot.chat.answer import Cutoffs, Part
from bot.chat.chitchat import ChitChat
from bot.chat.expensive import ExpensiveGate
from bot.chat.followup import followup_queries, reads_as_followup
from bot.chat.generate import ms
from bot.chat.grading import Graded, RelevanceGrader
from bot.chat.negatives import NegativeExamples
from bot.chat.rewrite import MultiQueryRewrite
from bot.chat.splitter import QuestionSplitter, merge_hits
from bot.chat.standalone import QueryRewriter, last_user_message
from bot.chat.steps import Retrieval, Turn
from bot.chat.steps.fallbacks import Rephrased
from bot.config.watch import ConfiguredMode
from bot.errors import ConfigError, LLMError
from bot.knowledge.filters import EntryFilter
from bot.knowledge.validity import Availability
from bot.messages import History
from bot.search.base import Found, Hit
from bot.search.index import KnowledgeIndex
from bot.search.serving import ServedSearcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnLimits:
    """How much work one turn may do (``limits.*`` and ``retrieval.top_k``).

    Hits per search, the message, answer and searched text lengths, and the gate long messages queue at.
    """

    top_k: int
    max_message_chars: int
    max_answer_chars: int
    max_search_chars: int | None = None
    expensive: ExpensiveGate | None = None


class CurrentMode:
    """The mode a message uses when it names none.

    The config file's mode now, when it changed while running, else the one the bot started with; the bot keeps no
    mode state.
    """

    def __init__(self, start: str, modes: list[str], configured: ConfiguredMode | None = None):
        self.start = start
        self.modes = modes
        self.configured = configured  # the config file's mode now, when the app follows it

    def __call__(self) -> str:
        """The mode now; an unknown one in the file is logged and the start mode used."""
        mode = self.configured() if self.configured is not None else self.start
        if mode not in self.modes:
            log.error("retrieval.mode %r is not one of %s; using %s", mode, self.modes, self.start)
            return self.start
        return mode

    @property
    def config_error(self) -> str | None:
        """Why the last edit of the config file was not taken (the old mode serves), or None."""
        return self.configured.error if self.configured is not None else None


@dataclass(frozen=True)
class Searched(Graded):
    """One search of a turn: every hit best first, those that pass, a split message's labelled parts, what answered."""

    found: Found  # the whole message's search: its system (whose thresholds apply), notices, a failure

    @property
    def failed(self) -> bool:
        """True when the search of the message or of one of its parts failed."""
        return self.found.failed


class _MayFail(Protocol):
    @property
    def failed(self) -> bool: ...


_Result = TypeVar("_Result", bound=_MayFail)


def once_more_if_failed(search: Callable[[], _Result]) -> _Result:
    """``search()``, called a second time if its result failed.

    A search fails when it finds its index damaged; that schedules the healing in the background, and the knowledge
    index then serves the mode with what it can (the reopened index, or another mode standing in, with its notice),
    so the second call searches something else. Only once: a second failure means nothing sound serves the mode
    right now, and the turn goes on with what it found (the failure logged, its notice telling the user the index heals) rather than
    spending the user's wait on more tries.
    """
    result = search()
    return search() if result.failed else result


class TurnSearch:
    """The searching half of a turn, given to the Bot and to the rungs that search again.

    It holds the knowledge index, the thresholds per retrieval system, and what the LLM and the knowledge add to a
    search: a rewrite, other phrasings, grading, splitting, negative examples, which entries may answer today.
    """

    def __init__(
        self,
        index: KnowledgeIndex,
        thresholds: dict[str, Cutoffs],
        limits: TurnLimits,
        current_mode: CurrentMode,
        *,
        rewriter: QueryRewriter | None = None,
        multi_query: MultiQueryRewrite | None = None,
        grader: RelevanceGrader | None = None,
        splitter: QuestionSplitter | None = None,
        negatives: NegativeExamples | None = None,
        availability: Availability | None = None,
        chitchat: ChitChat | None = None,
        substitute_followups: bool = True,
    ):
        self.index = index
        self.thresholds = dict(thresholds)
        self.top_k = limits.top_k
        self.max_message_chars = limits.max_message_chars
        self.max_search_chars = limits.max_search_chars  # text searched per search
        self.current_mode = current_mode
        self.rewriter = rewriter  # follow-ups made standalone by the LLM
        self.multi_query = multi_query  # the "rewrite" rung's other phrasings
        self.grader = grader
        self.splitter = splitter
        self.negatives = negatives or NegativeExamples()
        self.availability = availability or Availability()  # drafts and entries outside their validity never answer
        # "你好" then a question: nothing to follow up on; "你好，" before a question: not searched
        self.chitchat = chitchat
        # Without an LLM to rewrite a follow-up, it is searched with the previous question's subject.
        self.substitute_followups = substitute_followups

    def retrieve(
        self,
        query: str,
        mode: str | None = None,
        top_k: int | None = None,
        within: EntryFilter | None = None,
        *,
        unpublished: bool = False,
    ) -> tuple[list[Hit], list[Hit]]:
        """(every hit, the hits that pass the mode's threshold) for ``query``, split when it asks several things.

        Only entries ``within`` admits are searched; drafts and entries outside their validity too with
        ``unpublished`` (the retrieval test).
        """
        searched = self._search(query, mode, top_k, within=within, unpublished=unpublished)
        return searched.hits, searched.passed

    def _search(
        self,
        query: str,
        mode: str | None = None,
        top_k: int | None = None,
        within: EntryFilter | None = None,
        unpublished: bool = False,
    ) -> Searched:
        """The hits for ``query``, searched once more if it failed (:func:`once_more_if_failed`).

        A split message also gets each part's best passing hit, labelled.
        """
        mode = mode or self.current_mode()
        top_k = top_k or self.top_k
        return once_more_if_failed(lambda: self._search_once(query, mode, top_k, within, unpublished))

    def _search_once(
        self, query: str, mode: str, top_k: int, within: EntryFilter | None, unpublished: bool = False
    ) -> Searched:
        """One try of :meth:`_search`; a failure of any part's search marks the whole one failed."""
        searcher = self.index.served(mode)
        query = query[: self.max_search_chars]  # bounded work per search, however long the message or HyDE text
        parts = self.splitter.split(query) if self.splitter else [query]
        results: list[Found] = []

        def search(text: str) -> list[Hit]:
            results.append(self._found(searcher, text, top_k, within, unpublished))
            return list(results[-1].hits)

        hits = search(query)
        whole = results[0]
        cutoffs = self.cutoffs(whole.system, whole.standing_in)
        labelled: tuple[Part, ...] = ()
        if len(parts) > 1:
            lists = [(p, search(p)) for p in parts]
            hits = merge_hits([("", hits)] + lists, top_k * len(parts))
            labelled = tuple(
                Part(p, next((dataclasses.replace(h, subquestion=p) for h in part_hits if cutoffs.passes(h)), None))
                for p, part_hits in lists
            )
        if any(f.failed for f in results):
            whole = dataclasses.replace(whole, failed=True)
        return Searched(hits, [h for h in hits if cutoffs.passes(h)], labelled, whole)

    def cutoffs(self, system: str, standing_in: bool = False) -> Cutoffs:
        """The thresholds of one retrieval system ("sparse", "dense-e5", ...); ConfigError when it has none.

        With ``standing_in`` the system answers for a mode whose index is not ready: :meth:`Cutoffs.standing_in`.
        """
        if system not in self.thresholds:
            raise ConfigError(
                f"retrieval.thresholds has no entry for {system!r}; add e.g. "
                f'`{system}: {{answer: 0.8, direct: null}}` (docs/retrieval-and-decision.md "Scores and thresholds")'
            )
        cutoffs = self.thresholds[system]
        return cutoffs.standing_in() if standing_in else cutoffs

    def mode_thresholds(self, mode: str | None = None) -> Cutoffs:
        """The thresholds that apply in ``mode``."""
        return self.cutoffs(self.index.searcher(mode or self.current_mode()).system)

    def _standalone(self, question: str, history: History | None, timings: dict[str, float]) -> str | None:
        """The follow-up rewritten into a standalone question by the LLM, or None when not needed."""
        if not history or self.rewriter is None:
            return None
        t = time.perf_counter()
        try:
            rewritten = self.rewriter.rewrite(question, history)
        except LLMError as exc:
            log.warning("follow-up not rewritten: %s", exc)
            rewritten = question
        timings["rewrite"] = ms(t)
        return None if rewritten == question else rewritten

    def _without_courtesies(self, question: str) -> str | None:
        """The question without the courtesies around it ("你好，" / ", thanks"), or None when there is none."""
        if self.chitchat is None:
            return None
        plain = self.chitchat.without_courtesies(question)
        return plain if plain != question else None

    def retrieval(self, turn: Turn) -> Retrieval:
        """The knowledge search of a turn, against the thresholds of the searcher that answered.

        A follow-up is made standalone by the LLM (or substituted without one), a split message searched by part, and
        the hits graded by the LLM when grading is on.
        """
        question, history, mode, timings = turn.question, turn.history, turn.base.mode, turn.timings
        rewritten = self._standalone(question, history, timings) or self._without_courtesies(question)
        search_q = rewritten or question
        t = time.perf_counter()
        searched = self._search(search_q, mode, within=turn.base.within)
        candidates, passed, parts, found = searched.hits, searched.passed, searched.parts, searched.found
        previous = last_user_message(history) if self.substitute_followups else None
        previous = previous[: self.max_message_chars] if previous else None  # history is the client's to forge
        if previous and self.chitchat is not None and self.chitchat.match(previous):
            previous = None  # "你好" then a question: nothing to follow up on
        if previous and reads_as_followup(search_q):
            # No LLM to rewrite it: the first standalone query that passes wins ("那深圳呢" after "珠海校区地址是什么"
            # searches "深圳校区地址是什么"); a message with no subject of its own ("他是谁") that finds nothing is
            # searched with the previous question (bot/chat/followup.py).
            for combined in followup_queries(previous, search_q, answered=bool(passed)):
                more, more_passed = self.retrieve(combined, mode, within=turn.base.within)
                if more_passed:
                    candidates, passed, rewritten, parts = more, more_passed, combined, ()
                    break
        timings["retrieve"] = ms(t)
        # Thresholds and notices of the searcher that answered (another mode may stand in while an index builds)
        cutoffs = self.cutoffs(found.system, found.standing_in)
        graded = self._graded(search_q, Graded(candidates, passed, parts), cutoffs, timings)
        turn.replace(candidates=graded.hits, rewritten=rewritten, parts=graded.parts, thresholds=cutoffs)
        turn.base = turn.base.noted(*found.notices)
        return Retrieval(graded.hits, graded.passed, graded.parts, cutoffs)

    def search_again(self, turn: Turn, text: str) -> list[Hit]:
        """The passing hits for ``text`` (HyDE's question with its hypothetical answer), graded.

        The thresholds are those of the searcher that answered this search (a stand-in's while an index builds).
        """
        s = self._search(text, turn.base.mode, within=turn.base.within)
        return self._graded(
            turn.search_text,
            Graded(s.hits, s.passed, ()),
            self.cutoffs(s.found.system, s.found.standing_in),
            turn.timings,
        ).passed

    def search_rephrased(self, turn: Turn) -> Rephrased:
        """The LLM's phrasings of the turn's question and the passing hits they found."""
        assert self.multi_query is not None  # the rewrite rung exists only with an LLM
        mode, within = turn.base.mode, turn.base.within
        rewrites = self.multi_query.run(
            turn.search_text, lambda text: self.find(text, mode, self.top_k, within), self.top_k, turn.timings
        )
        # Thresholds and notices of what answered the phrasings, as for the main search
        first = rewrites.found[0] if rewrites.found else None
        system = first.system if first is not None else self.index.searcher(mode).system
        turn.base = turn.base.noted(*(n for f in rewrites.found for n in f.notices))
        cutoffs = self.cutoffs(system, first is not None and first.standing_in)
        passed = [h for h in rewrites.hits if cutoffs.passes(h)]
        graded = self._graded(turn.search_text, Graded(rewrites.hits, passed, ()), cutoffs, turn.timings)
        return Rephrased(rewrites.phrasings, graded.passed)

    def find(self, text: str, mode: str, top_k: int, within: EntryFilter | None) -> Found:
        """One search of what ``mode`` serves now, searched once more if it failed (:func:`once_more_if_failed`)."""
        return once_more_if_failed(lambda: self._found(self.index.served(mode), text, top_k, within))

    def _found(
        self, searcher: ServedSearcher, text: str, top_k: int, within: EntryFilter | None, unpublished: bool = False
    ) -> Found:
        """``searcher``'s hits for ``text`` (bounded), without entries whose negative questions exclude them.

        The one search every path of a turn makes: the message, its parts, the rewrite's phrasings, HyDE's text.
        Unless ``unpublished``, drafts and entries outside their validity are left out too.
        """
        text = text[: self.max_search_chars]  # bounded work per search, however long the message or HyDE text
        found = searcher.find(text, top_k, within)
        kept = self.negatives.filter(text, found.hits, self.index.entries, searcher)
        kept = kept if unpublished else self.availability.keep(kept)
        return found if len(kept) == len(found.hits) else dataclasses.replace(found, hits=tuple(kept))

    def _graded(self, question: str, found: Graded, cutoffs: Cutoffs, timings: dict[str, float]) -> Graded:
        """``found`` after the optional LLM grading, against the thresholds of the searcher that found the hits."""
        if self.grader is None or not found.hits:
            return found
        t = time.perf_counter()
        graded = self.grader.apply(question, found.hits, found.parts, cutoffs)
        timings["grade"] = timings.get("grade", 0.0) + ms(t)
        return graded
