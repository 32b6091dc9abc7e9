"""Synonym groups from an editable file, applied to questions only (no re-index): ``中大, 中山大学, 中山大学校``.

One group per line, words separated by commas (``,`` ``，`` ``、``); ``#`` starts a comment. The first word is the
group's canonical form. Sparse search treats a question word of a group as "any word of the group" (BM25
alternatives, and coverage counts the group as matched when an entry has any of them); dense search gets the
question with the canonical form substituted (BENCHMARKS.md "Synonyms"). A word jieba would cut into single
characters joins its dictionary, so "中大" stays one token. The file is re-read when it changes; a bad edit is
logged with its file and line and the last good groups stay in use.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import ConfigError
from bot.search.tokenizer import Tokenizer, is_word, normalize

log = logging.getLogger(__name__)
_SPLIT = re.compile(r"[,，、]")
CHECK_INTERVAL = 1.0  # seconds between looks at the file's modification time (a stat per search is cheap, but not free)


class SynonymError(ConfigError):
    """A synonym file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class SynonymGroups:
    """Groups of interchangeable words (normalised), each word in at most one group, the canonical form first."""

    groups: tuple[tuple[str, ...], ...] = ()
    _of: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for i, group in enumerate(self.groups):
            for word in group:
                self._of.setdefault(word, i)

    def __bool__(self) -> bool:
        return bool(self.groups)

    def group(self, word: str) -> tuple[str, ...] | None:
        """The group holding ``word`` (normalised), or None."""
        i = self._of.get(word)
        return None if i is None else self.groups[i]

    def expand(self, word: str) -> tuple[str, ...]:
        """``word`` followed by the other words of its group (just ``word`` when it has none)."""
        group = self.group(word)
        return (word, *(w for w in group if w != word)) if group else (word,)

    @property
    def words(self) -> list[str]:
        """Every word of every group."""
        return [w for g in self.groups for w in g]


