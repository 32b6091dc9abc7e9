"""The one tokenizer every searcher uses: jieba search-mode cut over normalised text."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import threading
import unicodedata
import warnings
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import jieba

from bot.search.background import child_nice, lower_priority
from bot.search.script import simplified

jieba.setLogLevel(logging.WARNING)

# Bump when the cutting rules change, so on-disk indexes built with old tokens are rebuilt.
TOKENIZER_VERSION = "4"
# tokenize_many() spreads a batch over worker processes from this many texts on (jieba is pure Python and
# holds the GIL; a fresh worker costs ~1 s to load jieba's dictionary, so small batches stay serial).
PARALLEL_MIN = 20_000


def normalize(text: str) -> str:
    """Full-width to half-width (NFKC), lower-case, control characters to spaces, traditional Chinese to simplified."""
    text = unicodedata.normalize("NFKC", text).lower()
    return simplified("".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text))


def is_word(token: str) -> bool:
    """True when a token holds a letter, digit or CJK character (punctuation-only tokens are dropped)."""
    return any(ch.isalnum() for ch in token)


def _inside_latin(left: str, right: str) -> bool:
    """True when a cut between ``left`` and ``right`` falls inside an English word or a number (two Latin letters
    or two digits); between a letter and a digit, as in qwen|2.5, a cut is a word's own boundary."""
    return (
        left.isascii()
        and right.isascii()
        and ((left.isalpha() and right.isalpha()) or (left.isdigit() and right.isdigit()))
    )


def _splits_latin(word: str, start: int, end: int) -> bool:
    """True when ``word[start:end]`` begins or ends inside an English word or a number."""
    return (start > 0 and _inside_latin(word[start - 1], word[start])) or (
        end < len(word) and _inside_latin(word[end - 1], word[end])
    )


def _latin_whole(words: Iterable[str]) -> Iterator[str]:
    """jieba's consecutive words, joined where a cut fell inside an English word or a number."""
    held = ""
    for word in words:
        if held and word and _inside_latin(held[-1], word[0]):
            held += word
            continue
        if held:
            yield held
        held = word
    if held:
        yield held


def is_chinese(token: str) -> bool:
    """True when every character of a non-empty token is a CJK unified ideograph."""
    return bool(token) and all("\u4e00" <= ch <= "\u9fff" for ch in token)


