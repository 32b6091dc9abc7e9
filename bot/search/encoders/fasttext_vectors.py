"""The fastText encoder's vectors: a loaded model's word vectors (out-of-vocabulary words through their n-grams,
unseen n-grams given stable pseudo-random rows) and SIF sentence vectors with the common direction removed. Mixed
into :class:`bot.search.encoders.fasttext_encoder.FastTextEncoder`, which loads, trains and swaps the model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from bot.search.encoders.base import normalize_rows
from bot.search.encoders.fasttext_training import FastTextParams

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WORD_CACHE = 200_000  # word -> vector memo; bounded so a long-running bot does not grow without limit


class FastTextVectors:
    """Word and sentence vectors of the loaded model (the attributes below are the encoder's)."""

    pretrained: Any
    params: FastTextParams
    sif_a: float
    _model: Any | None
    _model_id: str | None
    _empty: bool
    _short_ngrams: bool
    _trained_rows: set[int] | None
    _row_norm: float
    _output: np.ndarray | None
    _word_ids: dict[str, int]
    _common: np.ndarray | None
    _prob: dict[str, float]
    _words: dict[str, np.ndarray | None]

    @property
    def dim(self) -> int:
        """Vector size."""
        raise NotImplementedError

    def _ensure(self) -> None:
        raise NotImplementedError

    def _set_model(self, model, model_id: str) -> None:
        words, counts = model.get_words(include_freq=True)
        total = float(sum(counts)) or 1.0
        self._model, self._model_id, self._empty = model, model_id, False
        self._short_ngrams = model.f.getArgs().maxn <= 2
        self._prob = {w: c / total for w, c in zip(words, counts)}
        self._words = {}
        use_output = self.pretrained is None and self.params.output_vectors
        self._output = model.get_output_matrix() if use_output else None
        self._word_ids = {w: i for i, w in enumerate(words)} if use_output else {}
        # Rows of a model trained here that training touched; a pretrained model's rows all count as trained.
        self._trained_rows = None if self.pretrained else {i for w in words for i in model.get_subwords(w)[1].tolist()}
        sample = sorted(self._trained_rows or [])[-1000:]  # n-gram rows sit after the word rows
        self._row_norm = float(np.mean([np.linalg.norm(model.get_input_vector(i)) for i in sample])) if sample else 1.0

    def _oov_vector(self, word: str) -> np.ndarray | None:
        """Mean over the word's character n-grams: trained rows as they are, untouched rows replaced.

        fastText leaves rows that training never touched at their initial values (mostly zero), so a
        word of unseen characters would vanish. Instead each such n-gram gets a fixed pseudo-random
        vector (seeded by the n-gram, scaled like a trained row): unrelated unseen words stay near
        orthogonal while texts sharing unseen characters still match.
        """
        assert self._model is not None  # only called with a loaded model (via embed_tokens)
        if self._trained_rows is None:
            return self._model.get_word_vector(word)
        subwords, rows = self._model.get_subwords(word)
        vecs = [
            self._model.get_input_vector(i) if i in self._trained_rows else self._ngram_vector(sw)
            for sw, i in zip(subwords, rows.tolist())
        ]
        return np.mean(vecs, axis=0) if vecs else None

    def _ngram_vector(self, ngram: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(ngram.encode("utf-8")).digest()[:8], "little")
        vec = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return vec * (self._row_norm / float(np.linalg.norm(vec)))

    def _word_vector(self, word: str) -> np.ndarray | None:
        if word in self._words:
            return self._words[word]
        if word in self._prob:
            assert self._model is not None  # _prob holds words only while a model is loaded
            vec = self._model.get_word_vector(word)
            if self._output is not None:
                vec = vec + self._output[self._word_ids[word]]
        elif self._short_ngrams and not _CJK.search(word):
            # 1-2 character n-grams mean something for Chinese, nothing for an unknown Latin word:
            # "qwxzv" would otherwise land next to whatever English the knowledge holds.
            vec = None
        else:
            vec = self._oov_vector(word)
        if len(self._words) >= WORD_CACHE:
            self._words.clear()
        self._words[word] = vec
        return vec

    def embed_tokens(self, tokens: Sequence[str]) -> np.ndarray:
        """SIF weight a/(a+p(w)) per token (p=0 for unseen words, so weight 1), weighted sum, unit length."""
        self._ensure()
        out = np.zeros(self.dim, dtype=np.float32)
        if self._model is None:
            return out
        for tok in tokens:
            vec = self._word_vector(tok)
            if vec is not None:
                out += (self.sif_a / (self.sif_a + self._prob.get(tok, 0.0))) * vec
        if self._common is not None and out.any():
            out = normalize_rows(out[None, :])[0]
            out -= float(out @ self._common) * self._common
        return normalize_rows(out[None, :])[0]

    def common_direction(self, corpus: Sequence[Sequence[str]]) -> np.ndarray | None:
        """SIF's common component: the first singular vector of the corpus' sentence vectors.

        fastText trained on a small knowledge base gives every word a large shared direction, which
        makes all sentences look alike (cosine near 1); removing it restores the contrast.
        """
        self._common = None
        rows = np.vstack([self.embed_tokens(tokens) for tokens in corpus]) if corpus else None
        if rows is None or not rows.any():
            return None
        return np.linalg.svd(rows, full_matrices=False)[2][0].astype(np.float32)
