"""A mode's searcher whose candidates lose relevance for what their entries' questions do not share with the
message (bot/search/agreement.py), then are ranked again: the entry for the year asked beats its neighbour."""

from __future__ import annotations

import sys

from bot.config.retrieval import AgreementWeights
from bot.knowledge.filters import EntryFilter
from bot.search.agreement import ACROSS, UNNAMED, adjusted
from bot.search.base import Composite, Hit, ModeSearcher, Searcher, rescored, top_within
from bot.search.language import CROSS_LANGUAGE, language_of
from bot.search.relevance import SparseSearcher

BASE_SIGNAL = "base"  # a hit's relevance before agreement (what calibrate replays other weights from)
DEPTH = 20  # candidates scored: a neighbour ranked below the top few can win once the top ones lose
RIVALS = 3  # the first candidates (a clarify's options) whose naming the kind of answer asked counts against others


class AgreeingSearcher(Composite):
    """Re-scores ``inner``'s best candidates with the agreement signals the sparse searcher computes (its words,
    word statistics and synonyms), weighted by ``weights``; with ``languages``, marks each candidate whose question
    is in another language than the message (signal ``cross_language``, as the hybrid searcher does for its own)."""

    def __init__(self, inner: ModeSearcher, sparse: SparseSearcher, weights: AgreementWeights, languages: bool = False):
        self.inner, self.sparse, self.weights, self.languages = inner, sparse, weights, languages
        self.name, self.system = inner.name, inner.system

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` of ``inner``'s first candidates by agreed relevance; each hit's signals add the
        agreement signals and its relevance before them (``base``). Filtered, the first ``top_k`` admitted of the
        unfiltered ranking (:func:`top_within`): a rank-based relevance (sparse's) depends on the list it is in."""
        if top_k <= 0:
            return []
        return top_within(lambda n: self._ranked(query, n), lambda h: h.entry, within, top_k, sys.maxsize)

    def _ranked(self, query: str, top_k: int) -> list[Hit]:
        hits = self.inner.search(query, max(top_k, DEPTH))
        asked = language_of(query) if self.languages else None
        across = [
            CROSS_LANGUAGE in h.signals or (asked is not None and language_of(h.entry.query) not in (asked, None))
            for h in hits
        ]
        # A candidate in another language than the message, scored by the dense side alone, counts as such only
        # beside rivals in the message's language: when every candidate is in another one there is no rival.
        mixed = not all(across)
        agreements = self.sparse.agreements(query, [h.entry for h in hits])
        # An entry whose questions do not name the kind of answer asked (a place for 在哪) counts as such only beside
        # one of the first candidates whose questions do and say no less of the message: when none does, its text is
        # the best there is (a keyword 年份 on a loosely related history does not outweigh "成立" said in full).
        rival = max((a.forward for a in agreements[:RIVALS] if a.names_asked), default=None)
        scored = []
        for hit, other, agreement in zip(hits, across, agreements):
            signals = {**hit.signals, BASE_SIGNAL: hit.relevance, **agreement.signals()}
            if other:
                signals[CROSS_LANGUAGE] = 1.0
            if mixed and other:
                signals[ACROSS] = 1.0
            if rival is not None and agreement.names_asked is False and rival >= agreement.forward:
                signals[UNNAMED] = 1.0
            scored.append(rescored(hit, adjusted(hit.relevance, signals, self.weights), signals))
        scored.sort(key=lambda h: -h.relevance)  # stable: equal relevance keeps the inner order
        return scored[:top_k]

    def leaves(self) -> list[Searcher]:
        """The inner searcher's indexes and the sparse one the signals read (a dense mode's too), each once."""
        return list(dict.fromkeys([*self.inner.leaves(), self.sparse]))

    def check(self) -> str | None:
        """Why the inner searcher cannot serve, or None."""
        return self.inner.check()
