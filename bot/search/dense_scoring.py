"""What every dense index shares, wherever its vectors live (a FAISS file, the search cluster): which texts of an
entry get a vector, the question's vector, and how cosines become the dense relevance the thresholds compare.

One copy for both stores, so the same thresholds hold for either (BENCHMARKS.md "Cluster hybrid").
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np

from bot.errors import ConfigError
from bot.knowledge.entries import Entry
from bot.search.base import Hit, Progress
from bot.search.encoders import Encoder
from bot.search.encoders.base import DOCUMENT, QUESTION
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import is_word, normalize

TEMPLATE_KEY = "retrieval.dense.embed_template"
BATCH = 256  # entries encoded per progress tick
WORKER_BATCHES = 4  # batches per encoding worker in one call (and progress tick) when an encoder has several
RECENT_QUERIES = 256  # question vectors remembered (a model change resets the searcher, hence them too)


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


class Cosines(NamedTuple):
    """An entry's best question cosine (over its query and alternative questions), its passage cosine, and the
    alternative question that gave the best question cosine ("" when it was the query)."""

    question: float
    passage: float
    matched_question: str = ""


def check_template(embed_template: str) -> None:
    """Raise ConfigError naming the fields when ``embed_template`` cannot be filled."""
    try:
        embed_template.format(query="", document="", metadata="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"{TEMPLATE_KEY} {embed_template!r} is invalid ({exc}); use the fields {{query}}, {{document}} and {{metadata}}"
        ) from None


def best_cosines(units: Iterable[tuple[str, np.ndarray]], vector: np.ndarray, phrasings: Sequence[str]) -> Cosines:
    """The :class:`Cosines` of one entry from its (role, vector) units, question vectors in the order of
    ``phrasings`` (as :meth:`DenseScoring.unit_texts` makes them)."""
    best = {QUESTION: -1.0, DOCUMENT: -1.0}
    nth, matched = 0, 0
    for role, stored in units:
        stored = np.asarray(stored, dtype=np.float32)
        cosine = float(stored @ vector) if stored.size else 0.0  # empty: a word-less text's zero vector
        if cosine > best[role]:
            best[role] = cosine
            matched = nth if role == QUESTION else matched
        nth += role == QUESTION
    return Cosines(best[QUESTION], best[DOCUMENT], phrasings[matched] if 0 < matched < len(phrasings) else "")


def encode_units(
    encoder: Encoder,
    unit_texts: Callable[[Entry], list[tuple[str, str]]],
    entries: Sequence[Entry],
    progress: Progress | None,
) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Vectors of every unit of ``entries`` (rows in order) and each row's (entry id, role): questions and passages
    each in batches of their role, one progress tick per entry."""
    units = [(e.id, role, text) for e in entries for role, text in unit_texts(e)]
    rows: list[np.ndarray | None] = [None] * len(units)
    # Slow encoders report progress more often. Several workers get several batches each per call: a call ends when
    # its last batch does, so with one batch per worker the others would wait for the slowest at every call.
    workers = max(1, getattr(encoder, "workers", 1))
    step = max(1, getattr(encoder, "batch_size", BATCH)) * (workers * WORKER_BATCHES if workers > 1 else 1)
    for role, embed in ((QUESTION, encoder.embed_questions), (DOCUMENT, encoder.embed_documents)):
        # Longest first: the batches of a call then cost about the same, and the workers finish a call together
        # instead of one waiting for the other's long batch (the idle tail was ~10 % of a first e5 build).
        picked = sorted((i for i, u in enumerate(units) if u[1] == role), key=lambda i: -len(units[i][2]))
        for start in range(0, len(picked), step):
            batch = picked[start : start + step]
            vectors = np.asarray(embed([units[i][2] for i in batch]), dtype=np.float32)
            for i, v in zip(batch, vectors):
                rows[i] = v
            if progress and role == DOCUMENT:  # one tick per entry: its passage is the slow part
                progress(len(batch))
    filled = [r for r in rows if r is not None]
    assert len(filled) == len(rows)  # every unit is a question or a document
    return np.ascontiguousarray(np.vstack(filled)), [(u[0], u[1]) for u in units]


class DenseScoring:
    """The scoring half of a dense index: its encoder, template and question weight; subclasses store vectors."""

    name: str
    system: str
    synonyms: Synonyms | None = None  # set by the factory: questions reach the encoder with canonical synonyms
    synonym_mode = "substitute"

    def _init_scoring(self, encoder: Encoder, embed_template: str, question_weight: float) -> None:
        check_template(embed_template)
        self.encoder = encoder
        self.embed_template = embed_template
        self.question_weight = question_weight
        self.system = f"dense-{encoder.name}"
        self._recent_lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray | None] = OrderedDict()

    def embed_text(self, entry: Entry) -> str:
        """What is embedded as an entry's passage: the template filled with its fields."""
        return self.embed_template.format(query=entry.query, document=entry.text, metadata=" ".join(entry.metadata))

    def unit_texts(self, entry: Entry) -> list[tuple[str, str]]:
        """(role, text) of each vector an entry gets: its query, each alternative question, then its passage."""
        return [*((QUESTION, text) for text in entry.phrasings), (DOCUMENT, self.embed_text(entry))]

    def template_hash(self) -> str:
        """A short hash of the template (part of the index's signature)."""
        return hashlib.sha256(self.embed_template.encode()).hexdigest()[:8]

    def query_vector(self, query: str) -> np.ndarray | None:
        """The question's vector, or None for a word-less question or one the model cannot place.

        The last few are remembered: hybrid asks twice per question, and e5 takes ~10 ms per question.
        """
        if self.synonyms is not None:
            query = self.synonyms.canonical(query, self.synonym_mode)
        if not is_word(normalize(query)):
            return None
        with self._recent_lock:
            if query in self._recent:
                self._recent.move_to_end(query)
                return self._recent[query]
        encoded = np.asarray(self.encoder.embed_query(query), dtype=np.float32)
        vector = encoded if encoded.any() else None
        with self._recent_lock:
            self._recent[query] = vector
            while len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        return vector

    def forget_queries(self) -> None:
        """Drop the remembered question vectors (benchmarks time each system with its own encoding)."""
        with self._recent_lock:
            self._recent.clear()

    def relevance(self, question_cosine: float, passage_cosine: float) -> float:
        """The dense relevance: the weighted cosines, clipped to [0, 1]."""
        w = self.question_weight
        return _clip(w * question_cosine + (1.0 - w) * passage_cosine)

    def hit(self, entry: Entry, cosines: Cosines) -> Hit:
        """A hit for ``entry`` from its cosines (and the alternative question that matched, if one did)."""
        relevance = self.relevance(cosines.question, cosines.passage)
        return Hit(
            entry,
            relevance,
            relevance,
            self.name,
            {"question": cosines.question, "passage": cosines.passage},
            matched_question=cosines.matched_question,
        )
