"""What the bot returns: the reply, the hits behind it, the strategy that produced it and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Mapping

from bot.search.base import Hit


class Strategy(str, Enum):
    """Which stage of the chain produced the answer."""

    DIRECT = "direct"
    HYDE = "hyde"
    LAST_RESORT = "last_resort"


@dataclass(frozen=True)
class Thresholds:
    """Score cut-offs keyed by searcher name ("tantivy", "elasticsearch", "faiss"): scores are on each searcher's scale.

    Keying by searcher rather than by mode means a hit is always judged on its own scale, also when the
    sparse mode falls back from Elasticsearch to the embedded engine, and inside a fused (hybrid) hit.
    """

    by_searcher: Mapping[str, float]

    def passes(self, hit: Hit) -> bool:
        """A hit passes when its searcher's score reaches that searcher's cut-off; a fused hit when any component does."""
        scores = hit.scores or {hit.searcher: hit.score}
        return any(name in self.by_searcher and score >= self.by_searcher[name] for name, score in scores.items())

    def select(self, names: Iterable[str]) -> dict[str, float]:
        """The cut-offs of the named searchers (those that have one)."""
        return {n: self.by_searcher[n] for n in names if n in self.by_searcher}


def describe_thresholds(thresholds: Mapping[str, float]) -> str:
    """Human form, e.g. 'tantivy ≥ 12 · faiss ≥ 0.8'."""
    return " · ".join(f"{name} ≥ {value:g}" for name, value in thresholds.items())


@dataclass(frozen=True)
class Answer:
    """One reply; while streaming, snapshots share everything but a growing ``text``."""

    question: str
    text: str
    strategy: Strategy
    mode: str
    hits: list[Hit] = field(default_factory=list)
    candidates: list[Hit] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
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
            "thresholds": self.thresholds,
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
