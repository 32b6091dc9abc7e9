"""What the bot returns: the reply, the hits behind it, the strategy that produced it, and all a front end shows."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from bot.config.retrieval import CutoffSettings
from bot.knowledge.filters import EntryFilter
from bot.knowledge.rules import Rule
from bot.search.base import Hit
from bot.search.crosslingual import TRANSLATED


class Strategy(str, Enum):
    """Which stage of the chain produced the answer."""

    DIRECT = "direct"
    VERBATIM = "verbatim"  # an entry so close to the question that its document is the reply (no LLM call)
    REWRITE = "rewrite"  # an alternative phrasing of the question written by the LLM found it
    HYDE = "hyde"
    TRANSLATE = "translate"  # the question translated into the knowledge's language by the LLM found it
    LAST_RESORT = "last_resort"
    REFUSED = "refused"  # the message held personal data and privacy.refuse is on: nothing searched or sent
    CHOSEN = "chosen"  # a reply to a clarify or confirm question picked an offered entry ("2", "是的")
    CLARIFY = "clarify"  # close candidates: "您想问的是：" with their questions as options
    CONFIRM = "confirm"  # a near miss: "您是想问「X」吗？"
    CHITCHAT = "chitchat"  # small talk, a persona reply
    HANDOFF = "handoff"  # a person was asked for (or the offer of one accepted): a ticket, and what happens next
    HELD = "held"  # a person holds the conversation: the message went to them, the bot stayed quiet
    REPHRASE = "rephrase"  # "no" to a confirmation or "none of these": please ask in other words
    RULE = "rule"  # an exact-match rule of the knowledge folder pinned the message to an entry (no search, no LLM)

    @property
    def decision(self) -> Decision:
        """The rung of the ladder this strategy belongs to (the six words of the API)."""
        return _DECISIONS.get(self, Decision.ANSWER)


class Decision(str, Enum):
    """What the turn did, as every front end reports it."""

    ANSWER = "answer"
    CLARIFY = "clarify"
    CONFIRM = "confirm"
    CHITCHAT = "chitchat"
    HANDOFF = "handoff"
    FALLBACK = "fallback"


_DECISIONS = {
    Strategy.CLARIFY: Decision.CLARIFY,
    Strategy.CONFIRM: Decision.CONFIRM,
    Strategy.CHITCHAT: Decision.CHITCHAT,
    Strategy.HANDOFF: Decision.HANDOFF,
    Strategy.HELD: Decision.HANDOFF,
    Strategy.LAST_RESORT: Decision.FALLBACK,
    Strategy.REFUSED: Decision.FALLBACK,
    Strategy.REPHRASE: Decision.FALLBACK,
}


class Band(str, Enum):
    """How sure the calibration is of a hit: high, medium (passes the answer threshold) or low."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Option:
    """An entry a reply offers (clarify, confirm, "did you mean"): its id and its question."""

    id: str
    question: str

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.id, "question": self.question}


