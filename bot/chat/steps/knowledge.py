"""The rungs that decide from the knowledge search: clarify between close candidates, answer, confirm a near miss."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bot.chat.answer import Answer, Cutoffs, Option, Strategy
from bot.chat.generate import finish
from bot.chat.offers import clarify_text, confirm_text, squeeze
from bot.chat.respond import Responder
from bot.chat.several import asks_for_several
from bot.chat.steps.base import Retrieval, Turn
from bot.config.base import default_of
from bot.config.ladder import LadderSettings
from bot.search.base import Hit
from bot.search.language import CROSS_LANGUAGE
from bot.texts import UNSURE_HEAD


def _asked_verbatim(question: str, hit: Hit) -> bool:
    """True when the message is the entry's own question or one of its phrasings (e.g. a clicked option)."""
    said = squeeze(question)
    return any(squeeze(q) == said for q in (hit.entry.query, *hit.entry.questions))


def _said_more(close: list[Hit], lead: float | None, dense: float | None = None) -> Hit | None:
    """The one of the ``close`` candidates whose best question the message says at least ``lead`` more of
    (``q_backward``, bot/search/agreement.py) than of each other's, and which covers no less of the message than
    they do (``q_forward``), nor has a rival whose question the dense side finds ``dense`` closer (:func:`_outmeant`);
    None when none does (always when ``lead`` is None)."""
    if lead is None:
        return None
    said = sorted(close, key=lambda h: -h.signals.get("q_backward", 0.0))
    first, *others = ((h.signals.get("q_backward", 0.0), h.signals.get("q_forward", 0.0)) for h in said)
    if first[0] - others[0][0] < lead or any(first[1] < forward for _, forward in others):
        return None
    return None if _outmeant(said[0], said[1:], dense) else said[0]


def _outmeant(hit: Hit, others: list[Hit], lead: float | None) -> bool:
    """True when the dense side finds the question of one of ``others`` in the same language as ``hit``'s at least
    ``lead`` closer to the message (signal ``question``); False without ``lead`` or a dense side."""
    if lead is None or "question" not in hit.signals:
        return False
    # a pair in two languages is scored by the multilingual side alone (bot/search/hybrid.py): its cosine runs lower
    language = hit.signals.get(CROSS_LANGUAGE, 0.0)
    return any(
        o.signals.get("question", 0.0) - hit.signals["question"] >= lead
        for o in others
        if o.signals.get(CROSS_LANGUAGE, 0.0) == language
    )


def _meant_more(close: list[Hit], lead: float | None) -> Hit | None:
    """The one of the ``close`` candidates whose best question the dense side finds at least ``lead`` closer to the
    message (its cosine, signal ``question``) than each other's, and whose question the message says no less of
    both ways (``q_forward`` and ``q_backward`` at least each other's); None when none does (always when ``lead`` is
    None or a candidate has no dense side)."""
    if lead is None or any("question" not in h.signals for h in close):
        return None
    first, *others = sorted(close, key=lambda h: -h.signals["question"])
    if first.signals["question"] - others[0].signals["question"] < lead:
        return None
    words = ("q_forward", "q_backward")
    if any(first.signals.get(w, 0.0) < other.signals.get(w, 0.0) for other in others for w in words):
        return None
    return first


def _settled(close: list[Hit], cutoffs: Cutoffs) -> Hit | None:
    """The close candidate a tie is settled for, without asking (:func:`_said_more`, else :func:`_meant_more`): one
    side of agreement leads clearly and the other does not say otherwise."""
    return _said_more(close, cutoffs.settle, cutoffs.settle_dense) or _meant_more(close, cutoffs.settle_dense)


def _together(close: list[Hit], message: str, share: float | None) -> tuple[Hit, ...]:
    """The ``close`` candidates answering together, the one whose question the message says most of first: the
    message asks for several of a kind and each of them says at least ``share`` of it (``q_forward``); () when
    not (always when ``share`` is None)."""
    if share is None or not asks_for_several(message):
        return ()
    if any(h.signals.get("q_forward", 0.0) < share for h in close):
        return ()  # 北校园有哪些学院: two canteens of 北校园 are close, but neither is a 学院
    return tuple(sorted(close, key=lambda h: -h.signals.get("q_backward", 0.0)))


@dataclass(frozen=True)
class Tie:
    """Passing candidates the top one does not clearly beat: the passing candidates (one per question, best first),
    those within the clarify margin of the top one (at least two), the one a lead settles the tie for (None: the
    visitor is asked), and the close ones answering together when the message asks for several of a kind."""

    passing: tuple[Hit, ...]
    close: tuple[Hit, ...]
    settled: Hit | None
    together: tuple[Hit, ...] = ()


def _question(hit: Hit) -> str:
    """The entry's question as an option shows it (whitespace runs as one space); one option per question."""
    return " ".join(hit.entry.query.split())


