"""Writing the reply once a rung has chosen what to answer from: the LLM over the references, a verbatim entry,
the retrieval-only text, or the last resort; an LLM reply that declines to answer is reported as a miss."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Collection, Generator, Iterator, Sequence

from bot.chat.answer import Answer, Option, Part, Strategy
from bot.chat.compose import compose
from bot.chat.dont_know import DontKnowDetector
from bot.chat.generate import finish, ms, stream_reply
from bot.chat.last_resort import LastResort
from bot.chat.llm import ChatModel
from bot.chat.prompt import PromptBuilder
from bot.chat.splitter import QuestionSplitter
from bot.config.settings import LimitSettings, default_of
from bot.knowledge.markup import asset_pictures
from bot.messages import History
from bot.search.base import Hit
from bot.texts import VERBATIM_LABEL

CITED = re.compile(r"\[(\d{1,2})\]")  # a reference the LLM's reply cites: [1], [2]...


def with_cited_pictures(answer: Answer) -> Answer:
    """``answer`` followed by the pictures of the references its reply cites that it does not show itself.

    The prompt gives the LLM the references' text, not their markup, so a map or a form in the cited entry would
    otherwise be lost from an LLM's answer.
    """
    cited = [int(n) for n in dict.fromkeys(CITED.findall(answer.text))]
    pictures = [
        picture
        for n in cited
        if 1 <= n <= len(answer.hits)
        for picture in asset_pictures(answer.hits[n - 1].entry.document)
        if picture.split("](", 1)[1] not in answer.text
    ]
    if not pictures:
        return answer
    return dataclasses.replace(answer, text=answer.text + "\n\n" + "\n\n".join(dict.fromkeys(pictures)))


class Responder:
    """Turns the hits a rung chose into the reply's snapshots."""

    def __init__(
        self,
        prompt: PromptBuilder,
        last_resort: LastResort,
        llm: ChatModel | None = None,
        splitter: QuestionSplitter | None = None,
        max_answer_chars: int = default_of(LimitSettings, "max_answer_chars"),
        dont_know: DontKnowDetector | None = None,
    ):
        self.prompt = prompt
        self.last_resort = last_resort
        self.llm = llm
        self.splitter = splitter
        self.max_answer_chars = max_answer_chars
        self.dont_know = dont_know or DontKnowDetector()

    def respond(
        self, base: Answer, history: History | None, timings: dict[str, float], start: float
    ) -> Generator[Answer, None, bool]:
        """Snapshots of the answer from ``base.hits``, the last one finished; returns True instead of finishing
        when the LLM declined to answer from them (a miss: the caller goes on down the ladder)."""
        if self.llm is None:
            text = self.compose(base.hits, base.parts, base.channel, base.together)
            yield finish(dataclasses.replace(base, text=text), timings, start)
            return False
        best = base.hits[0]
        # Not for a split message, even when its best hit came from the search for the whole message (no label).
        split = self.splitter is not None and len(self.splitter.split(base.rewritten or base.question)) > 1
        if (
            base.strategy in (Strategy.DIRECT, Strategy.CHOSEN)
            and not best.subquestion
            and not split
            and not base.together
            and base.thresholds
            and base.thresholds.is_direct(best)
        ):
            # So close to one entry that its document is the answer: no LLM call, and labelled as such.
            text = f"{VERBATIM_LABEL}\n\n**{best.entry.query}**\n\n{best.entry.document_for(base.channel)}"
            strategy = Strategy.VERBATIM if base.strategy is Strategy.DIRECT else base.strategy
            yield finish(dataclasses.replace(base, text=text, strategy=strategy, hits=[best]), timings, start)
            return False
        t = time.perf_counter()
        question = base.rewritten if base.strategy is Strategy.CHOSEN and base.rewritten else base.question
        prompt = self.prompt.build(question, base.hits, history)
        timings["prompt"] = ms(t)
        base = dataclasses.replace(base, hits=prompt.used, llm_used=True)
        fallback = self.compose(prompt.used, base.parts, base.channel, base.together)
        for snapshot in self._generate(base, prompt.messages, timings, start, fallback):
            if snapshot.finished and snapshot.llm_used and self.dont_know.declines(snapshot.text):
                return True  # a miss: the streamed part is replaced by what the next rung says
            yield with_cited_pictures(snapshot) if snapshot.finished and snapshot.llm_used else snapshot
        return False

    def last(
        self,
        base: Answer,
        history: History | None,
        timings: dict[str, float],
        start: float,
        offered: Sequence[Hit] | None = None,
    ) -> Iterator[Answer]:
        """The last resort: the fixed reply with "did you mean" options (from ``offered``, default the turn's
        candidates), or the LLM alone with a notice."""
        offered = base.candidates if offered is None else offered
        unsure = bool(base.candidates and base.thresholds and base.thresholds.unsure_of(base.candidates[0]))
        fixed = self.last_resort.fixed_reply(offered, unsure)
        if self.llm is not None and self.last_resort.uses_llm:
            messages = self.prompt.build_plain(base.question, history)
            base = dataclasses.replace(base, llm_used=True).noted(self.last_resort.notice)
            prefix = self.last_resort.notice + "\n\n"
            yield from self._generate(base, messages, timings, start, fixed, prefix)
            return
        options = tuple(Option(h.entry.id, h.entry.query) for h in self.last_resort.suggested(offered))
        suggestions = tuple(o.question for o in options)
        yield finish(dataclasses.replace(base, text=fixed, suggestions=suggestions, options=options), timings, start)

    def _generate(self, base: Answer, messages, timings, start, fallback: str, prefix: str = "") -> Iterator[Answer]:
        """Stream the LLM; on failure degrade to ``fallback`` text with a notice, keeping any streamed part."""
        assert self.llm is not None  # callers check that there is an LLM
        yield from stream_reply(self.llm, messages, base, timings, start, fallback, prefix, self.max_answer_chars)

    def compose(
        self,
        hits: Sequence[Hit],
        parts: Sequence[Part] = (),
        channel: str | None = None,
        together: Collection[str] = (),
    ) -> str:
        """Retrieval-only reply: each part's best entry (a split message), the entries answering ``together``, or the
        best hit's document (``channel``'s variant when the entry has one), then titles."""
        max_hit_chars = self.prompt.settings.max_hit_chars
        return compose(hits, parts, self.last_resort.fixed_reply([]), max_hit_chars, channel, together)