@dataclass(frozen=True)
class HandoffState:
    """A turn's part in a hand-off to a person: ``offered`` (a button offers one), or the ticket's id and status
    (open, claimed, ...; ``none`` when no ticket could be kept and the reply gives the contact instead)."""

    status: str
    ticket: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"id", "status"}``."""
        return {"id": self.ticket, "status": self.status}


OFFERED = HandoffState("offered")


@dataclass(frozen=True)
class Cutoffs:
    """The relevance a hit needs in one retrieval system: to be a reference, and to be the reply itself."""

    system: str
    answer: float
    direct: float | None = None
    clarify: float | None = None  # candidates within this of the top one are offered as options (None: never)
    confirm: float | None = None  # a top hit this far below ``answer`` is offered for confirmation (None: never)
    unsure: float | None = (
        None  # a fallback whose best hit is this far below ``answer`` says it is unsure (None: never)
    )
    stand_in: float | None = (
        None  # standing in for another mode: answer only this far above ``answer`` (None: as usual)
    )
    settle: float | None = None  # a close candidate whose question the message says this much more of answers
    settle_dense: float | None = None  # ... or whose question the dense side finds this much closer (no fewer words)
    contrast: bool = False  # a candidate naming another qualifier of a kind the message names is offered, not answered
    together: float | None = None  # close candidates each saying this much of a message asking for several answer
    translated: float | None = (
        0.0  # a hit found through dictionary renderings answers this far above ``answer`` (None: never)
    )

    def standing_in(self) -> Cutoffs:
        """The cutoffs while this system stands in for a mode whose index is not ready: a hit answers only from
        ``stand_in`` above the answer cut (direct replies too), and one that would pass the usual cut is offered
        for confirmation instead; these cutoffs themselves without ``stand_in``."""
        if self.stand_in is None:
            return self
        answer = min(1.0, self.answer + self.stand_in)
        return replace(
            self,
            answer=answer,
            direct=None if self.direct is None else max(self.direct, answer),
            confirm=answer - self.answer + (self.confirm or 0.0),
        )

    @classmethod
    def from_settings(cls, system: str, settings: CutoffSettings) -> Cutoffs:
        """The cutoffs of ``system`` as its ``retrieval.thresholds`` block sets them."""
        # by name: a field added to both must not shift the others
        return cls(system, **settings.model_dump())

    def passes(self, hit: Hit) -> bool:
        """True when the hit is relevant enough to answer from (one found through the dictionary's renderings of the
        message's words: ``translated`` above that, or never)."""
        if hit.signals.get(TRANSLATED):
            return self.translated is not None and hit.relevance >= self.answer + self.translated
        return hit.relevance >= self.answer

    def near_miss(self, hit: Hit) -> bool:
        """True when the hit falls short of ``answer`` by less than the confirm band (or reaches it, yet does not
        pass: found through the dictionary)."""
        return self.confirm is not None and self.answer - self.confirm <= hit.relevance and not self.passes(hit)

    def unsure_of(self, hit: Hit) -> bool:
        """True when ``hit`` falls short of ``answer`` by at most the ``unsure`` band: a fallback offering it is
        not sure which entry was meant, rather than having found nothing (so does one that reaches ``answer`` yet
        does not pass: found through the dictionary)."""
        return self.unsure is not None and self.answer - self.unsure <= hit.relevance and not self.passes(hit)

    def band(self, hit: Hit) -> Band:
        """high: at least ``direct`` (without one, halfway from ``answer`` to 1), medium: passes, low: below."""
        high = self.direct if self.direct is not None else (1.0 + self.answer) / 2
        return Band.HIGH if hit.relevance >= high else Band.MEDIUM if self.passes(hit) else Band.LOW

    def is_direct(self, hit: Hit) -> bool:
        """True when the hit is so close that its document is the answer (never when ``direct`` is off)."""
        return self.direct is not None and hit.relevance >= self.direct and self.passes(hit)

    def describe(self) -> str:
        """Human form, e.g. 'hybrid-e5 ≥ 0.81 (direct ≥ 0.93)'."""
        text = f"{self.system} ≥ {self.answer:g}"
        return text + (f" (direct ≥ {self.direct:g})" if self.direct is not None else "")

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "system": self.system,
            "answer": self.answer,
            "direct": self.direct,
            "clarify": self.clarify,
            "confirm": self.confirm,
            "unsure": self.unsure,
            "stand_in": self.stand_in,
            "settle": self.settle,
            "settle_dense": self.settle_dense,
            "translated": self.translated,
            "contrast": self.contrast,
            "together": self.together,
        }


@dataclass(frozen=True)
class Part:
    """One part of a message that asks several things, and the best passing hit found for it (None: nothing)."""

    question: str
    hit: Hit | None = None