def tie_of(found: Retrieval, message: str) -> Tie | None:
    """The tie among ``found``'s passing candidates; None when there is none (no clarify margin, fewer than two
    candidates within it, a split message, or ``message`` is the top entry's own question)."""
    margin = found.cutoffs.clarify
    if margin is None or len(found.passed) < 2 or found.parts or _asked_verbatim(message, found.passed[0]):
        return None
    top = found.passed[0].relevance
    passing: dict[str, Hit] = {}
    for hit in found.passed:
        passing.setdefault(_question(hit), hit)
    close = [h for h in passing.values() if top - h.relevance <= margin]
    if len(close) < 2:
        return None
    together = _together(close, message, found.cutoffs.together)
    if together:
        return Tie(tuple(passing.values()), tuple(close), together[0], together)
    return Tie(tuple(passing.values()), tuple(close), _settled(close, found.cutoffs))


def answering(found: Retrieval, message: str) -> tuple[Hit, ...]:
    """The passing hits the answer rung answers from: a settled tie's choice (or the close candidates answering
    together), else the top one; () when nothing passes, or one of them names another qualifier of a kind the
    message names (signal ``contrast``) and the cutoffs offer such a hit instead (``contrast``; not for a split
    message, whose parts each have their hit)."""
    if not found.passed:
        return ()
    tie = tie_of(found, message)
    chosen = (found.passed[0],) if tie is None or tie.settled is None else tie.together or (tie.settled,)
    if found.cutoffs.contrast and any(h.signals.get("contrast") for h in chosen) and not found.parts:
        return ()
    return chosen


class ClarifyStep:
    """The top two passing candidates within the calibrated margin: ask which one is meant, offering the passing
    candidates up to ``max_options`` — unless the message says clearly more of one's question (``settle``), or the
    dense side finds one's question clearly closer and the message says no less of it (``settle_dense``): then it
    passes and the answer rung answers from that one (:func:`tie_of`)."""

    name = "clarify"

    def __init__(self, max_options: int = default_of(LadderSettings, "max_options")):
        self.max_options = max_options

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Offer the close candidates' questions as numbered options."""
        tie = tie_of(turn.retrieved(), turn.search_text)
        if tie is None or tie.settled is not None:
            return
        # The margin decides whether to ask; once asking, every passing candidate up to max_options is offered:
        # when the top two tie the ranking below them is no surer (sysu: the gold of "学一食堂电话" came third, 0.01
        # under two tied look-alikes).
        options = tuple(Option(h.entry.id, _question(h)) for h in tie.passing[: self.max_options])
        answer = turn.replace(
            text=clarify_text([o.question for o in options]), strategy=Strategy.CLARIFY, options=options
        )
        yield finish(answer, turn.timings, turn.start)


class AnswerStep:
    """Answer from the passing hits (the LLM over them, or the retrieval-only text), the one a settled tie chose
    first (:func:`tie_of`)."""

    name = "answer"

    def __init__(self, responder: Responder):
        self.responder = responder

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer when a hit passes; an LLM reply that declines to answer is a miss and passes."""
        found = turn.retrieved()
        chosen = answering(found, turn.search_text)
        if not chosen:
            return
        hits = [*chosen, *(h for h in found.passed if not any(h is c for c in chosen))]
        together = tuple(h.entry.id for h in chosen) if len(chosen) > 1 else ()
        yield from answer_from(self.responder, turn, turn.replace(hits=hits, together=together))


def answer_from(responder: Responder, turn: Turn, base: Answer) -> Iterator[Answer]:
    """The responder's snapshots for ``base``; an LLM reply that declines marks the turn a miss and passes."""
    declined = yield from responder.respond(base, turn.history, turn.timings, turn.start)
    if declined:
        turn.declined = True
        turn.replace(hits=[], llm_used=False)


class ConfirmStep:
    """Nothing passes but the best candidates fall just short (within the ``confirm`` band below the threshold), or
    the one that would answer names another qualifier than the message's (``contrast``): not "nothing found" but
    unsure which is meant. One candidate: "您是想问「X」吗？"; several: "我不太确定，您是想问：" and their questions as
    numbered options, up to ``max_options``."""

    name = "confirm"

    def __init__(self, max_options: int = default_of(LadderSettings, "max_options")):
        self.max_options = max_options

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Ask whether the near miss (or which of the near misses) is what was meant."""
        found = turn.retrieved()
        if not found.candidates or found.parts or turn.declined:
            return
        if found.passed and not self._contrasted(found, turn.search_text):
            return
        near: dict[str, Hit] = {}
        for hit in found.passed or found.candidates:
            if found.passed or found.cutoffs.near_miss(hit):
                near.setdefault(_question(hit), hit)
        if not near:
            return
        options = tuple(Option(h.entry.id, q) for q, h in list(near.items())[: self.max_options])
        text = (
            confirm_text(options[0].question)
            if len(options) == 1
            else clarify_text([o.question for o in options], UNSURE_HEAD)
        )
        answer = turn.replace(text=text, strategy=Strategy.CONFIRM, options=options)
        yield finish(answer, turn.timings, turn.start)

    @staticmethod
    def _contrasted(found: Retrieval, message: str) -> bool:
        """True when hits pass but the answer rung did not answer for a qualifier the answering one contrasts."""
        return found.cutoffs.contrast and not answering(found, message)