def parse_synonyms(text: str, source: str = "synonyms") -> SynonymGroups:
    """Groups from the file's text; SynonymError naming ``source`` and the line of the first problem."""
    groups: list[tuple[str, ...]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = tuple(dict.fromkeys(normalize(w).strip() for w in _SPLIT.split(line)))
        where = f"{source}, line {number}"
        if "" in words:
            raise SynonymError(f"{where}: an empty word (two commas in a row, or one at an end): {line!r}")
        if len(words) < 2:
            raise SynonymError(f"{where}: a group needs at least two different words, comma-separated: {line!r}")
        for w in words:
            if w in seen:
                raise SynonymError(f"{where}: {w!r} is already in the group on line {seen[w]}; a word has one group")
            seen[w] = number
        groups.append(words)
    return SynonymGroups(tuple(groups))


Form = tuple[str, ...]  # a word as the index's terms (jieba's precise pieces): "北校园" -> ("北", "校园")
Unit = str | tuple[Form, ...]  # a question word, or a synonym group as alternatives (any one matches)


def _minimal(alternatives: list[Form]) -> tuple[Form, ...]:
    """The alternatives without those holding every term of another: ("中山大学", "校") matches nothing that
    ("中山大学",) does not, but would score entries that mention 校 anywhere above the rest."""
    sets = [frozenset(a) for a in alternatives]
    return tuple(dict.fromkeys(a for a, s in zip(alternatives, sets) if not any(o < s for o in sets)))


class Synonyms:
    """A synonym file, re-read when its modification time or size changes; a missing file means no groups."""

    def __init__(self, path: str | Path, tokenizer: Tokenizer, check_interval: float = CHECK_INTERVAL):
        self.path = Path(path)
        self.tokenizer = tokenizer
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        # The groups, each word's form, and (group number, word) by the first term of its form (for found()).
        self._state: tuple[SynonymGroups, dict[str, Form], dict[str, list[tuple[int, str]]]] = (SynonymGroups(), {}, {})
        self._checked = float("-inf")
        self.error: str | None = None  # why the last re-read failed (the previous groups stay), else None
        self._read(strict=True)

    def _read(self, strict: bool) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            stamp = None
        else:
            stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp and self._stamp is not None:
            return
        try:
            groups = parse_synonyms(self.path.read_text(encoding="utf-8"), str(self.path)) if stamp else SynonymGroups()
        except (SynonymError, OSError, UnicodeDecodeError) as exc:
            message = str(exc) if isinstance(exc, SynonymError) else f"cannot read {self.path}: {exc}"
            if strict:  # at start: a configuration error (exit status 2), like any bad setting
                raise ConfigError(message) from None
            if message != self.error:
                log.error("synonyms not reloaded, the previous groups stay in use: %s", message)
            self.error, self._stamp = message, stamp
            return
        # Only words jieba would cut into single characters (abbreviations: 中大) join its dictionary: forcing a
        # longer one whole ("中山大学校") would also cut it out of other words ("中山大学校训" -> 中山大学校 / 训).
        self.tokenizer.add_words(w for w in groups.words if all(len(p) == 1 for p in self.tokenizer.segments(w)))
        forms = {w: self._form(w) for w in groups.words}
        starts: dict[str, list[tuple[int, str]]] = {}
        for number, group in enumerate(groups.groups):
            for word in group:
                if forms[word]:
                    starts.setdefault(forms[word][0], []).append((number, word))
        self._state, self._stamp, self.error = (groups, forms, starts), stamp, None
        if stamp is not None:
            log.info("synonyms: %d group(s) from %s", len(groups.groups), self.path)

    def _form(self, text: str) -> Form:
        return tuple(p.strip() for p in self.tokenizer.segments(normalize(text)) if is_word(p))

    def current(self) -> SynonymGroups:
        """The groups now (the file is looked at again at most every ``check_interval`` seconds)."""
        return self._current()[0]

    def _current(self) -> tuple[SynonymGroups, dict[str, Form], dict[str, list[tuple[int, str]]]]:
        now = time.monotonic()
        if now - self._checked >= self.check_interval:
            with self._lock:
                if now - self._checked >= self.check_interval:
                    self._read(strict=False)
                    self._checked = now
        return self._state

    def found(self, question: str) -> list[tuple[tuple[str, ...], str]]:
        """(group, the word of it found) for each group with a word in ``question`` (as whole jieba pieces)."""
        groups, forms, starts = self._current()
        if not groups:
            return []
        pieces = self._form(question)
        seen: dict[int, str] = {}
        for i, piece in enumerate(pieces):  # looked up by first term: the cost does not grow with the groups
            for number, word in starts.get(piece, ()):
                form = forms[word]
                if number not in seen and tuple(pieces[i : i + len(form)]) == form:
                    seen[number] = word
        return [(groups.groups[n], seen[n]) for n in sorted(seen)]

    def units(self, question: str, words: Sequence[str]) -> list[Unit]:
        """The question's ``words``, those of a found group replaced by one unit: the group's words as terms."""
        found = self.found(question)
        if not found:
            return list(words)
        forms = self._state[1]
        members = {w for group, _ in found for w in group}
        groups: list[Unit] = [_minimal([forms[w] for w in group if forms[w]]) for group, _ in found]
        return [w for w in words if w not in members] + groups

    def canonical(self, text: str, how: str = "substitute") -> str:
        """``text`` with a group's word replaced by (``substitute``) or followed at the end by (``append``) the
        group's canonical form; ``text`` itself when no group's word is in it, or its canonical form is already."""
        if how == "off":
            return text
        norm = normalize(text)
        swaps = [(g[0], w) for g, w in self.found(text) if w != g[0] and g[0] not in norm]
        if not swaps:
            return text
        if how == "append":
            return f"{text} {' '.join(c for c, _ in swaps)}"
        for canonical, word in swaps:
            norm = norm.replace(word, canonical)
        return norm
