"""Hybrid retrieval: one fused relevance from the sparse and dense relevances of every candidate.

Each side proposes its best ``candidates`` entries; every entry of the union is then scored on *both* sides
(coverage from the sparse index's word statistics, cosines from the vectors the dense index stores), and

    relevance = sparse_weight x coverage + (1 - sparse_weight) x dense relevance

ranks the hits and is what the threshold compares. An entry that only one side likes therefore needs a high
score there to pass: a loose dense match no longer answers on its own, as it did when a hit passed on either
side's threshold, and there is no rank-fusion score without a meaning to put a threshold on.

Words cannot match across languages: between a message and an entry whose question is written in another
language (an English question, a Chinese entry), coverage says nothing and only pulls the ranking towards entries
sharing a stray Latin word. With ``language_aware`` such a pair is scored by the multilingual dense side alone
(relevance = dense relevance, signal ``cross_language``); each entry's relevance still depends on the message and
that entry only, so a filtered search ranks as the unfiltered one. When the sparse side searched the message's
words with their dictionary renderings (bot/search/crosslingual.py), such a pair's coverage means something again
and is fused at ``translated_weight``.
"""

from __future__ import annotations

from bot.config.base import default_of
from bot.config.retrieval import HybridSettings
from bot.knowledge.filters import EntryFilter
from bot.search.base import Composite, DenseRetriever, Hit, Searcher
from bot.search.crosslingual import TRANSLATED
from bot.search.language import CROSS_LANGUAGE, language_of
from bot.search.relevance import SparseSearcher


class HybridSearcher(Composite):
    """Fuses a sparse and a dense searcher's relevances; both keep their own indexes (shared with their modes, and
    synced by the knowledge index as its leaves)."""

    name = "hybrid"

    def __init__(
        self,
        sparse: SparseSearcher,
        dense: DenseRetriever,
        sparse_weight: float,
        candidates: int,
        language_aware: bool = True,
        translated_weight: float = default_of(HybridSettings, "translated_weight"),
    ):
        if not isinstance(dense, Searcher):  # the dense half keeps its own index too: a leaf the index syncs
            raise TypeError(f"the dense half of a hybrid must be a Searcher, not {type(dense).__name__}")
        self.sparse, self.dense, self._dense_index = sparse, dense, dense
        self.sparse_weight = sparse_weight
        self.candidates = candidates
        self.language_aware = language_aware
        self.translated_weight = translated_weight
        self.system = f"hybrid-{dense.encoder.name}"

    def _parts(self) -> list[tuple[str, Searcher]]:
        return [("sparse", self.sparse), ("dense", self._dense_index)]

    def leaves(self) -> list[Searcher]:
        """The fused searchers."""
        return [self.sparse, self._dense_index]

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """Top ``top_k`` of both sides' candidates (of the entries ``within`` admits) by fused relevance; each
        hit's signals hold every part."""
        if top_k <= 0:
            return []
        depth = max(self.candidates, top_k)
        sparse_hits = {h.entry.id: h for h in self.sparse.search(query, depth, within)}
        dense_hits = {h.entry.id: h for h in self.dense.search(query, depth, within)}
        entries = {i: h.entry for i, h in {**dense_hits, **sparse_hits}.items()}
        only_sparse = [i for i in sparse_hits if i not in dense_hits]
        only_dense = [entries[i] for i in dense_hits if i not in sparse_hits]
        vector = self.dense.query_vector(query) if only_sparse else None
        cosines = self.dense.similarities(vector, only_sparse) if vector is not None else {}
        coverages = dict(zip((e.id for e in only_dense), self.sparse.relevances(query, only_dense)))
        asked = language_of(query) if self.language_aware else None
        # the message's words searched with their renderings in the knowledge's language: words count across too
        across_weight = self.translated_weight if asked is not None and self.sparse.translates(query) else 0.0
        hits = []
        for entry_id, entry in entries.items():
            sparse = sparse_hits.get(entry_id)
            # coverage itself: the sparse mode's rank-following relevance is for its own list, not for fusion
            coverage = sparse.signals.get("coverage", sparse.relevance) if sparse else coverages.get(entry_id, 0.0)
            dense = dense_hits.get(entry_id) or (
                self.dense.hit(entry, cosines[entry_id]) if entry_id in cosines else None
            )
            dense_relevance = dense.relevance if dense else 0.0
            across = asked is not None and language_of(entry.query) not in (asked, None)
            weight = across_weight if across else self.sparse_weight
            relevance = weight * coverage + (1.0 - weight) * dense_relevance
            signals = {**(sparse.signals if sparse else {"coverage": coverage}), **(dense.signals if dense else {})}
            if across:
                signals[CROSS_LANGUAGE] = 1.0
                if across_weight:
                    signals[TRANSLATED] = 1.0
            # the alternative question that matched: the dense side's (it compares vectors of each), else the sparse's
            matched = dense.matched_question if dense else sparse.matched_question if sparse else ""
            hits.append(Hit(entry, relevance, relevance, self.name, signals, matched_question=matched))
        # Ties go to the entry with the better sparse score (words in common), then the id: a stable order.
        hits.sort(key=lambda h: (-h.relevance, -h.signals.get("bm25", 0.0), h.entry.id))
        return hits[:top_k]

    def check(self) -> str | None:
        """Why either index cannot serve (named by its role), or None."""
        return next((f"{role}: {why}" for role, s in self._parts() if (why := s.check()) is not None), None)
