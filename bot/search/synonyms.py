"""Synonym groups from an editable file and aliases mined from the knowledge, applied to questions only (no
re-index): ``中大, 中山大学, 中山大学校``.

One group per line, words separated by commas (``,`` ``，`` ``、``); ``#`` starts a comment. The first word is the
group's canonical form. The aliases the knowledge defines itself (中山大学，简称“中大”: bot/search/aliases.py) join
as groups of their own, or the file's group holding one of their words; a line ``!中大`` (comma-separated words)
drops those words from the mined aliases (a wrong one shown by ``knowledge lint``). Sparse search treats a question word of a group as "any word of the group" (BM25
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
from collections import OrderedDict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import ConfigError
from bot.knowledge.entries import Entry
from bot.search.aliases import Alias, AliasMiner, alias_groups
from bot.search.tokenizer import Tokenizer, is_word, normalize

log = logging.getLogger(__name__)
_SPLIT = re.compile(r"[,，、]")
FOUND_CACHE = 20_000  # questions whose groups found stay in memory (LRU): a replay asks each in several searches
CHECK_INTERVAL = 1.0  # seconds between looks at the file's modification time (a stat per search is cheap, but not free)


class SynonymError(ConfigError):
    """A synonym file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class SynonymGroups:
    """Groups of interchangeable words (normalised), each word in at most one group, the canonical form first."""

    groups: tuple[tuple[str, ...], ...] = ()
    excluded: frozenset[str] = frozenset()  # words mined aliases must not use (the file's ``!`` lines)
    # the words of aliases mined from the knowledge (not the file's, nor a name it writes both ways): searched only
    # when said, or as their group's canonical word
    mined: frozenset[str] = frozenset()
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

    def with_mined(self, mined: Sequence[Sequence[str]], written: AbstractSet[str] = frozenset()) -> SynonymGroups:
        """These groups plus ``mined`` ones (their excluded words left out): a mined group sharing a word with a group
        here adds its other words to it (whose first word stays canonical), else it is a group of its own. The
        ``written`` words (names the knowledge writes both ways) count as the file's words, not as ``mined``."""
        groups = [list(g) for g in self.groups]
        of = {w: i for i, g in enumerate(groups) for w in g}
        added: set[str] = set()
        for group in mined:
            words = [w for w in dict.fromkeys(group) if w not in self.excluded]
            if len(words) < 2:
                continue
            home = next((of[w] for w in words if w in of), None)
            if home is None:
                home = len(groups)
                groups.append([])
            for w in words:
                if w not in of:
                    of[w] = home
                    groups[home].append(w)
                    added.add(w)
        return SynonymGroups(tuple(tuple(g) for g in groups if len(g) >= 2), self.excluded, frozenset(added - written))


def parse_synonyms(text: str, source: str = "synonyms") -> SynonymGroups:
    """Groups from the file's text; SynonymError naming ``source`` and the line of the first problem."""
    groups: list[tuple[str, ...]] = []
    excluded: set[str] = set()
    seen: dict[str, int] = {}
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        dropped = line.startswith(("!", "！"))
        words = tuple(dict.fromkeys(normalize(w).strip() for w in _SPLIT.split(line[1:] if dropped else line)))
        where = f"{source}, line {number}"
        if "" in words:
            raise SynonymError(f"{where}: an empty word (two commas in a row, or one at an end): {line!r}")
        if dropped:
            excluded.update(words)
            continue
        if len(words) < 2:
            raise SynonymError(f"{where}: a group needs at least two different words, comma-separated: {line!r}")
        for w in words:
            if w in seen:
                raise SynonymError(f"{where}: {w!r} is already in the group on line {seen[w]}; a word has one group")
            seen[w] = number
        groups.append(words)
    return SynonymGroups(tuple(groups), frozenset(excluded))


Form = tuple[str, ...]  # a word as the index's terms (jieba's precise pieces): "北校园" -> ("北", "校园")
Unit = str | tuple[Form, ...]  # a question word, or a synonym group as alternatives (any one matches)


def _minimal(alternatives: list[Form]) -> tuple[Form, ...]:
    """The alternatives without those holding every term of another: ("中山大学", "校") matches nothing that
    ("中山大学",) does not, but would score entries that mention 校 anywhere above the rest."""
    sets = [frozenset(a) for a in alternatives]
    return tuple(dict.fromkeys(a for a, s in zip(alternatives, sets) if not any(o < s for o in sets)))


