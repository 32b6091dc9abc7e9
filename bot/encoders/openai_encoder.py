"""Sentence vectors from an OpenAI-compatible /v1/embeddings endpoint, cached on disk by text hash."""

from __future__ import annotations

import hashlib
import logging
import zipfile
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from bot.encoders.base import Encoder, normalize_rows
from bot.errors import SearchBackendError

log = logging.getLogger(__name__)



class OpenAIEncoder(Encoder):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint; document vectors are cached on disk by text hash."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str, cache_dir: str | Path,
                 batch_size: int = 64, timeout: float = 30.0, max_retries: int = 2):
        self.base_url, self.model = base_url, model
        self.api_key, self.timeout, self.max_retries = api_key, timeout, max_retries
        self.batch_size = max(1, batch_size)
        self.cache_file = Path(cache_dir) / "embeddings.npz"
        self._lock = threading.RLock()
        self._client = None
        self._cache: dict[str, np.ndarray] | None = None
        self.requests = 0  # embedding calls made, so re-indexing cost is observable

    def signature(self) -> str:
        """Endpoint and model: another model's vectors are not comparable."""
        return f"openai:{self.base_url}:{self.model}"

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\n{text}".encode("utf-8")).hexdigest()[:20]

    def _request(self, texts: list[str]) -> np.ndarray:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key,
                                         timeout=self.timeout, max_retries=self.max_retries)
        try:
            self.requests += 1
            response = self._client.embeddings.create(model=self.model, input=texts)
        except Exception as exc:  # the SDK has many error types; all mean "no vectors", with this advice
            raise SearchBackendError(f"embedding request to {self.base_url} (model {self.model}) failed: {exc}; "
                                     "check retrieval.dense.openai settings and the API key") from exc
        rows = sorted(response.data, key=lambda d: d.index)
        return normalize_rows(np.array([d.embedding for d in rows], dtype=np.float32))

    def _load_cache(self) -> dict[str, np.ndarray]:
        if self._cache is None:
            self._cache = {}
            if self.cache_file.is_file():
                try:
                    with np.load(self.cache_file, allow_pickle=False) as data:
                        self._cache = dict(zip(data["keys"].tolist(), data["vectors"]))
                except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # a truncated .npz
                    log.warning("embedding cache %s unreadable (%s); starting afresh", self.cache_file, exc)
        return self._cache

    def _save_cache(self) -> None:
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_name(f".{self.cache_file.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=np.array(list(self._cache), dtype=str), vectors=np.array(list(self._cache.values())))
        os.replace(tmp, self.cache_file)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Cached vectors for known texts; only the missing ones are requested, in batches."""
        with self._lock:
            cache = self._load_cache()
            keys = [self._key(t) for t in texts]
            missing = list(dict.fromkeys(k for k in keys if k not in cache))
            by_key = dict(zip(keys, texts))
            for i in range(0, len(missing), self.batch_size):
                batch = missing[i:i + self.batch_size]
                cache.update(zip(batch, self._request([by_key[k] for k in batch])))
            if missing:
                self._save_cache()
            return np.vstack([cache[k] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """Questions are not cached on disk: they are unbounded and rarely repeat."""
        with self._lock:
            return self._request([text])[0]
