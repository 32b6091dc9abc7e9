"""Aliases mined from the knowledge itself: the abbreviations and other names its entries define for their subjects.

A visitor says 中大 where the knowledge says 中山大学; the knowledge usually says so itself, once. Four kinds of
evidence, all read from the entries' text (no word list of any one knowledge base):

- **a marker**: ``X，简称“Y”`` / ``X（以下简称Y）`` / ``X又称Y、Z`` / ``X（英文缩写：Y）`` (简称, 又称, 亦称, 别称,
  俗称, 又名, 缩写 ...). X is the noun phrase before the marker (a clause ending in a verb is no name), Y the
  words after it up to the end of the clause, split at 、 and 或;
- **an English name in brackets**: ``中山大学（Sun Yat-sen University, SYSU）`` (Latin-only parts, one or two of
  them: a bracket that lists several items with 、 is an enumeration, not a name);
- **a question about the name**: an entry whose query asks for X's abbreviation, other or English name
  (``中山大学简称``, ``X的英文名是什么``) and whose short document lists them (``中大、SYSU``);
- **a short form in use**: a shortened form of a frequent name (the first characters of its words, e.g. 经管学部
  for 经济与管理学部) that the knowledge itself uses in at least two entries and that is not an ordinary word;
- **a name written two ways**: an entry's question names a place or body with one head word and its document names
  the same one with another head of the same first character, never the question's way (广州南校区紫荆园宾馆 ...
  位于南校园): when at least three entries, naming at least two different ones, swap the same two heads (校区 and
  校园), each name so written is one with its other form (南校区 = 南校园, 东校区 = 东校园).

An alias the name's own words already contain (首钢 for 首钢集团) adds nothing and is dropped; so is one claimed
by two different names (ambiguous). Each group's first word is the one the knowledge uses most: dense questions
get it substituted, like a synonym file's canonical word (bot/search/synonyms.py). BENCHMARKS.md "Aliases".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.knowledge.entries import Entry
from bot.search.tokenizer import Tokenizer, normalize

# Words that introduce another name of what comes before them.
_MARKERS = (
    "以下简称",
    "下称",
    "英文简称",
    "英文缩写",
    "英文名称",
    "英文名",
    "英文全称",
    "外文名",
    "简称",
    "又称",
    "亦称",
    "也称",
    "别称",
    "俗称",
    "通称",
    "又名",
    "别名",
    "缩写",
    "简写",
)
_MARKER = re.compile("|".join(_MARKERS))
_AFTER_MARKER = re.compile(r"^(?:为|作|做|是|叫)?[:：]?\s*")
_QUOTES = "“”‘’「」『』《》\"'"
_CLAUSE_END = re.compile(r"[，,。；;）)（(\n！!？?]")
_CLAUSE_START = re.compile(r"[，,。；;：:！!？?\n、“”\"「」『』]")
_BRACKETED = re.compile(r"[（(][^（）()]*[）)]")
_ALTERNATIVES = re.compile(r"、|或者?|以及|及|/")
_QUESTION = re.compile(r"什么|哪|吗|怎么|多少|几|如何|为何")  # an "alias" asking something is a question, not a name
# A question about a name: "中山大学简称", "X的英文名是什么", "X的别称有哪些".
_ASKS_NAME = re.compile(
    r"^(?P<name>.+?)的?(?:" + "|".join(_MARKERS) + r"|全称|英文)(?:是什么|叫什么|是啥|有哪些|有什么)?\s*[?？]?$"
)
_LATIN_NAME = re.compile(r"^[a-z][a-z0-9 .&'’\-]*$")
_LABEL = re.compile(r"^(?P<label>[^\x00-\x7f]+)[:：]\s*(?P<rest>.*)$")
# Labels inside a bracket that introduce an English name or an abbreviation (others: 学名, 泰文, 梵文 ... skipped).
_NAME_LABELS = {
    "英文",
    "英语",
    "英文名",
    "英文名称",
    "英文全称",
    "英文简称",
    "英文缩写",
    "外文名",
    "缩写",
    "简称",
    "又称",
}
# jieba parts of speech a name ends with (nouns, proper nouns, English words, abbreviations).
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_JOINING = {"与", "·", "・"}  # inside one name: 经济与管理学部, 弗拉维娅·佩内塔 (和 and 及 list two names)
_NOUNS = {"n", "nr", "ns", "nt", "nz", "nrt", "nrfg", "ng", "eng", "j", "vn", "an", "kw"}
_COMMON_NOUNS = {"n", "ng", "vn", "an"}  # a name of one such word is a thing's kind, not its name
_PLACES_AND_NOUNS = _NOUNS | {"f", "s"}  # and directions and places: 南|校园, 西|校区


def _joins(tagged: Sequence[tuple[str, str]], i: int) -> bool:
    """True when ``tagged[i]`` joins the words beside it into one name: a dot between the parts of a foreign name,
    与 between two common nouns (经济与管理学部, not 比尔·盖兹与史蒂夫·巴尔默)."""
    word = tagged[i][0]
    if word in ("·", "・"):
        return True
    return word == "与" and 0 < i < len(tagged) - 1 and {tagged[i - 1][1], tagged[i + 1][1]} <= _COMMON_NOUNS


def _english(tagged: Sequence[tuple[str, str]], i: int) -> bool:
    """True when the words on both sides of ``tagged[i]`` are English (china medical board: one name)."""
    return 0 < i < len(tagged) - 1 and tagged[i - 1][1] == "eng" and tagged[i + 1][1] == "eng"


def _flag(word: str, flag: str) -> str:
    """jieba's tag, with the knowledge's keywords (added words: tag x) as proper nouns of their own, kw."""
    return "kw" if flag == "x" and any(ch.isalnum() for ch in word) and not word.isascii() else flag


MAX_NAME = 24  # characters: a longer "name" is a sentence
MAX_ALIAS = 20
MAX_LATIN = 60  # characters of an English name
MAX_LATIN_WORDS = 6
MAX_LISTED = 60  # characters of a document that answers "what is X's abbreviation" with a list
SHORT_FORM_MIN_ENTRIES = 2  # a short form counts when this many entries use it ...
NAME_MIN_ENTRIES = 3  # ... of a name that this many entries use
COMMON_WORD = 100  # a short form jieba's dictionary knows at least this often is an ordinary word, not an alias
MAX_PREFIX = 4  # characters of the name before a head written two ways (南 of 南校区, 珠海 of 珠海校区)
HEADS_MIN_NAMES = 2  # two heads swapped count when they name this many different ones (南校区/南校园, 东校区/东校园)
TWO_WAYS = "two ways"  # how a name written two ways is found


@dataclass(frozen=True)
class Alias:
    """Another name for ``name`` found in the knowledge: where (an entry id), how, and the text that says so."""

    name: str
    alias: str
    entry: str
    how: str  # "marker", "brackets", "question", "short form" or "two ways"
    evidence: str

    @property
    def written_both_ways(self) -> bool:
        """True when the knowledge itself writes the name both ways (its questions one way, its documents the other):
        each form is a word of its own entries, not a name it mentions once."""
        return self.how == TWO_WAYS


@dataclass(frozen=True)
class Renamed:
    """One name an entry writes two ways: ``prefix`` + ``head`` in its questions, ``prefix`` + ``other`` in its
    document (南 + 校区, 南 + 校园), and the text that shows it."""

    head: str
    other: str
    prefix: str
    evidence: str


_Read = tuple[list[Alias], list[tuple[str, tuple[str, ...]]], list[Renamed]]


def two_ways(read: Sequence[tuple[Entry, Sequence[Renamed]]]) -> list[Alias]:
    """The names written two ways by heads that at least NAME_MIN_ENTRIES entries swap, naming at least
    HEADS_MIN_NAMES different ones: each is an alias of its document's form (the knowledge's own words)."""
    entries: dict[tuple[str, str], set[str]] = {}
    prefixes: dict[tuple[str, str], set[str]] = {}
    for entry, renamed in read:
        for r in renamed:
            entries.setdefault((r.head, r.other), set()).add(entry.id)
            prefixes.setdefault((r.head, r.other), set()).add(r.prefix)
    swapped = {
        heads
        for heads, ids in entries.items()
        if len(ids) >= NAME_MIN_ENTRIES and len(prefixes[heads]) >= HEADS_MIN_NAMES
    }
    out: dict[tuple[str, str], Alias] = {}
    for entry, renamed in read:
        for r in renamed:
            if (r.head, r.other) in swapped:
                name, alias = r.prefix + r.other, r.prefix + r.head
                out.setdefault((name, alias), Alias(name, alias, entry.id, TWO_WAYS, r.evidence))
    return list(out.values())


def _clean(word: str) -> str:
    word = normalize(word).strip().strip(_QUOTES).strip()
    return word.removesuffix("等").strip(_QUOTES).strip()


class AliasMiner:
    """Finds aliases in entries with the knowledge's own tokenizer (jieba, with its parts of speech)."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        # content hash -> what that entry states, the noun phrases of its query and keywords, and the names its
        # questions and its document write two ways
        self._cache: dict[str, _Read] = {}

    # -- the name before a marker or a bracket --------------------------------
    def name_before(self, text: str) -> str | None:
        """The noun phrase that ends ``text`` (brackets removed, from the last clause), or None."""
        text = _BRACKETED.sub("", text).rstrip(" \t，,、:：")
        clause = _CLAUSE_START.split(text)[-1].strip()
        if not clause or len(clause) > MAX_NAME * 2:
            return None
        tagged = [(w, _flag(w, f)) for w, f in self.tokenizer.tags(clause)]
        if not tagged or tagged[-1][1] not in _NOUNS:
            return None  # a clause that ends in a verb ("...在现址建成") or a particle: not a name
        # the name is the run of nouns that ends the clause (numbers, 与 and · inside it): 根据|基本科学指标数据库
        start = len(tagged)
        while start > 0 and (
            tagged[start - 1][1] in _NOUNS | {"l"}
            or (start < len(tagged) and _joins(tagged, start - 1))
            or (tagged[start - 1][0] == " " and start < len(tagged) and _english(tagged, start - 1))
            or (tagged[start - 1][1] == "m" and start < len(tagged))
        ):
            start -= 1
        while start < len(tagged) and (tagged[start][1] not in _NOUNS or tagged[start][0] in _MARKERS):
            start += 1
        words = tagged[start:]
        dots = [i for i, (w, _) in enumerate(words) if w in ("·", "・")]
        if dots:  # a foreign person's name starts after the common nouns before it: 美国医生|维珍尼亚·阿普伽
            kinds = [i for i, (_, flag) in enumerate(words[: dots[0]]) if flag in _COMMON_NOUNS]
            if kinds and kinds[-1] < dots[0] - 1:
                words = words[kinds[-1] + 1 :]
        if len(words) == 1 and words[0][1] in _COMMON_NOUNS:
            return None  # one ordinary noun (实验室) is what a name is of, not a name
        name = _clean("".join(w for w, _ in words))
        return name if 2 <= len(name) <= MAX_NAME else None

    # -- the aliases after a marker ---------------------------------------------
    @staticmethod
    def aliases_after(text: str) -> list[str]:
        """The words a marker introduces: up to the end of the clause (or a closing quote), split at 、 and 或."""
        text = _AFTER_MARKER.sub("", text)
        if text[:1] in _QUOTES:
            # quoted names, possibly several: “大学医院”或“华西医院”
            found = re.match(r"^((?:[“「『\"'][^”」』\"']{1,30}[”」』\"']\s*(?:、|或者?|和|及)?\s*)+)", text)
            span = found.group(1) if found else ""
        else:
            span = _CLAUSE_END.split(text, maxsplit=1)[0]
        return [w for w in (_clean(p) for p in _ALTERNATIVES.split(span)) if _plausible(w)]

    def _at_word_start(self, text: str, start: int) -> bool:
        """True when jieba starts a word at ``start`` (民俗称为: 俗称 is inside 民俗, no marker)."""
        left = max(0, start - 6)
        offset = left
        for piece in self.tokenizer.segments(text[left : start + 4]):
            if offset == start:
                return True
            if offset > start:
                return False
            offset += len(piece)
        return offset == start

    def from_markers(self, entry: Entry, text: str) -> Iterable[Alias]:
        """Aliases introduced by a marker word."""
        for match in _MARKER.finditer(text):
            if not self._at_word_start(text, match.start()):
                continue
            before = text[: match.start()]
            inside = before.rstrip()[-1:] in "（("
            name = self.name_before(before.rstrip()[:-1] if inside else before)
            if name is None:
                continue
            for alias in self.aliases_after(text[match.end() :]):
                yield Alias(name, alias, entry.id, "marker", _excerpt(text, match.start()))

    def from_brackets(self, entry: Entry, text: str) -> Iterable[Alias]:
        """English names (and their abbreviations) in brackets right after a Chinese name."""
        for match in re.finditer(r"[（(]([^（）()]{2,80})[）)]", text):
            inner = match.group(1)
            if "、" in inner or not re.search(r"[A-Za-z]{2}", inner):
                continue  # an enumeration, or no English word
            parts = [p.strip() for p in re.split(r"[，,；;]", inner) if p.strip()]
            names = []
            for part in parts:
                labelled = _LABEL.match(part)
                if labelled is not None:
                    if labelled.group("label") not in _NAME_LABELS:
                        continue
                    part = labelled.group("rest")
                word = _clean(part)
                if _LATIN_NAME.match(word) and len(word.split()) <= MAX_LATIN_WORDS and _plausible(word):
                    names.append(word)
            if not names or len(names) < len([p for p in parts if not _LABEL.match(p)]):
                continue  # some part is not an English name: a remark in brackets, not a name
            name = self.name_before(text[: match.start()])
            if name is None or not re.search(r"[\u4e00-\u9fff]", name) or re.search(r"[a-z]", name):
                continue
            for word in names:
                yield Alias(name, word, entry.id, "brackets", _excerpt(text, match.start()))

    def from_question(self, entry: Entry) -> Iterable[Alias]:
        """An entry asking for a name's abbreviation or other name, answered by a short list."""
        document = entry.text.strip()
        if len(document) > MAX_LISTED:
            return
        for phrasing in entry.phrasings:
            asked = _ASKS_NAME.match(normalize(phrasing).strip())
            if asked is None:
                continue
            name = self.name_before(asked.group("name"))
            if name is None:
                continue
            for word in (_clean(p) for p in re.split(r"[、，,;；/]|或者?", document)):
                if _plausible(word):
                    yield Alias(name, word, entry.id, "question", f"{phrasing} → {document}")
            return

    def stated(self, entry: Entry) -> list[Alias]:
        """The aliases one entry states: markers in its document, English names in brackets, a question for them."""
        query, document = normalize(entry.query), normalize(entry.text)
        found = [*self.from_markers(entry, document), *self.from_brackets(entry, document)]
        # a query holding a marker asks for the name ("X简称是什么"): only its brackets, and from_question
        return [*found, *self.from_brackets(entry, query), *self.from_question(entry)]

    def names_used(self, entry: Entry) -> list[tuple[str, tuple[str, ...]]]:
        """Candidate names in the entry's query and keywords: runs of two or three Chinese nouns of two or more
        characters each (jieba's words and dictionary tags; 与 may join two: 经济与管理学部), with their nouns."""
        out: list[tuple[str, tuple[str, ...]]] = []
        text = normalize(f"{entry.query}\n{' '.join(entry.metadata)}")
        pieces = self.tokenizer.segments(text)
        for i in range(len(pieces)):
            words: list[str] = []
            joined = ""
            for piece in pieces[i:]:
                if len(piece) >= 2 and _CJK.fullmatch(piece) and _flag(piece, self.tokenizer.tag_of(piece)) in _NOUNS:
                    words.append(piece)
                    joined += piece
                    if len(words) >= 2:
                        out.append((joined, tuple(words)))
                    if len(words) == 3:
                        break
                elif words and piece in _JOINING:
                    joined += piece
                else:
                    break
        return out

    def short_forms(self, entries: Sequence[Entry], texts: Sequence[str], phrases: Sequence[list]) -> list[Alias]:
        """Shortened forms of names that at least NAME_MIN_ENTRIES entries' queries or keywords use, found as whole
        words (jieba's) in at least SHORT_FORM_MIN_ENTRIES entries and unknown to jieba's dictionary as a word."""
        names: Counter[str] = Counter()
        nouns: dict[str, tuple[str, ...]] = {}
        for found in phrases:
            for name, words in dict(found).items():
                names[name] += 1
                nouns.setdefault(name, words)
        candidates: dict[str, set[str]] = {}
        for name, count in names.items():
            if count >= NAME_MIN_ENTRIES:
                for short in _abbreviations(nouns[name]):
                    if short not in names and self.tokenizer.word_frequency(short) < COMMON_WORD:
                        candidates.setdefault(short, set()).add(name)
        if not candidates:
            return []
        pattern = re.compile("|".join(map(re.escape, sorted(candidates, key=len, reverse=True))))
        used: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            hits = {m.group() for m in pattern.finditer(text)}
            if not hits:
                continue
            words = set(self.tokenizer.segments(text))  # whole words only: 房公 is not in 住房/公积金
            for short in hits:
                if short in words or self._spans_words(short, text):
                    used.setdefault(short, []).append(i)
        out = []
        for short, where in used.items():
            if len(where) >= SHORT_FORM_MIN_ENTRIES and len(candidates[short]) == 1:
                (name,) = candidates[short]
                i = where[0]
                out.append(Alias(name, short, entries[i].id, "short form", _excerpt(texts[i], texts[i].find(short))))
        return out

    def renamed(self, entry: Entry) -> list[Renamed]:
        """The names the entry's questions and keywords write with a two-character head word (校区 of 南校区) that its
        document writes only with another head of the same first character (南校园)."""
        document = normalize(entry.text)
        labels = [normalize(t) for t in (*entry.phrasings, *entry.metadata)]
        said = "\n".join(labels)
        out: dict[tuple[str, str, str], Renamed] = {}
        for label in labels:
            pieces = self.tokenizer.segments(label)
            for i, piece in enumerate(pieces):
                if not _CJK.fullmatch(piece) or len(piece) < 2:
                    continue
                head, prefix = piece[-2:], piece[:-2]
                if not prefix and i:  # the word before names it (珠海|校区, 南|校园), not a particle (的|学部)
                    before = pieces[i - 1]
                    prefix = before if _flag(before, self.tokenizer.tag_of(before)) in _PLACES_AND_NOUNS else ""
                if not (1 <= len(prefix) <= MAX_PREFIX and _CJK.fullmatch(prefix)) or not self._word(head):
                    continue
                if prefix + head in document:
                    continue  # the document writes it the question's way too
                for found in re.finditer(re.escape(prefix + head[0]) + r"([\u4e00-\u9fff])", document):
                    other = head[0] + found.group(1)
                    if other != head and self._word(other) and prefix + other not in said:
                        excerpt = f"{label} → {_excerpt(document, found.start())}"
                        out.setdefault((head, other, prefix), Renamed(head, other, prefix, excerpt))
        return list(out.values())

    def _word(self, word: str) -> bool:
        """True for a word jieba's dictionary knows (with the knowledge's keywords)."""
        return self.tokenizer.word_frequency(word) > 0

    def _spans_words(self, short: str, text: str) -> bool:
        """True when ``short`` occurs in ``text`` starting and ending where jieba's words do (经管/学部)."""
        bounds, offset = {0}, 0
        for piece in self.tokenizer.segments(text):
            offset += len(piece)
            bounds.add(offset)
        at = text.find(short)
        while at >= 0:
            if at in bounds and at + len(short) in bounds:
                return True
            at = text.find(short, at + 1)
        return False

    def mine(self, entries: Sequence[Entry]) -> list[Alias]:
        """Every alias the entries define (one per name and alias, the first evidence), ambiguous ones dropped.

        What one entry states is remembered by its content, so a reload after an edit reads only what changed.
        """
        cache: dict[str, _Read] = {}
        for entry in entries:
            key = entry.content_hash
            cache[key] = (
                self._cache.get(key)
                or cache.get(key)
                or (self.stated(entry), self.names_used(entry), self.renamed(entry))
            )
        self._cache = cache
        found: dict[tuple[str, str], Alias] = {}
        for entry in entries:
            for alias in cache[entry.content_hash][0]:
                found.setdefault((alias.name, alias.alias), alias)
        texts = [normalize(f"{e.query}。{e.text}") for e in entries]
        for alias in self.short_forms(entries, texts, [cache[e.content_hash][1] for e in entries]):
            found.setdefault((alias.name, alias.alias), alias)
        for alias in two_ways([(e, cache[e.content_hash][2]) for e in entries]):
            found.setdefault((alias.name, alias.alias), alias)
        kept = [a for a in found.values() if a.alias != a.name and not self._inside(a.alias, a.name)]
        owners: dict[str, set[str]] = {}
        for a in kept:
            owners.setdefault(a.alias, set()).add(a.name)
        return [a for a in kept if len(owners[a.alias]) == 1]

    def _inside(self, alias: str, name: str) -> bool:
        """True when the alias's words are a run of the name's words (首钢 in 首钢集团): it adds nothing."""
        a = [p for p in self.tokenizer.segments(alias) if p.strip()]
        n = [p for p in self.tokenizer.segments(name) if p.strip()]
        return any(n[i : i + len(a)] == a for i in range(len(n) - len(a) + 1))


