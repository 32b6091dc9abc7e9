"""Base of encoders whose vectors are slow or paid for: only texts not seen before are encoded, in batches."""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bot.errors import SearchBackendError
from bot.search.encoders.base import DOCUMENT, QUESTION, Encoder, has_words
from bot.search.encoders.cache import EmbeddingCache, cache_key


class CachedEncoder(Encoder):
    """Vectors come from the on-disk cache when known; the rest are encoded ``batch_size`` at a time and stored.

    A word-less text ("", punctuation, emoji only) gets a zero row and is never encoded: it carries nothing
    to retrieve by, and FaissSearcher answers a word-less question with no hits. A user question
    (:meth:`embed_query`) reads the cache but is not stored: questions are unbounded and rarely repeat.
    ``encoded`` counts the texts actually encoded, so re-encoding is observable. With ``workers`` above one, the
    batches of an index's texts are encoded that many at a time, each on its own thread (a model that is safe to
    call from several threads at once; a user question is always encoded on the caller's thread alone).
    """

    def __init__(self, cache: EmbeddingCache, batch_size: int, dim: int | None = None, workers: int = 1):
        self.cache = cache
        self.batch_size = max(1, batch_size)
        self.workers = max(1, workers)
        self.encoded = 0
        self._dim = dim
        self._count_lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector size (an encoder that does not know it yet encodes one probe text to find out)."""
        if self._dim is None:
            self._embed(["dimension probe"], DOCUMENT, store=True)
            assert self._dim is not None  # set by _check_dim while embedding the probe
        return self._dim

    @abstractmethod
    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        """Unit float32 rows for ``texts`` (each has words) in ``role`` (QUESTION or DOCUMENT)."""

    def _cache_role(self, role: str) -> str:
        """The role part of the cache key (an encoder without roles uses one for both)."""
        return role

    def _check_dim(self, size: int) -> None:
        if self._dim is None:
            self._dim = size
        elif size != self._dim:
            raise SearchBackendError(
                f"the {self.name} encoder returned {size}-dimensional vectors where earlier ones "
                f"had {self._dim}; the model changed under the same name: rename it in "
                f"config.yaml or delete {self.cache.path}"
            )

    def _embed(self, texts: Sequence[str], role: str, store: bool) -> np.ndarray:
        texts = list(texts)
        signature, cache_role = self.signature(), self._cache_role(role)
        wanted = {i: cache_key(signature, cache_role, t) for i, t in enumerate(texts) if has_words(t)}
        found = self.cache.get_many(wanted.values(), self._dim, touch=store)
        if found:
            self._check_dim(len(next(iter(found.values()))))
        by_key = {k: texts[i] for i, k in wanted.items()}
        missing = [k for k in dict.fromkeys(wanted.values()) if k not in found]
        batches = [missing[start : start + self.batch_size] for start in range(0, len(missing), self.batch_size)]
        for batch, vectors in zip(batches, self._encoded([[by_key[k] for k in b] for b in batches], role, store)):
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(batch):
                raise SearchBackendError(
                    f"the {self.name} encoder returned {vectors.shape[0] if vectors.ndim else 0} "
                    f"vectors for {len(batch)} texts"
                )
            self._check_dim(vectors.shape[1])
            with self._count_lock:
                self.encoded += len(batch)
            fresh = dict(zip(batch, vectors))
            if store:
                self.cache.put_many(fresh)
            found.update(fresh)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, key in wanted.items():
            out[i] = found[key]
        return out

    def _encoded(self, batches: list[list[str]], role: str, bulk: bool) -> Iterator[np.ndarray]:
        """Each batch's vectors, in order: ``workers`` batches at a time for an index's texts (``bulk``), else one
        after the other on this thread."""
        if not bulk or self.workers < 2 or len(batches) < 2:
            yield from (self._encode(batch, role) for batch in batches)
            return
        with ThreadPoolExecutor(min(self.workers, len(batches)), thread_name_prefix=f"kbbot-{self.name}") as pool:
            yield from pool.map(lambda batch: self._encode(batch, role), batches)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document rows (zero for word-less texts); cached texts are not encoded again."""
        return self._embed(texts, DOCUMENT, store=True)

    def embed_questions(self, texts: Sequence[str]) -> np.ndarray:
        """Question rows (zero for word-less texts); cached texts are not encoded again."""
        return self._embed(texts, QUESTION, store=True)

    def encode_questions(self, texts: Sequence[str]) -> np.ndarray:
        """Question rows for many texts at once, read from the cache when there but not stored (visitors' questions:
        their own store keeps them, bot/conversations/topics.py)."""
        return self._embed(texts, QUESTION, store=False)

    def embed_query(self, text: str) -> np.ndarray:
        """The same vector as ``embed_questions([text])[0]``, read from the cache when there but not stored."""
        return self._embed([text], QUESTION, store=False)[0]
