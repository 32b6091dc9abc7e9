"""A tiny deterministic encoder for tests of where vectors are stored: character bigrams hashed into a few buckets
(texts sharing characters get close vectors), and a count of every text it encoded."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

import numpy as np

from bot.search.encoders.base import Encoder, has_words, normalize_rows


class HashEncoder(Encoder):
    """Bag of hashed character bigrams in ``dim`` buckets, L2-normalised; ``encoded`` counts the texts embedded."""

    name = "e5"  # stands in for e5: the thresholds and sparse weight of the e5 system apply

    def __init__(self, dim: int = 32):
        self.dim = dim
        self.encoded = 0

    def signature(self) -> str:
        """The bucket count is the whole model."""
        return f"hash-{self.dim}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text."""
        self.encoded += len(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts):
            if not has_words(text):  # as the real encoders: a word-less text gets a zero vector
                continue
            chars = [c for c in text.lower() if not c.isspace()]
            for gram in [*chars, *("".join(p) for p in itertools.pairwise(chars))]:
                row[int(hashlib.md5(gram.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        return normalize_rows(rows)