class Tokenizer:
    """jieba search-mode tokenizer with the knowledge's keywords (and an optional user dictionary) added."""

    def __init__(self, user_dict: str | Path | None = None, cache_dir: str | Path | None = None):
        self._jieba = jieba.Tokenizer()
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            self._jieba.tmp_dir = str(cache_dir)
        self._user_dict = Path(user_dict) if user_dict else None
        self._added: set[str] = set()
        self._added_freq: dict[str, int] = {}  # in the order added, so worker processes replay them exactly
        self._inner: dict[str, tuple[str, ...]] = {}  # an added word's Chinese words that search mode leaves out
        self._lock = threading.Lock()
        self._ready = False
        self._pos: Any = None  # jieba.posseg over this tokenizer's dictionary, made on first use
        self._added_key: tuple[int, str] = (0, "")  # (words added, their hash): state_key is asked on every search

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
                inner = self._inner_words(word)
                if inner:
                    self._inner[word] = inner
                freq = max(self._jieba.suggest_freq(word, False), 10)
                self._jieba.add_word(word, freq=freq)
                self._added.add(word)
                self._added_freq[word] = freq

    def _inner_words(self, word: str) -> tuple[str, ...]:
        """The Chinese words a visitor types of ``word`` (cut as if it were not added) that search mode's 2- and
        3-character pieces of it leave out."""
        # Search mode splits a long word only into the 2- and 3-character dictionary words inside it: once
        # 广州校区北校园 is a word, 北 (and 中山大学 in 中山大学广州校区) is no token of the entry, while a
        # visitor's 北校园 is cut 北 + 校园. The word's own search-mode cut, made before it joins the
        # dictionary, gives back what it hides; only Chinese, so a keyword like api_key stays one name.
        if len(word) <= 2:
            return ()
        pieces = {word[i : i + n] for n in (2, 3) for i in range(len(word) - n + 1)}
        emitted = {piece for piece in pieces if self._jieba.FREQ.get(piece)}
        cut = (t for part in self._jieba.cut(word) for t in self._jieba.cut_for_search(part))
        inner = (t for t in cut if t != word and t not in emitted and is_chinese(t))
        return tuple(dict.fromkeys(inner))

    def tokenize(self, text: str) -> list[str]:
        """Cut text into lower-case word tokens, punctuation dropped, English words and numbers kept."""
        self._load()
        return [tok for tok in (t.strip() for t in self._search_cut(normalize(text))) if tok and is_word(tok)]

    def _search_cut(self, text: str) -> Iterator[str]:
        """jieba's search-mode cut (each word, after the 2- and 3-character dictionary words inside it), with no
        cut inside an English word or a number."""
        # jieba's dictionary words match inside English words too: once an alias "esi" is a word, "presidents" is
        # cut pr|esi|dents and matches the alias. An English word stays whole, and none of its pieces is a word.
        freq = self._jieba.FREQ
        for word in _latin_whole(self._jieba.cut(text)):
            for n in (2, 3):
                if len(word) > n:
                    for i in range(len(word) - n + 1):
                        gram = word[i : i + n]
                        if freq.get(gram) and not _splits_latin(word, i, i + n):
                            yield gram
            yield word

    def index_tokens(self, text: str) -> list[str]:
        """The tokens knowledge text is indexed under: :meth:`tokenize`'s, each added keyword followed by the
        Chinese words inside it that search mode leaves out."""
        # Only the knowledge's side: a message holding the whole keyword matches it whole, and its inner words
        # would weigh the keyword twice against the rest of the message.
        return self.with_inner_words(self.tokenize(text))

    def with_inner_words(self, tokens: Iterable[str]) -> list[str]:
        """``tokens``, each added keyword among them followed by the Chinese words inside it that search mode
        leaves out (what :meth:`index_tokens` adds)."""
        if not self._inner:
            return list(tokens)
        return [t for token in tokens for t in (token, *self._inner.get(token, ()))]

    def segments(self, text: str) -> list[str]:
        """``text`` cut into consecutive pieces (jieba's precise mode, nothing dropped): joined they are ``text``."""
        self._load()
        return list(_latin_whole(self._jieba.cut(text)))

    def frequency(self, word: str) -> int:
        """How often jieba's dictionary counts ``word`` (a keyword taught it: at least 10); 0 for no word of it."""
        self._load()
        return int(self._jieba.FREQ.get(word) or 0)

    def tags(self, text: str) -> list[tuple[str, str]]:
        """``text`` cut into words with jieba's part-of-speech tags (precise mode, punctuation kept)."""
        return [(pair.word, pair.flag) for pair in self._tagger().cut(text)]

    def tag_of(self, word: str) -> str:
        """jieba's part-of-speech tag of a dictionary word ("x" for a word it has none for, e.g. one added)."""
        return str(self._tagger().word_tag_tab.get(word, "x"))

    def _tagger(self) -> Any:
        """jieba.posseg over this tokenizer's dictionary (its tag table is read on first use, about a second)."""
        self._load()
        with self._lock:
            if self._pos is None:
                import jieba.posseg

                self._pos = jieba.posseg.POSTokenizer(self._jieba)
            return self._pos

    def word_frequency(self, word: str) -> int:
        """How often jieba's dictionary (with the words added) counts ``word``; 0 for a word it does not know."""
        self._load()
        return int(self._jieba.FREQ.get(word, 0) or 0)

    def tokenize_many(self, texts: Sequence[str], processes: int | None = None) -> list[list[str]]:
        """``[index_tokens(t) for t in texts]``, spread over up to ``processes`` (default: CPU count) worker processes
        when the batch is large; the workers get the same user dictionary and added keywords."""
        self._load()
        workers = min(processes or os.cpu_count() or 1, 8)
        if workers < 2 or len(texts) < PARALLEL_MIN:
            return [self.index_tokens(t) for t in texts]
        # A few chunks per worker, so a slow worker does not hold up the end.
        size = -(-len(texts) // (workers * 4))
        chunks = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
        # fork: the workers start at once with this jieba (dictionary, user words, keywords) already loaded, and
        # nothing is re-imported (spawn would re-run an unguarded __main__ script). The children run jieba only.
        if "fork" not in multiprocessing.get_all_start_methods():
            return [self.index_tokens(t) for t in texts]
        global _WORKER
        with _FORK_LOCK:
            _WORKER = self
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": see above
                    with ProcessPoolExecutor(
                        workers,
                        mp_context=multiprocessing.get_context("fork"),
                        initializer=_worker_init,
                        initargs=(child_nice(),),
                    ) as pool:
                        return [tokens for part in pool.map(_worker_tokenize, chunks) for tokens in part]
            except (OSError, RuntimeError) as exc:  # no process support here (sandbox): stay serial
                logging.getLogger(__name__).warning("parallel tokenizing unavailable (%s); tokenizing serially", exc)
            finally:
                _WORKER = None
        return [self.index_tokens(t) for t in texts]

    def state_key(self) -> str:
        """The signature plus the keywords added so far: equal keys mean equal tokens for any text."""
        count, digest = self._added_key
        if count != len(self._added_freq) or not digest:  # words are only ever added: the count tells a change
            items = list(self._added_freq.items())
            added = "\n".join(f"{w} {f}" for w, f in items)
            count, digest = len(items), hashlib.sha256(added.encode()).hexdigest()[:12]
            self._added_key = (count, digest)
        return f"{self.signature()}:{digest}"

    def signature(self) -> str:
        """Identifies the cutting rules (version, user dictionary), so indexes rebuild when they change."""
        if self._user_dict is None:  # asked for every entry a search reads: the same hash each time
            return _PLAIN_SIGNATURE
        h = hashlib.sha256(TOKENIZER_VERSION.encode())
        if self._user_dict.is_file():
            h.update(self._user_dict.read_bytes())
        return h.hexdigest()[:12]


_PLAIN_SIGNATURE = hashlib.sha256(TOKENIZER_VERSION.encode()).hexdigest()[:12]
_WORKER: Tokenizer | None = None  # the tokenizer a forked worker uses (set only while a pool runs)
_FORK_LOCK = threading.Lock()


def _worker_init(nice: int = 0) -> None:
    # Another thread of the parent may have held the lock at the moment of the fork: it would never be released.
    assert _WORKER is not None, "set by the parent before the pool forks"
    _WORKER._lock = threading.Lock()
    lower_priority(nice)  # started by an index worker: requests get the CPU first


def _worker_tokenize(texts: list[str]) -> list[list[str]]:
    assert _WORKER is not None, "set by the parent before the pool forks"
    return [_WORKER.index_tokens(t) for t in texts]
