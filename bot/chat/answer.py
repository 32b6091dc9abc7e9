"""What the bot returns: the reply, the hits behind it, the strategy that produced it, and all a front end shows."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from bot.search.base import Hit


class Strategy(str, Enum):
    """Which stage of the chain produced the answer."""

    DIRECT = "direct"
    VERBATIM = "verbatim"  # an entry so close to the question that its document is the reply (no LLM call)
    REWRITE = "rewrite"  # an alternative phrasing of the question written by the LLM found it
    HYDE = "hyde"
    LAST_RESORT = "last_resort"
    REFUSED = "refused"  # the message held personal data and privacy.refuse is on: nothing searched or sent


@dataclass(frozen=True)
class Cutoffs:
    """The relevance a hit needs in one retrieval system: to be a reference, and to be the reply itself."""

    system: str
    answer: float
    direct: float | None = None

    def passes(self, hit: Hit) -> bool:
        """True when the hit is relevant enough to answer from."""
        return hit.relevance >= self.answer

    def is_direct(self, hit: Hit) -> bool:
        """True when the hit is so close that its document is the answer (never when ``direct`` is off)."""
        return self.direct is not None and hit.relevance >= self.direct

    def describe(self) -> str:
        """Human form, e.g. 'hybrid-e5 ≥ 0.81 (direct ≥ 0.93)'."""
        text = f"{self.system} ≥ {self.answer:g}"
        return text + (f" (direct ≥ {self.direct:g})" if self.direct is not None else "")

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"system": self.system, "answer": self.answer, "direct": self.direct}


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
    parts: tuple[Part, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    finished: bool = True
    turn_id: int | None = None  # the conversation log's id of this turn, once recorded (Bot.turn)

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
            "mode": self.mode,
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
            "parts": [{"question": p.question, "id": p.hit.entry.id if p.hit else None} for p in self.parts],
            "hits": [hit_dict(h) for h in self.hits],
            "candidates": [hit_dict(h) for h in self.candidates],
            "timings_ms": {k: round(v, 2) for k, v in self.timings.items()},
        }


def hit_dict(hit: Hit) -> dict:
    """JSON-ready form of one hit."""
    d = {
        "id": hit.entry.id,
        "query": hit.entry.query,
        "document": hit.entry.document,
        "metadata": list(hit.entry.metadata),
        "relevance": round(hit.relevance, 4),
        "score": round(hit.score, 4),
        "searcher": hit.searcher,
        "signals": {k: round(v, 4) for k, v in hit.signals.items()},
    }
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