@dataclass(frozen=True)
class Answer:
    """One turn, everything a front end shows; while streaming, snapshots share all but a growing ``text``.

    ``mode`` is the mode that answered; ``llm`` the configured model's name (None: retrieval-only), ``llm_used``
    whether it wrote this text. ``notices`` are for everyone (truncation, a searcher's fallback, an LLM failure);
    ``knowledge_error`` is the detail of a broken knowledge file, for admins only (it names server paths): a chat
    page shows a generic line instead. ``suggestions`` are the entry questions of a last-resort "did you mean",
    ``parts`` the sub-questions of a split message with the entry that answers each; ``phrasings`` the alternative
    phrasings the multi-query rewrite searched (each hit it found names its phrasing in ``subquestion``).
    """

    question: str
    text: str
    strategy: Strategy
    mode: str
    hits: list[Hit] = field(default_factory=list)
    candidates: list[Hit] = field(default_factory=list)
    thresholds: Cutoffs | None = None
    llm: str | None = None
    llm_used: bool = False
    hypothetical: str | None = None
    reasoning: str | None = None  # a reasoning model's thinking (the first 4,000 characters), never in ``text``
    phrasings: tuple[str, ...] = ()
    rewritten: str | None = None
    notices: tuple[str, ...] = ()
    knowledge_error: str | None = None
    suggestions: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()  # the entries offered (clarify, confirm, "did you mean"), best first
    parts: tuple[Part, ...] = ()
    together: tuple[str, ...] = ()  # entries answering together (a message asking for several), shown whole
    timings: dict[str, float] = field(default_factory=dict)
    finished: bool = True
    turn_id: int | None = None  # the conversation log's id of this turn, once recorded (KnowledgeBase.turn)
    within: EntryFilter | None = None  # the categories the search was restricted to (None: the whole knowledge)
    knowledge_base: str | None = None  # the knowledge base that answered (another one when routed; None: one KB)
    handoff: HandoffState | None = None  # a person offered, or the ticket this turn opened or went to
    channel: str | None = None  # where the message came from (CHANNELS): an entry's variant for it is what it shows
    rule: Rule | None = None  # the exact-match rule that answered (strategy rule)
    related: tuple[Option, ...] = ()  # entries to ask next after an answer (猜你想问, bot/chat/related.py)

    @property
    def decision(self) -> Decision:
        """The ladder's decision: answer, clarify, confirm, chitchat, handoff or fallback."""
        return self.strategy.decision

    @property
    def notice(self) -> str | None:
        """The notices as one line, or None when there is none."""
        return " ".join(self.notices) if self.notices else None

    def noted(self, *notices: str | None) -> Answer:
        """A copy with ``notices`` added (empty and repeated ones skipped)."""
        extra = tuple(n for n in dict.fromkeys(notices) if n and n not in self.notices)
        return replace(self, notices=self.notices + extra) if extra else self

    def to_dict(self) -> dict:
        """JSON-ready form (for ``--json`` and the API); a knowledge error only as a flag, its detail names paths."""
        return {
            "question": self.question,
            "answer": self.text,
            "strategy": self.strategy.value,
            "decision": self.decision.value,
            "options": [o.to_dict() for o in self.options],
            "mode": self.mode,
            "filter": self.within.to_dict() if self.within else None,
            "knowledge_base": self.knowledge_base,
            "llm": self.llm,
            "llm_used": self.llm_used,
            "thresholds": self.thresholds.to_dict() if self.thresholds else None,
            "notice": self.notice,
            "notices": list(self.notices),
            "knowledge_problem": self.knowledge_error is not None,
            "hypothetical": self.hypothetical,
            "phrasings": list(self.phrasings),
            "rewritten": self.rewritten,
            "suggestions": list(self.suggestions),
            "handoff": self.handoff.to_dict() if self.handoff else None,
            "rule": self.rule.to_dict() if self.rule else None,
            "related": [o.to_dict() for o in self.related],
            "parts": [{"question": p.question, "id": p.hit.entry.id if p.hit else None} for p in self.parts],
            "hits": [hit_dict(h, self.thresholds) for h in self.hits],
            "candidates": [hit_dict(h, self.thresholds) for h in self.candidates],
            "timings_ms": {k: round(v, 2) for k, v in self.timings.items()},
        }


def hit_dict(hit: Hit, cutoffs: Cutoffs | None = None) -> dict:
    """JSON-ready form of one hit (with its confidence band when the thresholds are known)."""
    d: dict = {
        "id": hit.entry.id,
        "query": hit.entry.query,
        "document": hit.entry.document,
        "metadata": list(hit.entry.metadata),
        "relevance": round(hit.relevance, 4),
        "score": round(hit.score, 4),
        "searcher": hit.searcher,
        "signals": {k: round(v, 4) for k, v in hit.signals.items()},
    }
    if cutoffs is not None:
        d["band"] = cutoffs.band(hit).value
    if hit.subquestion:
        d["subquestion"] = hit.subquestion
    d.update(
        {"matched_question": hit.matched_question} if hit.matched_question else {}
    )  # the entry's phrasing that matched
    if hit.passages:  # the parts of a long document that matched, best first
        d["passages"] = [
            {
                "index": p.index,
                "start": p.start,
                "end": p.end,
                "relevance": round(p.relevance, 4),
                "text": hit.entry.document[p.start : p.end].strip(),
            }
            for p in hit.passages
        ]
    return d
