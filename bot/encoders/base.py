"""The Encoder role: texts to unit-length vectors whose inner product is their cosine similarity."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from bot.knowledge import Entry

DENSE_HINT = "install the dense extra: pip install 'kbbot[dense]'"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise each row in float32; all-zero rows stay zero (no NaN)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class Encoder(ABC):
    """Turns texts into unit-length vectors whose inner product is their cosine similarity."""

    name: str = "encoder"

    @abstractmethod
    def signature(self) -> str:
        """Identifies the model behind the vectors; when it changes every stored vector is stale."""

    def prepare(self, entries: Sequence[Entry]) -> str | None:
        """Make the model ready for ``entries``; returns why the model changed (all vectors stale) or None."""
        return None

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One unit (or zero) float32 row per text."""

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one question (a zero vector when it carries nothing the model knows)."""
        return self.embed_documents([text])[0]
