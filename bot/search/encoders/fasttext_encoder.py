"""The fastText sentence encoder: SIF-weighted word vectors from a pretrained .bin or a model trained on the knowledge.

This module owns the model's lifecycle (load, train in a staging folder, adopt); the vectors are computed in
``fasttext_vectors.py``, the model's files are read and checked in ``fasttext_files.py``, and the skipgram training
and its parameters live in ``fasttext_training.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bot.config.settings import FastTextSettings, default_of
from bot.errors import ConfigError, SearchBackendError
from bot.fsutil import commit_file, temp_beside, write_json_atomic
from bot.knowledge.entries import Entry, fingerprint
from bot.search.encoders.base import Encoder
from bot.search.encoders.fasttext_files import MODEL_FILE, MODEL_STATE, ModelCheck, read_state
from bot.search.encoders.fasttext_training import (
    FastTextParams,
    _import_fasttext,
    _train_skipgram,
)
from bot.search.encoders.fasttext_vectors import FastTextVectors
from bot.search.integrity import file_digest
from bot.search.tokenizer import PARALLEL_MIN, Tokenizer

log = logging.getLogger(__name__)

PRETRAINED_KEY = "retrieval.dense.fasttext.pretrained"
# In-memory model fields: what adopt() swaps in from a copy trained in a staging folder.
_MODEL_FIELDS = (
    "_model",
    "_model_id",
    "_empty",
    "_short_ngrams",
    "_trained_rows",
    "_row_norm",
    "_output",
    "_word_ids",
    "_common",
    "_prob",
    "_words",
)


class FastTextEncoder(FastTextVectors, Encoder):
    """SIF-weighted mean of fastText word vectors over jieba tokens, L2-normalised.

    Without ``pretrained`` a skipgram model is trained on the knowledge in :meth:`prepare` and cached in
    ``model_dir``; it is retrained only when the knowledge fingerprint (or a training parameter) changes,
    and with ``retrain_after`` > 0 only once that share of the entries changed (new ones use subwords).

    A model trained here sees about ``params.target_tokens`` tokens (more epochs on a small knowledge base), and
    with ``params.output_vectors`` an in-vocabulary word's vector is its input vector plus its output (context)
    vector; words known only through their n-grams keep the input side, which is all n-grams have. A pretrained
    model always uses input vectors only: its output side was trained for another objective and corpus, and
    was never measured here.
    """

    name = "fasttext"
    # Texts per embed call while indexing: a batch this large is tokenized by worker processes (tokenize_many), so
    # a re-encode of the whole knowledge neither holds the GIL for jieba (requests wait for it) nor uses one core.
    batch_size = PARALLEL_MIN

    def __init__(
        self,
        tokenizer: Tokenizer,
        model_dir: str | Path,
        pretrained: str | Path | None = None,
        params: FastTextParams | None = None,
        sif_a: float = default_of(FastTextSettings, "sif_a"),
        *,
        retrain_after: float,
    ):
        _import_fasttext()
        self.tokenizer = tokenizer
        self.model_dir = Path(model_dir)
        self.pretrained = Path(pretrained) if pretrained else None
        if self.pretrained is not None and not self.pretrained.is_file():
            raise ConfigError(
                f"{PRETRAINED_KEY} points to {self.pretrained}, which does not exist; "
                "fix the path or set it to null to train a model on the knowledge"
            )
        self.params = params or FastTextParams()
        self.sif_a = sif_a
        self.retrain_after = retrain_after
        self._lock = threading.RLock()
        self._model: Any | None = None  # a fasttext model (the library has no type hints), None until loaded
        self._model_id: str | None = None
        self._empty = False  # trained on a knowledge base without a single word: every vector is zero
        self._short_ngrams = True
        self._trained_rows: set[int] | None = None
        self._row_norm = 1.0
        self._output: np.ndarray | None = None  # output matrix (word rows) added to word vectors, or None
        self._word_ids: dict[str, int] = {}
        self._common: np.ndarray | None = None  # unit vector removed from every sentence vector (SIF)
        self._prob: dict[str, float] = {}
        self._words: dict[str, np.ndarray | None] = {}
        self._check = ModelCheck()

    @property
    def model_file(self) -> Path:
        """The .bin the vectors come from (pretrained, or the cached model trained on the knowledge)."""
        return self.pretrained or self.model_dir / MODEL_FILE

    @property
    def dim(self) -> int:
        """Vector size."""
        self._ensure()
        return self._model.get_dimension() if self._model is not None else self.params.dim

    def _training_key(self, knowledge: str) -> str:
        blob = json.dumps([asdict(self.params), self.tokenizer.signature(), knowledge], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def signature(self) -> str:
        """The pretrained file's identity, or the key of the trained model (params + knowledge fingerprint)."""
        if self.pretrained is not None:
            st = self.pretrained.stat()
            return f"pretrained:{self.pretrained.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        with self._lock:
            if self._model_id is None:
                state = read_state(self.model_dir)
                return f"trained:{state['key']}" if state else "untrained"
            return f"trained:{self._model_id}"

    # -- model lifecycle -------------------------------------------------
    def prepare(self, entries: Sequence[Entry]) -> str | None:
        """Train (or reuse the cached model) for ``entries``; returns a reason when a new model was trained.

        The cached model is kept while the share of entries added, changed or removed since it was trained
        is at most ``retrain_after`` (0: any change retrains, which re-encodes every entry).
        """
        staged = self.staged(entries)
        if staged is None:
            return None
        reason, copy = staged
        self.adopt(copy)
        return reason

    def _usable(self, state: dict | None, config: str) -> bool:
        """True when a saved model exists, was trained with these settings and its files are intact."""
        return bool(state and state.get("config") == config and self._check.intact(self.model_dir / MODEL_FILE, state))

    def _fresh_enough(self, state: dict, hashes: set[str]) -> bool:
        """True when few enough entries changed since ``state``'s model was trained (``retrain_after``)."""
        changed = len(hashes.symmetric_difference(state.get("hashes", [])))
        return changed <= self.retrain_after * len(state.get("hashes", []))

    def staged(self, entries: Sequence[Entry]) -> tuple[str, FastTextEncoder] | None:
        """(why, a copy trained on ``entries`` in a staging folder) when the model must be retrained, else None
        (the current model is loaded if needed). Training holds no lock: this encoder keeps serving until
        :meth:`adopt` swaps the copy in. Same rule as :meth:`prepare` (``retrain_after``)."""
        if self.pretrained is not None:
            self._ensure()
            return None
        config = self._training_key("")
        hashes = {e.content_hash for e in entries}
        with self._lock:
            state = read_state(self.model_dir)
            usable = self._usable(state, config)
            reason = (
                "fastText model trained"
                if not state
                else "fastText settings changed: model retrained"
                if not usable
                else "knowledge changed: fastText model retrained"
            )
            if usable:
                assert state is not None  # usable implies a saved state
                if self._fresh_enough(state, hashes):
                    try:
                        if self._model_id != state["key"]:
                            self._load_trained(state)
                        return None
                    except Exception as exc:
                        log.warning("fastText model in %s cannot be loaded (%s); retraining it", self.model_dir, exc)
                        reason = f"fastText model unreadable ({exc}): model retrained"
        folder = self.model_dir / f".kbbot-ft-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        copy = FastTextEncoder(self.tokenizer, folder, None, self.params, self.sif_a, retrain_after=self.retrain_after)
        try:
            copy._train(entries, copy._training_key(fingerprint(entries)), config, sorted(hashes))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return reason, copy

    def adopt(self, other: FastTextEncoder) -> None:
        """Make ``other``'s model (trained by :meth:`staged`) this encoder's: files moved in, memory swapped, the
        staging folder removed. A crash in between leaves no state file, so the next sync retrains."""
        with self._lock:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            (self.model_dir / MODEL_STATE).unlink(missing_ok=True)
            if (other.model_dir / MODEL_FILE).is_file():
                os.replace(other.model_dir / MODEL_FILE, self.model_dir / MODEL_FILE)
            os.replace(other.model_dir / MODEL_STATE, self.model_dir / MODEL_STATE)
            for name in _MODEL_FIELDS:
                setattr(self, name, getattr(other, name))
            self._check = ModelCheck()
        shutil.rmtree(other.model_dir, ignore_errors=True)

    def _ensure(self) -> None:
        with self._lock:
            if self._model is not None or self._empty:
                return
            if self.pretrained is not None:
                self._set_model(_import_fasttext().load_model(str(self.pretrained)), self.signature())
                return
            state = read_state(self.model_dir)
            if state is None or not self._check.intact(self.model_dir / MODEL_FILE, state):
                raise SearchBackendError(f"no fastText model in {self.model_dir} yet; sync the index first")
            self._load_trained(state)

    def _load_trained(self, state: dict) -> None:
        if state.get("empty"):
            self._model, self._model_id, self._empty, self._prob, self._words = None, state["key"], True, {}, {}
            return
        self._set_model(_import_fasttext().load_model(str(self.model_dir / MODEL_FILE)), state["key"])
        common = state.get("common")
        self._common = np.array(common, dtype=np.float32) if common else None

    def training_lines(self, entries: Sequence[Entry]) -> list[str]:
        """The corpus: one line of jieba tokens per entry (title, alternative questions, keywords and document)."""
        texts = [f"{' '.join(e.phrasings)} {' '.join(e.metadata)} {e.text}" for e in entries]
        return [" ".join(tokens) for tokens in self.tokenizer.tokenize_many(texts) if tokens]

    def _train(self, entries: Sequence[Entry], key: str, config: str, hashes: list[str]) -> None:
        self.model_dir.mkdir(parents=True, exist_ok=True)
        lines = self.training_lines(entries)
        if not lines:
            # fastText refuses an empty vocabulary; an empty knowledge base simply has no vectors.
            self._model, self._model_id, self._empty, self._prob, self._words = None, key, True, {}, {}
            write_json_atomic(
                self.model_dir / MODEL_STATE, {"key": key, "config": config, "hashes": hashes, "empty": True}
            )
            return
        # The epoch budget depends on the corpus, which the training key already covers (knowledge + tokenizer).
        p = dataclasses.replace(self.params, epoch=self.params.epochs_for(sum(len(line.split()) for line in lines)))
        fd, corpus = tempfile.mkstemp(prefix=f".corpus-{os.getpid()}-", suffix=".txt", dir=self.model_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
            tmp = temp_beside(self.model_dir / MODEL_FILE)
            if not _train_skipgram(corpus, p, tmp):
                # NaN: subsampling left no training pairs (a very small corpus); train on every token.
                log.info("fastText found too few words to subsample; training again without subsampling")
                if not _train_skipgram(corpus, dataclasses.replace(p, subsample=1.0), tmp):
                    raise SearchBackendError("fastText training diverged (NaN); lower retrieval.dense.fasttext.lr")
        finally:
            os.unlink(corpus)
        model = _import_fasttext().load_model(str(tmp))
        commit_file(tmp, self.model_dir / MODEL_FILE)
        # The state is written last: a crash before it leaves a model that the next sync retrains.
        self._set_model(model, key)
        self._common = self.common_direction([line.split() for line in lines])
        write_json_atomic(
            self.model_dir / MODEL_STATE,
            {
                "key": key,
                "config": config,
                "params": asdict(self.params),
                "epoch": p.epoch,
                "hashes": hashes,
                "model_size": (self.model_dir / MODEL_FILE).stat().st_size,
                "model_digest": file_digest(self.model_dir / MODEL_FILE),
                "common": None if self._common is None else self._common.tolist(),
            },
        )
        log.info(
            "trained fastText on %d entries (dim %d, %d epochs, %d words)", len(lines), p.dim, p.epoch, len(self._prob)
        )

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text, through the shared jieba tokenizer (worker processes for a large batch)."""
        with self._lock:
            self._ensure()
            rows = [self.embed_tokens(tokens) for tokens in self.tokenizer.tokenize_many(texts)]
            return np.vstack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
