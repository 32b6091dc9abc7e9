"""A staging index: a mode's searcher rebuilt in a scratch folder over entries not yet published.

Shaped like the live one and sharing what costs to make: the tokenizer, the synonyms and the encoder.

Elasticsearch stands in as embedded tantivy and the search cluster's vectors as FAISS (same fields, weights,
template and encoder), so a replay never writes to a shared server. Vectors of unchanged texts come from the
encoder's embedding cache; only new or edited texts are encoded. ``questions`` hands the dense side question
vectors computed beforehand (a replay's whole batch at once), by the text the searcher asks for. Nothing is taught
to the shared tokenizer or synonyms: a new entry's keywords and aliases are not in jieba's dictionary until the
edit is published and the live index loads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from bot.knowledge.entries import Entry
from bot.search.agreeing import AgreeingSearcher
from bot.search.base import ModeSearcher, Searcher
from bot.search.dense_scoring import DenseScoring
from bot.search.encoders import Encoder
from bot.search.hybrid import HybridSearcher
from bot.search.passages import Passages, PassageSearcher
from bot.search.relevance import SparseSearcher
from bot.search.serving import ServedSearcher
from bot.search.tantivy_searcher import TantivySearcher

FLAT = 10**9  # a staging FAISS index stays flat (exact); it is searched a few thousand times, then dropped


class KnownQuestions(Encoder):
    """An encoder that answers ``embed_query`` from vectors computed beforehand.

    Everything else (and any other question) goes to the encoder it wraps, whose signature it keeps.
    """

    def __init__(self, inner: Encoder, known: Mapping[str, np.ndarray]):
        self.inner = inner
        self.known = dict(known)
        self.name, self.batch_size, self.workers = inner.name, inner.batch_size, inner.workers

    @property
    def dim(self) -> int:
        """The wrapped encoder's vector size."""
        return int(self.inner.dim)  # type: ignore[attr-defined]  # every concrete encoder has one

    def signature(self) -> str:
        """The wrapped encoder's signature: its cached vectors stay valid."""
        return self.inner.signature()

    def prepare(self, entries: Sequence[Entry]) -> str | None:
        """Nothing to train: a staging index uses the live model as it is."""
        return None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped encoder's document rows."""
        return self.inner.embed_documents(texts)

    def embed_questions(self, texts: Sequence[str]) -> np.ndarray:
        """The wrapped encoder's question rows."""
        return self.inner.embed_questions(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector computed beforehand, else the wrapped encoder's."""
        found = self.known.get(text)
        return found if found is not None else self.inner.embed_query(text)


def staged_copy(live: ModeSearcher, folder: Path, questions: Mapping[str, np.ndarray] | None = None) -> ModeSearcher:
    """A searcher shaped like ``live`` with empty indexes under ``folder`` (fill it with :func:`fill`)."""
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(live, ServedSearcher):
        if live.target is None:
            raise ValueError("nothing serves this mode yet: no staging index can be shaped after it")
        return staged_copy(live.target, folder, questions)
    if isinstance(live, PassageSearcher):
        return PassageSearcher(staged_copy(live.inner, folder, questions), live.passages)
    if isinstance(live, AgreeingSearcher):  # re-scored by agreement with the staged sparse index's statistics
        inner = staged_copy(live.inner, folder, questions)
        words = [leaf for leaf in inner.leaves() if isinstance(leaf, SparseSearcher)]
        # a dense mode's words are in a sparse index of its own (not one of the inner searcher's)
        sparse = words[0] if words else staged_copy(live.sparse, folder, questions)
        assert isinstance(sparse, SparseSearcher)
        return AgreeingSearcher(inner, sparse, live.weights, live.languages)
    if isinstance(live, HybridSearcher):
        sparse = staged_copy(live.sparse, folder, questions)
        dense = staged_copy(live.dense, folder, questions)  # type: ignore[arg-type]  # a dense Searcher
        assert isinstance(sparse, SparseSearcher)
        return HybridSearcher(
            sparse,
            dense,  # type: ignore[arg-type]
            live.sparse_weight,
            live.candidates,
            live.language_aware,
            live.translated_weight,
        )
    if isinstance(live, SparseSearcher):
        copy = TantivySearcher(folder / "tantivy", live.tokenizer, getattr(live, "field_weights", {}), private=True)
        copy.synonyms, copy.translator, copy.homophones = live.synonyms, live.translator, live.homophones
        copy.share_caches(live)
        if isinstance(live, TantivySearcher):  # its entries' tokens, so filling the copy cuts only new texts
            live.lend_tokens(copy.path)
        return copy
    if isinstance(live, DenseScoring):  # FAISS or the search cluster's vectors
        from bot.search.faiss_searcher import FaissSearcher

        wrapped = KnownQuestions(live.encoder, questions) if questions else live.encoder
        dense = FaissSearcher(folder / "faiss", wrapped, live.embed_template, live.question_weight, FLAT)
        dense.synonyms, dense.synonym_mode = live.synonyms, live.synonym_mode
        return dense
    raise ValueError(f"no staging index for a {type(live).__name__}")


def prepare(searcher: ModeSearcher, questions: Mapping[str, np.ndarray]) -> int:
    """Find the nearest vectors of every question in ``questions`` at once, in the filled searcher's dense leaf (its
    searches return what they would without: bot/search/faiss_batch.py); how many it prepared."""
    from bot.search.faiss_searcher import FaissSearcher

    vectors = [v for v in questions.values() if np.asarray(v).any()]
    dense = [leaf for leaf in searcher.leaves() if isinstance(leaf, FaissSearcher)]
    return dense[0].prepare_nearest(np.stack(vectors)) if dense and vectors else 0


def fill(searcher: ModeSearcher, entries: Sequence[Entry], passages: Passages | None = None) -> None:
    """Index ``entries`` (cut into passages as the live index cuts them) in each of the staging searcher's leaves."""
    units = passages.expand(entries) if passages is not None else list(entries)
    for leaf in searcher.leaves():
        assert isinstance(leaf, Searcher)
        leaf.upsert(units)
