"""The fallback rungs: other phrasings (multi-query rewrite), a hypothetical answer searched (HyDE), the last
resort, which also offers a person when the conversation keeps missing."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from bot.chat.answer import Answer, Strategy
from bot.chat.generate import ms
from bot.chat.hyde import HydeFallback
from bot.chat.language import LANGUAGE_TIP, KnowledgeLanguage
from bot.chat.prompt import normalize_history
from bot.chat.respond import Responder
from bot.chat.steps.base import Turn
from bot.chat.steps.knowledge import answer_from
from bot.chat.steps.talk import offering_person
from bot.errors import LLMError
from bot.handoff.desk import Desk
from bot.knowledge.entries import Entry
from bot.messages import History
from bot.search.base import Hit
from bot.texts import REPHRASE_REPLY

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Rephrased:
    """The LLM's phrasings of a turn's question and the passing hits they found (graded), best first."""

    phrasings: tuple[str, ...]
    passed: list[Hit]


class Research(Protocol):
    """Searching again for a turn (the Bot): with another text, or with the LLM's alternative phrasings."""

    def search_again(self, turn: Turn, text: str) -> list[Hit]:
        """The passing hits (graded, with the answering searcher's thresholds) for ``text``."""
        ...

    def search_rephrased(self, turn: Turn) -> Rephrased:
        """The LLM's phrasings of the question and the passing hits they found."""
        ...


class RewriteStep:
    """The LLM writes other phrasings of the question; each is searched and the results merged."""

    name = "rewrite"

    def __init__(self, research: Research, responder: Responder):
        self.research = research
        self.responder = responder

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer from what the phrasings found, if anything passes."""
        rephrased = self.research.search_rephrased(turn)
        turn.replace(phrasings=rephrased.phrasings)
        if rephrased.passed:
            base = turn.replace(hits=rephrased.passed, strategy=Strategy.REWRITE, parts=())
            yield from answer_from(self.responder, turn, base)


class HydeStep:
    """The LLM writes a hypothetical answer; the question with it is searched again."""

    name = "hyde"

    def __init__(self, hyde: HydeFallback, research: Research, responder: Responder):
        self.hyde = hyde
        self.research = research
        self.responder = responder

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer from what the hypothetical answer found, if anything passes."""
        t = time.perf_counter()
        try:
            hypothetical = self.hyde.hypothesize(turn.search_text)
        except LLMError as exc:
            log.warning("HyDE skipped: %s", exc)
            turn.timings["hyde"] = ms(t)
            return
        turn.timings["hyde"] = ms(t)
        t = time.perf_counter()
        passed = self.research.search_again(turn, HydeFallback.search_text(turn.search_text, hypothetical))
        turn.timings["retrieve_hyde"] = ms(t)
        turn.replace(hypothetical=hypothetical)
        if passed:
            base = turn.replace(hits=passed, strategy=Strategy.HYDE, parts=())
            yield from answer_from(self.responder, turn, base)


class LastResortStep:
    """The end of the ladder: the fixed reply with "did you mean" options, or the LLM alone with a notice; after
    ``handoff.after_misses`` misses in a row (this one included) it also offers a person (never hands off itself)."""

    name = "last_resort"

    def __init__(
        self,
        responder: Responder,
        desk: Desk | None = None,
        entries: Callable[[], list[Entry]] | None = None,
        language: KnowledgeLanguage | None = None,
        popular: Callable[[int], list[Entry]] | None = None,
    ):
        self.responder = responder
        self.desk = desk
        self.entries = entries
        self.language = language
        self.popular = popular

    def run(self, turn: Turn) -> Iterator[Answer]:
        """The last resort; when the misses pile up, with the offer of a person after it."""
        base = turn.replace(strategy=Strategy.LAST_RESORT, hits=[], llm_used=False)
        tip = self._language_tip(turn)
        offer = self._offers_person(turn)
        for snapshot in self.responder.last(base, turn.history, turn.timings, turn.start, self._offered(base)):
            if snapshot.finished and tip:
                snapshot = dataclasses.replace(snapshot, text=f"{snapshot.text}\n\n{tip}")
            yield offering_person(snapshot) if snapshot.finished and offer else snapshot

    def _offers_person(self, turn: Turn) -> bool:
        """True when this miss is the ``handoff.after_misses``-th in a row and a person can be asked for."""
        d = self.desk
        return bool(
            d is not None
            and d.settings.enabled
            and d.settings.after_misses
            and misses(turn.history, self.markers) + 1 >= d.settings.after_misses
        )

    def _offered(self, base: Answer) -> list[Hit]:
        """What "did you mean" picks from (``fallback.last_resort.suggestions_source``): the closest candidates
        within reach of the answer threshold (``suggestions_reach``), the most used entries, or both (the closer half
        of the slots first, then popular, then the other closest)."""
        settings = self.responder.last_resort.settings
        source = settings.suggestions_source
        cut = base.thresholds.answer * settings.suggestions_reach if base.thresholds is not None else 0.0
        closest = [h for h in base.candidates if h.relevance >= cut] if source != "popular" else []
        if source == "candidates" or self.popular is None:
            return closest
        within = base.within  # a filtered turn suggests only entries of its categories
        wanted = settings.suggestions if within is None else settings.suggestions * 10
        popular = [Hit(e, 0.0, 0.0, "popular") for e in self.popular(wanted) if within is None or within.admits(e)]
        popular = popular[: settings.suggestions]
        half = (settings.suggestions + 1) // 2
        return [*closest[:half], *popular, *closest[half:]]

    def _language_tip(self, turn: Turn) -> str | None:
        """Without an LLM to translate: a tip to ask in the knowledge's language, when the question is in another."""
        if self.responder.llm is not None or self.entries is None or self.language is None:
            return None
        target = self.language.mismatch(turn.search_text, self.entries())
        return LANGUAGE_TIP[target] if target else None

    @property
    def markers(self) -> tuple[str, ...]:
        """How the bot's own misses begin: the last resort's reply or notice, the request to rephrase."""
        settings = self.responder.last_resort.settings
        return tuple(m[:24] for m in (settings.reply.strip(), settings.notice.strip(), REPHRASE_REPLY) if m)


def misses(history: History | None, markers: Sequence[str]) -> int:
    """How many of the latest assistant messages in a row were misses (read from their text: stateless)."""
    count = 0
    for message in reversed(normalize_history(history, 1000)):
        if message["role"] != "assistant":
            continue
        if not message["content"].strip().startswith(tuple(markers)):
            break
        count += 1
    return count
