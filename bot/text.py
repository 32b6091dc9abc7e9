"""The one tokenizer every searcher uses: jieba search-mode cut over normalised text."""

from __future__ import annotations

import hashlib
import logging
import threading
import unicodedata
from pathlib import Path
from typing import Iterable

import jieba

jieba.setLogLevel(logging.WARNING)

# Bump when the cutting rules change, so on-disk indexes built with old tokens are rebuilt.
TOKENIZER_VERSION = "1"


def normalize(text: str) -> str:
    """Full-width to half-width (NFKC), lower-case, and control characters to spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)


def is_word(token: str) -> bool:
    """True when a token holds a letter, digit or CJK character (punctuation-only tokens are dropped)."""
    return any(ch.isalnum() for ch in token)


class Tokenizer:
    """jieba search-mode tokenizer with the knowledge's keywords (and an optional user dictionary) added."""

    def __init__(self, user_dict: str | Path | None = None, cache_dir: str | Path | None = None):
        self._jieba = jieba.Tokenizer()
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            self._jieba.tmp_dir = str(cache_dir)
        self._user_dict = Path(user_dict) if user_dict else None
        self._added: set[str] = set()
        self._lock = threading.Lock()
        self._ready = False

    def _load(self) -> None:
        # jieba reads its 5 MB dictionary on first use; done lazily so importing the bot is cheap.
        with self._lock:
            if self._ready:
                return
            self._jieba.initialize()
            if self._user_dict is not None:
                if not self._user_dict.is_file():
                    from bot.errors import ConfigError

                    raise ConfigError(f"knowledge.user_dict points to {self._user_dict}, which does not exist")
                self._jieba.load_userdict(str(self._user_dict))
            self._ready = True

    def add_words(self, words: Iterable[str]) -> None:
        """Teach jieba domain terms (the metadata keywords) so they are kept whole."""
        self._load()
        for word in words:
            word = normalize(word).strip()
            if word and word not in self._added and " " not in word:
                self._jieba.add_word(word, freq=max(self._jieba.suggest_freq(word, False), 10))
                self._added.add(word)

    def tokenize(self, text: str) -> list[str]:
        """Cut text into lower-case word tokens, punctuation dropped, English words and numbers kept."""
        self._load()
        return [tok for tok in (t.strip() for t in self._jieba.cut_for_search(normalize(text))) if tok and is_word(tok)]

    def signature(self) -> str:
        """Identifies the cutting rules (version, user dictionary), so indexes rebuild when they change."""
        h = hashlib.sha256(TOKENIZER_VERSION.encode())
        if self._user_dict is not None and self._user_dict.is_file():
            h.update(self._user_dict.read_bytes())
        return h.hexdigest()[:12]
