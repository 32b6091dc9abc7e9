"""What the bot returns: the reply, the hits behind it, the strategy that produced it and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from bot.search.base import Hit


class Strategy(str, Enum):
    """Which stage of the chain produced the answer."""

    DIRECT = "direct"
    VERBATIM = "verbatim"  # an entry so close to the question that its document is the reply (no LLM call)
    HYDE = "hyde"
    LAST_RESORT = "last_resort"


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
class Answer:
    """One reply; while streaming, snapshots share everything but a growing ``text``."""

    question: str
    text: str
    strategy: Strategy
    mode: str
    hits: list[Hit] = field(default_factory=list)
    candidates: list[Hit] = field(default_factory=list)
    thresholds: Cutoffs | None = None
    llm_used: bool = False
    hypothetical: str | None = None
    rewritten: str | None = None
    notice: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    finished: bool = True

    def to_dict(self) -> dict:
        """JSON-ready form (for ``--json`` and the API)."""
        return {
            "question": self.question,
            "answer": self.text,
            "strategy": self.strategy.value,
            "mode": self.mode,
            "llm_used": self.llm_used,
            "thresholds": self.thresholds.to_dict() if self.thresholds else None,
            "notice": self.notice,
            "hypothetical": self.hypothetical,
            "rewritten": self.rewritten,
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
    return d
