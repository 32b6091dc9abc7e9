"""What the bot returns: the reply, the hits behind it, the strategy that produced it and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from bot.search.base import Hit


class Strategy(str, Enum):
    """Which stage of the chain produced the answer."""

    DIRECT = "direct"
    HYDE = "hyde"
    LAST_RESORT = "last_resort"


@dataclass(frozen=True)
class Threshold:
    """A mode's cut-off: a hit is used only when its score reaches ``value``."""

    value: float

    def passes(self, hit: Hit) -> bool:
        """True when the hit's score reaches the threshold."""
        return hit.score >= self.value


@dataclass(frozen=True)
class Answer:
    """One reply; while streaming, snapshots share everything but a growing ``text``."""

    question: str
    text: str
    strategy: Strategy
    mode: str
    hits: list[Hit] = field(default_factory=list)
    candidates: list[Hit] = field(default_factory=list)
    threshold: float = 0.0
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
            "threshold": self.threshold,
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
        "score": round(hit.score, 4),
        "searcher": hit.searcher,
    }
    if hit.part:
        d["part"] = hit.part
    if hit.scores:
        d["scores"] = {k: round(v, 4) for k, v in hit.scores.items()}
    return d