def alias_groups(aliases: Sequence[Alias], texts: Sequence[str] = ()) -> tuple[tuple[str, ...], ...]:
    """The aliases as groups of interchangeable words (connected by name), each led by the word most often named
    (the full name: 中山大学 before 中大), then the one ``texts`` use most."""
    parent: dict[str, str] = {}

    def root(word: str) -> str:
        while parent.setdefault(word, word) != word:
            parent[word] = parent[parent[word]]
            word = parent[word]
        return word

    for a in aliases:
        parent[root(a.alias)] = root(a.name)
    members: dict[str, list[str]] = {}
    for word in parent:
        members.setdefault(root(word), []).append(word)
    named = Counter(a.name for a in aliases)
    joined = "\n".join(texts)
    groups = []
    for words in members.values():
        words.sort(key=lambda w: (-named[w], -joined.count(w), -len(w), w))
        groups.append(tuple(words))
    return tuple(sorted(groups))


def _plausible(word: str) -> bool:
    """A word that can be a name: 2-20 characters (English: 60), a letter or CJK character, no markup or sentence inside."""
    return (
        2 <= len(word) <= (MAX_LATIN if word.isascii() else MAX_ALIAS)
        and any(ch.isalpha() for ch in word)
        and not re.search(r"[{}=|:：<>\[\]'\"]|的$", word)
        and not _QUESTION.search(word)
        and not word.isdigit()
    )


def _abbreviations(words: Sequence[str]) -> Iterable[str]:
    """Short forms of a name of several words: the first character of each word, the last word kept or cut to its
    first character (经济/管理/学部 -> 经管学部, 经管学; 中山/大学 -> 中大)."""
    heads = "".join(w[0] for w in words[:-1])
    if len(words) >= 2:
        yield heads + words[-1][0]
        if len(words) >= 3:
            yield heads + words[-1]


def _excerpt(text: str, at: int, width: int = 24) -> str:
    start = max(0, at - width)
    return (
        ("…" if start else "") + text[start : at + width].replace("\n", " ") + ("…" if at + width < len(text) else "")
    )
