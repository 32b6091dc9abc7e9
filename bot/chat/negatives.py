"""Negative examples: an entry is never answered for one of its ``negative_questions``, nor for a question closer
to one of them than to any of the entry's own phrasings ("南校园图书馆几点开门？" is not what 图书馆简介 answers).

Closeness is measured the way the answering searcher sees text: with a dense encoder (dense and hybrid modes) the
cosine of the question's vector with each text's; else (sparse) the share of the question's character bigrams
(words for Latin text) found in each text, the entry's document counting as its own text. The rule is relative,
so a negative cannot block questions about the entry's own subject; with the lexical measure a question must also
share at least ``min_similarity`` with the negative.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bot.chat.offers import squeeze
from bot.config.settings import KnowledgeSettings, default_of
from bot.knowledge.entries import Entry
from bot.search.base import Hit, ModeSearcher, dense_leaf

_LATIN_WORD = re.compile(r"[a-z0-9]+")
VECTOR_CACHE = 4096  # texts of negatives and phrasings whose vectors are kept


def grams(text: str) -> frozenset[str]:
    """Character bigrams of the CJK text and the Latin words of ``text`` (squeezed)."""
    lower = text.lower()
    words = set(_LATIN_WORD.findall(lower))
    cjk = squeeze(_LATIN_WORD.sub(" ", lower))
    pairs = {cjk[i : i + 2] for i in range(len(cjk) - 1)} or ({cjk} if cjk else set())
    return frozenset(words | pairs)


def lexical(question: str, texts: Sequence[str]) -> list[float]:
    """The share of the question's bigrams (and Latin words) found in each text, in [0, 1]."""
    asked = grams(question)
    return [len(asked & grams(text)) / len(asked) if asked else 0.0 for text in texts]


class DenseCloseness:
    """Cosines of a question with texts through a searcher's encoder (text vectors cached)."""

    def __init__(self, query_vector: Callable[[str], Any], embed: Callable[[Sequence[str]], Any]):
        self.query_vector = query_vector
        self.embed = embed
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __call__(self, question: str, texts: Sequence[str]) -> list[float] | None:
        """The cosines, or None when the question has no vector (the lexical measure decides then)."""
        vector = self.query_vector(question)
        if vector is None:
            return None
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            rows = np.asarray(self.embed(missing), dtype=np.float32)
            with self._lock:
                if len(self._vectors) > VECTOR_CACHE:
                    self._vectors.clear()
                self._vectors.update(zip(missing, rows))
        with self._lock:
            return [float(self._vectors[t] @ vector) for t in texts]


class NegativeExamples:
    """Drops hits whose entry has a negative question closer to the message than the entry's own phrasings."""

    def __init__(self, min_similarity: float = default_of(KnowledgeSettings, "negative_similarity")):
        self.min_similarity = min_similarity
        self._entries: Sequence[Entry] | None = None  # the loaded knowledge _by_id was made from
        self._by_id: dict[str, Entry] = {}
        self._dense: dict[object, DenseCloseness] = {}  # by the index that holds the vectors

    def _refresh(self, entries: Sequence[Entry]) -> None:
        if entries is not self._entries:  # the loaded knowledge changed: a new list object
            self._by_id = {e.id: e for e in entries if e.negative_questions}
            self._entries = entries

    def blocks(self, question: str, entry: Entry, searcher: ModeSearcher | None = None) -> bool:
        """True when ``question`` is closer to one of ``entry``'s negatives than to any of its phrasings."""
        texts = [*entry.negative_questions, *entry.phrasings]
        count = len(entry.negative_questions)
        dense = self._dense_measure(searcher)
        sims = dense(question, texts) if dense is not None else None
        floor = -1.0
        if sims is None:  # words only: the document counts as the entry's own text too
            sims, floor = lexical(question, [*texts, entry.text]), self.min_similarity
        worst = max(sims[:count])
        return worst >= floor and worst > max(sims[count:])

    def _dense_measure(self, searcher: ModeSearcher | None) -> DenseCloseness | None:
        # keyed by the index that holds the vectors: a served searcher is a new object on every request
        dense = dense_leaf(searcher) if searcher is not None else None
        if dense is None:
            return None
        if dense not in self._dense:
            self._dense[dense] = DenseCloseness(dense.query_vector, dense.encoder.embed_questions)
        return self._dense[dense]

    def filter(
        self, question: str, hits: Sequence[Hit], entries: Sequence[Entry], searcher: ModeSearcher | None = None
    ) -> list[Hit]:
        """``hits`` without those the question must not get (entries as loaded now, by id)."""
        self._refresh(entries)
        if not self._by_id:
            return list(hits)
        return [
            h
            for h in hits
            if h.entry.id not in self._by_id or not self.blocks(question, self._by_id[h.entry.id], searcher)
        ]
