"""The Encoder role: texts to unit-length vectors whose inner product is their cosine similarity."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from bot.knowledge.entries import Entry
from bot.search.tokenizer import is_word, normalize

DENSE_HINT = "install the dense extra: pip install 'kbbot[dense]'"

# The two roles of a text. Asymmetric models (e5) prefix them differently; others ignore the role.
QUESTION, DOCUMENT = "question", "document"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise each row in float32; all-zero rows stay zero (no NaN)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def has_words(text: str) -> bool:
    """True when the text holds a letter, digit or CJK character; word-less texts get a zero vector."""
    return is_word(normalize(text))


class Encoder(ABC):
    """Turns texts into unit-length vectors whose inner product is their cosine similarity.

    Two roles: *documents* (the entry text that is indexed) and *questions* (a user's question, and an
    entry's stored question, which match each other symmetrically). Models without roles use one
    embedding for both.
    """

    name: str = "encoder"
    # Texts per batch for callers that report progress between calls (slow encoders set it lower).
    batch_size: int = 256
    # Batches of an index's texts encoded at once (each on its own thread), when the model allows it.
    workers: int = 1
    # A first build encodes every entry's questions before any passage, and searches them meanwhile (slow models).
    questions_first: bool = False

    @abstractmethod
    def signature(self) -> str:
        """Identifies the model behind the vectors; when it changes every stored vector is stale."""

    def prepare(self, entries: Sequence[Entry]) -> str | None:
        """Make the model ready for ``entries``; returns why the model changed (all vectors stale) or None."""
        return None

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One unit (or zero) float32 row per document text; (0, dim) for no texts."""

    def embed_questions(self, texts: Sequence[str]) -> np.ndarray:
        """One unit (or zero) float32 row per question (user questions and entries' stored questions)."""
        return self.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one user question (a zero vector when it carries nothing the model knows)."""
        return self.embed_questions([text])[0]
