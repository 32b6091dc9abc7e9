"""Hybrid retrieval: reciprocal rank fusion of a sparse (BM25) and a dense (vector) searcher."""

from __future__ import annotations

import time
from typing import Iterable, Mapping, Sequence

from bot.knowledge import Entry
from bot.search.base import Hit, Progress, Searcher, SyncReport

class HybridSearcher(Searcher):
    """Fuses the two lists by RRF: score = sum over lists of weight / (rrf_k + rank).

    The wrapped searchers keep their own indexes (they may also serve the sparse and dense modes);
    writes and syncs are passed to both.
    """

    name = "hybrid"

    def __init__(self, sparse: Searcher, dense: Searcher, rrf_k: float = 60.0,
                 weights: Mapping[str, float] | None = None, candidates: int | None = None):
        self.sparse, self.dense = sparse, dense
        self.rrf_k = rrf_k
        weights = dict(weights or {})
        self.weights = {"sparse": float(weights.get("sparse", 1.0)), "dense": float(weights.get("dense", 1.0))}
        self.candidates = candidates

    def _parts(self) -> list[tuple[str, Searcher]]:
        return [("sparse", self.sparse), ("dense", self.dense)]

    def leaves(self) -> list[Searcher]:
        """The fused searchers, whose scores each hybrid hit carries in ``Hit.scores``."""
        return [self.sparse, self.dense]

    def search(self, query: str, top_k: int) -> list[Hit]:
        """Top ``top_k`` by RRF over each searcher's ``candidates`` best; ``scores`` keeps each one's own score."""
        if top_k <= 0:
            return []
        depth = max(self.candidates or top_k * 4, top_k)
        fused: dict[str, float] = {}
        best_rank: dict[str, int] = {}
        entries: dict[str, Entry] = {}
        scores: dict[str, dict[str, float]] = {}
        for role, searcher in self._parts():
            weight = self.weights[role]
            for rank, hit in enumerate(searcher.search(query, depth), start=1):
                key = hit.entry.id
                fused[key] = fused.get(key, 0.0) + weight / (self.rrf_k + rank)
                best_rank[key] = min(best_rank.get(key, rank), rank)
                entries.setdefault(key, hit.entry)
                scores.setdefault(key, {})[hit.searcher] = hit.score
        # Ties (e.g. rank 1 in one list only vs rank 1 in the other) go to the better single rank, then the id.
        order = sorted(fused, key=lambda k: (-fused[k], best_rank[k], k))[:top_k]
        return [Hit(entries[k], fused[k], self.name, scores[k]) for k in order]

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Add or replace in both searchers."""
        self.sparse.upsert(entries, progress)
        self.dense.upsert(entries)

    def remove(self, ids: Iterable[str]) -> None:
        """Remove from both searchers."""
        ids = list(ids)
        self.sparse.remove(ids)
        self.dense.remove(ids)

    def indexed_hashes(self) -> dict[str, str] | None:
        """The entries both searchers hold with the same content, or None when either has no index."""
        sparse, dense = self.sparse.indexed_hashes(), self.dense.indexed_hashes()
        if sparse is None or dense is None:
            return None
        return {k: h for k, h in sparse.items() if dense.get(k) == h}

    def reset(self, reason: str) -> None:
        """Reset both indexes."""
        self.sparse.reset(reason)
        self.dense.reset(reason)

    def signature(self) -> str:
        """Both searchers' signatures."""
        return f"{self.sparse.signature()}+{self.dense.signature()}"

    def sync(self, entries: Sequence[Entry], progress: Progress | None = None) -> SyncReport:
        """Sync both searchers (each by its own rules); the report counts what changed in either."""
        start = time.perf_counter()
        reports = {role: s.sync(entries, progress if role == "sparse" else None) for role, s in self._parts()}
        reasons = [f"{role}: {r.reason}" for role, r in reports.items() if r.reason]
        return SyncReport(
            added=max(r.added for r in reports.values()),
            updated=max(r.updated for r in reports.values()),
            removed=max(r.removed for r in reports.values()),
            rebuilt=any(r.rebuilt for r in reports.values()),
            seconds=time.perf_counter() - start,
            reason="; ".join(reasons),
        )