class Synonyms:
    """A synonym file, re-read when its modification time or size changes (a missing file, or none, means no groups
    of its own), and the aliases mined from the knowledge (:meth:`learn`, at each load of it)."""

    def __init__(
        self,
        path: str | Path | None,
        tokenizer: Tokenizer,
        check_interval: float = CHECK_INTERVAL,
        miner: AliasMiner | None = None,
    ):
        self.path = Path(path) if path is not None else None
        self.tokenizer = tokenizer
        self.check_interval = check_interval
        self.miner = miner  # None: no aliases are mined (knowledge.aliases: false)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._seen = False  # True once the file (or its absence) was read
        self._file = SynonymGroups()  # the file's groups and exclusions, as last read well
        self.aliases: tuple[Alias, ...] = ()  # what the last load of the knowledge defined (excluded ones too)
        self._mined: tuple[tuple[str, ...], ...] = ()
        self._written: frozenset[str] = frozenset()  # mined words the knowledge itself writes both ways
        # The groups, each word's form, and (group number, word) by the first term of its form (for found()).
        self._state: tuple[SynonymGroups, dict[str, Form], dict[str, list[tuple[int, str]]]] = (SynonymGroups(), {}, {})
        self._checked = float("-inf")
        self.version = 0  # +1 each time the groups searches use are made anew (what a question's cut is kept by)
        self.error: str | None = None  # why the last re-read failed (the previous groups stay), else None
        # found() by (question, version, the tokenizer's state): jieba cuts each question once, not in every search
        self._found: OrderedDict[tuple[str, int, str], tuple[tuple[tuple[str, ...], str], ...]] = OrderedDict()
        self._found_lock = threading.Lock()
        self._read(strict=True)

    def learn(self, entries: Sequence[Entry]) -> None:
        """Mine the aliases ``entries`` define and search with them from now on (nothing without a miner)."""
        if self.miner is None:
            return
        try:
            aliases = self.miner.mine(entries)
        except Exception:  # a heuristic over any text: a bug in it must not stop the knowledge from loading
            log.exception("aliases not mined; the previous ones stay in use")
            return
        mined = alias_groups(aliases, [f"{e.query}\n{e.text}" for e in entries])
        written = frozenset(w for a in aliases if a.written_both_ways for w in (a.name, a.alias))
        with self._lock:
            self.aliases, self._mined, self._written = tuple(aliases), mined, written
            self._apply()
        if aliases:
            log.info("aliases: %d mined from the knowledge, in %d group(s)", len(aliases), len(mined))

    def _read(self, strict: bool) -> None:
        try:
            st = os.stat(self.path) if self.path is not None else None
        except FileNotFoundError:
            st = None
        stamp = (st.st_mtime_ns, st.st_size) if st is not None else None
        if stamp == self._stamp and self._seen:
            return
        try:
            groups = (
                parse_synonyms(self.path.read_text(encoding="utf-8"), str(self.path))
                if stamp is not None and self.path is not None
                else SynonymGroups()
            )
        except (SynonymError, OSError, UnicodeDecodeError) as exc:
            message = str(exc) if isinstance(exc, SynonymError) else f"cannot read {self.path}: {exc}"
            if strict:  # at start: a configuration error (exit status 2), like any bad setting
                raise ConfigError(message) from None
            if message != self.error:
                log.error("synonyms not reloaded, the previous groups stay in use: %s", message)
            self.error, self._stamp = message, stamp
            return
        self._file, self._stamp, self.error, self._seen = groups, stamp, None, True
        self._apply()
        if stamp is not None:
            log.info("synonyms: %d group(s) from %s", len(groups.groups), self.path)

    def _apply(self) -> None:
        """Make the file's groups with the mined ones what searches use (the caller holds the lock, or constructs)."""
        groups = self._file.with_mined(self._mined, self._written)
        # Only words jieba would cut into single characters (abbreviations: 中大) join its dictionary: forcing a
        # longer one whole ("中山大学校") would also cut it out of other words ("中山大学校训" -> 中山大学校 / 训).
        self.tokenizer.add_words(w for w in groups.words if all(len(p) == 1 for p in self.tokenizer.segments(w)))
        forms = {w: self._form(w) for w in groups.words}
        starts: dict[str, list[tuple[int, str]]] = {}
        for number, group in enumerate(groups.groups):
            for word in group:
                if forms[word]:
                    starts.setdefault(forms[word][0], []).append((number, word))
        self._state = (groups, forms, starts)
        self.version += 1

    def listed(self) -> tuple[tuple[Alias, bool], ...]:
        """Each alias the last load of the knowledge defined, and whether the file's ``!`` lines drop it (its alias
        or its name)."""
        self.current()  # the file as it is now
        dropped = self._file.excluded
        return tuple((a, a.alias in dropped or a.name in dropped) for a in self.aliases)

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
        version = self.version
        groups, forms, starts = self._current()
        if not groups:
            return []
        if self.version != version:  # made anew meanwhile (by this call's look at the file, or another thread)
            return self._find(question, groups, forms, starts)
        # The groups are set before their number: these are this number's, or (racing a change) the next one's.
        key = (question, version, self.tokenizer.state_key())
        with self._found_lock:
            kept = self._found.get(key)
            if kept is not None:
                self._found.move_to_end(key)
                return list(kept)
        made = self._find(question, groups, forms, starts)
        with self._found_lock:
            self._found[key] = tuple(made)
            while len(self._found) > FOUND_CACHE:
                self._found.popitem(last=False)
        return made

    def _find(
        self, question: str, groups: SynonymGroups, forms: dict[str, Form], starts: dict[str, list[tuple[int, str]]]
    ) -> list[tuple[tuple[str, ...], str]]:
        pieces = self._form(question)
        seen: dict[int, str] = {}
        for i, piece in enumerate(pieces):  # looked up by first term: the cost does not grow with the groups
            for number, word in starts.get(piece, ()):
                form = forms[word]
                if number not in seen and tuple(pieces[i : i + len(form)]) == form:
                    seen[number] = word
        return [(groups.groups[n], seen[n]) for n in sorted(seen)]

    def units(self, question: str, words: Sequence[str]) -> list[Unit]:
        """The question's ``words``, those of a found group (and the terms of the one said) replaced by one unit: the
        group's words as terms.

        A mined alias is an alternative only when it is the word the question says, or the group's canonical one:
        an alias the knowledge mentions once (sun yat-sen university) would otherwise rank the entry that mentions
        it above those about what the question asks (中大校训 -> the English-name entry, on four rare words). A name
        the knowledge writes both ways (北校园 and 北校区) is each entry's own word: every form is an alternative.
        """
        found = self.found(question)
        if not found:
            return list(words)
        groups_now, forms = self._state[0], self._state[1]
        # the group's words, and the terms of the word said (sun yat-sen university: sun, yat, sen, university)
        members = {w for group, said in found for w in (*group, *forms[said])}
        groups: list[Unit] = [
            _minimal([forms[w] for w in group if forms[w] and (w not in groups_now.mined or w in (said, group[0]))])
            for group, said in found
        ]
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
