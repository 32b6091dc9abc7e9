"""Sparse relevance in [0, 1]: the share of the question's IDF mass that an entry contains ("coverage").

Raw BM25 grows with the question's length and the knowledge's size and wording, so a threshold on it means
nothing on the next knowledge base. Coverage asks "how much of what the question is about does this entry
mention?", weighting each question word by how rare it is in the knowledge (BM25's IDF over all fields):

    coverage(q, e) = sum(idf(t) for t in q if t in e) / sum(idf(t) for t in q)

A word the knowledge never uses gets the highest IDF, so "今天天气怎么样" against a campus guide scores low
even when an entry contains 今天 and 怎么样. Measured against BM25 normalised by the question's own score
in benchmarks/relevance.py (BENCHMARKS.md "Relevance"): equal alone, better inside the hybrid fusion.
"""

from __future__ import annotations

import math
import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from bot.knowledge.entries import Entry
from bot.search.agreement import (
    ASKING_WORDS,
    Agreement,
    SpecificsCache,
    agree_specifics,
    asked_kinds,
    contrasts,
    qualifiers,
    specifics,
)
from bot.search.base import Hit, Searcher, rescored
from bot.search.crosslingual import TRANSLATED, QueryTranslator
from bot.search.homophones import Homophones
from bot.search.language import language_of
from bot.search.script import folded
from bot.search.synonyms import Form, Synonyms, Unit
from bot.search.tokenizer import Tokenizer

ENTRY_TOKEN_CACHE = 50_000  # entries whose token sets stay in memory (LRU)
QUESTION_UNIT_CACHE = 20_000  # questions whose units stay in memory (LRU): a replay asks each in several searches
FIELDS = ("query", "metadata", "document")


@dataclass(frozen=True)
class TermStats:
    """Document frequencies of some words over the indexed entries (all fields together), and their count."""

    documents: int
    df: Mapping[str, int]

    def idf(self, word: str) -> float:
        """BM25's IDF, ln(1 + (N - df + 0.5) / (df + 0.5)): a word no entry uses gets the highest value."""
        return self.idf_of_df(self.df.get(word, 0))

    def idf_of_df(self, df: int) -> float:
        """BM25's IDF of a word found in ``df`` entries."""
        df = min(df, self.documents)
        return math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))


def alternatives(unit: Unit) -> tuple[Form, ...]:
    """A question unit as alternatives, each a tuple of terms that must all be present."""
    return ((unit,),) if isinstance(unit, str) else unit


class QuestionWeights:
    """A question's units with their IDF weights, computed once and measured against many entries' words.

    A synonym group counts once, as found when the entry has any of its words (all the terms of one); its IDF is
    that of its most common word (a word of several terms: as common as its rarest term).
    """

    def __init__(self, question: Sequence[Unit], stats: TermStats):
        weights: dict[tuple[Form, ...], float] = {}
        for unit in question:
            alts = alternatives(unit)
            if alts and alts not in weights:
                df = max(min(stats.df.get(t, 0) for t in alt) for alt in alts)
                weights[alts] = stats.idf_of_df(df)
        self.total = sum(weights.values())
        # A plain word (the common case) is looked up directly; a synonym group tries each alternative.
        self._items = [
            (alts[0][0] if len(alts) == 1 and len(alts[0]) == 1 else None, alts, w) for alts, w in weights.items()
        ]

    def coverage(self, entry_words: AbstractSet[str]) -> float:
        """The share of the question words' IDF mass found in ``entry_words`` (0 for a word-less question)."""
        if self.total <= 0:
            return 0.0
        found = sum(
            w
            for word, alts, w in self._items
            if (word in entry_words if word is not None else any(all(t in entry_words for t in alt) for alt in alts))
        )
        return min(1.0, found / self.total)


def coverage(question: Sequence[Unit], entry_words: AbstractSet[str], stats: TermStats) -> float:
    """The share of the question words' IDF mass found in ``entry_words`` (0 for a word-less question; see
    :class:`QuestionWeights`)."""
    return QuestionWeights(question, stats).coverage(entry_words)


def unit_terms(units: Sequence[Unit]) -> list[str]:
    """Every term of ``units`` (their synonyms' too), once each."""
    return list(dict.fromkeys(t for u in units for alt in alternatives(u) for t in alt))


def query_text(entry: Entry) -> str:
    """The text of an entry's query field: its query and each alternative question (``questions``), one a line."""
    return "\n".join(entry.phrasings)


def weighted_text(texts: Sequence[str], weights: Mapping[str, int]) -> str:
    """The one indexed text of an entry: each field's text (in FIELDS order) repeated by its weight.

    Repeating a field's words raises their term frequency: BM25F with statistics shared by all fields.
    """
    return " ".join(t for f, t in zip(FIELDS, texts) for _ in range(weights[f]) if t)


class QuestionUnits:
    """A question's units as the tokenizer and the synonyms cut them now, remembered by text (LRU)."""

    def __init__(self, size: int = QUESTION_UNIT_CACHE):
        self.size = size
        self._cache: OrderedDict[tuple[str, str, int], tuple[Unit, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int], cut: Callable[[], list[Unit]]) -> list[Unit]:
        """The units kept under ``key`` (the question, the tokenizer's and the synonyms' state), else ``cut()``."""
        with self._lock:
            units = self._cache.get(key)
            if units is not None:
                self._cache.move_to_end(key)
                return list(units)
        made = cut()
        with self._lock:
            self._cache[key] = tuple(made)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return made


class EntryWords:
    """The set of words of each entry (all fields), from the shared tokenizer, remembered by content (LRU)."""

    def __init__(self, tokenizer: Tokenizer, size: int = ENTRY_TOKEN_CACHE):
        self.tokenizer = tokenizer
        self.size = size
        self._cache: OrderedDict[tuple[str, str, str], tuple[frozenset[str], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, entry: Entry, part: str, texts: Sequence[str]) -> tuple[frozenset[str], ...]:
        key = (entry.content_hash, self.tokenizer.state_key(), part)
        with self._lock:
            words = self._cache.get(key)
            if words is not None:
                self._cache.move_to_end(key)
                return words
        words = tuple(frozenset(self.tokenizer.index_tokens(t)) for t in texts)
        with self._lock:
            self._cache[key] = words
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return words

    def remember(self, cut: Sequence[tuple[Entry, Sequence[str]]], state: str) -> int:
        """Keep the words of entries from the tokens an index cut their fields into (each entry's query text,
        metadata and document as :class:`~bot.search.tantivy_searcher.TantivySearcher` cuts them), when the
        tokenizer's state was ``state``; how many entries (none when they would not all fit).

        The same words as cutting the entry here: jieba cuts the runs of word characters between separators one by
        one, and the fields' texts are joined by a line break (a separator), so the words of all the fields together
        are the union of each field's. An entry's phrasings are kept only when it has one (its query text then).
        """
        if 3 * len(cut) > self.size:  # more than the cache holds: each would push out another
            return 0
        with self._lock:
            for entry, (query, metadata, document) in cut:
                q, m, d = frozenset(query.split()), frozenset(metadata.split()), frozenset(document.split())
                self._cache[(entry.content_hash, state, "all")] = (q | m | d,)
                self._cache[(entry.content_hash, state, "metadata")] = (m,)
                if len(entry.phrasings) == 1:
                    self._cache[(entry.content_hash, state, "phrasings")] = (q,)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return len(cut)

    def __call__(self, entry: Entry) -> frozenset[str]:
        """The words of ``entry``'s query (and alternative questions), metadata and document."""
        text = "\n".join((query_text(entry), " ".join(entry.metadata), entry.text))
        return self._cached(entry, "all", [text])[0]

    def phrasings(self, entry: Entry) -> tuple[frozenset[str], ...]:
        """The words of each of ``entry.phrasings`` (its query, then each alternative question)."""
        return self._cached(entry, "phrasings", entry.phrasings)

    def keywords(self, entry: Entry) -> frozenset[str]:
        """The words of ``entry``'s metadata keywords."""
        return self._cached(entry, "metadata", [" ".join(entry.metadata)])[0]


def content_units(units: Sequence[Unit], df: Mapping[str, int]) -> list[Unit]:
    """The units of a message that say what is asked (``df``: each word's document frequency): without the question
    words and particles no entry uses (哪年, 啊: they weigh as much as the rarest word, yet no entry can hold them), nor
    a word no entry uses that holds a shorter word of the message some entry does (心理系 beside 心理: the knowledge
    writes that compound another way, 心理学系, and the shorter word counts already)."""
    plain = [u for u in units if isinstance(u, str)]

    def aside(unit: Unit) -> bool:
        if not isinstance(unit, str) or df.get(unit, 0):
            return False
        return unit in ASKING_WORDS or any(w != unit and w in unit and df.get(w, 0) for w in plain)

    return [u for u in units if not aside(u)]


# Characters jieba glues to a verb that no entry writes that way: a modal, a negation or a question word before it
# (能接, 不接, 哪来), a completive after it (关掉, 删完). Without them the verb may be the entry's own word.
GLUED_BEFORE = frozenset("能不会可没别要该")
GLUED_AFTER = frozenset("掉完好住")
GLUED = GLUED_BEFORE | GLUED_AFTER


def _forms(word: str) -> list[str]:
    """``word`` and, when a glued character starts or ends it, the rest."""
    forms = [word]
    if len(word) >= 2 and word[0] in GLUED_BEFORE:
        forms.append(word[1:])
    if len(word) >= 2 and word[-1] in GLUED_AFTER:
        forms.append(word[:-1])
    return [f for f in forms if not set(f) <= GLUED]  # 能掉 is no verb


def held_inside(words: Sequence[str], entry: Entry, entry_words: AbstractSet[str]) -> int:
    """How many of ``words`` (words no entry holds as a word) begin or end a longer word of ``entry`` (its
    ``entry_words``): a short form of the entry's term (接 for 接入, 千问 for 通义千问), not characters that merely
    run across two of its words; a word glued to a modal or a completive (能接, 关掉) counts by its verb."""
    # the text first: one scan in C tells most entries apart before their words are looked at
    text = folded("\n".join((*entry.phrasings, *entry.metadata, entry.text)))

    def held(form: str, word: str) -> bool:
        if form not in text:
            return False
        if form != word and form in entry_words:
            return True
        return any(t != form and (t.startswith(form) or t.endswith(form)) for t in entry_words)

    return sum(any(held(form, w) for form in _forms(w)) for w in words)


def backward(phrasing: AbstractSet[str], said: AbstractSet[str], idf: Mapping[str, float]) -> float:
    """The share of a phrasing's IDF mass (``idf``: each of its words') found among the message's terms ``said``
    (1 for a word-less phrasing)."""
    total = sum(idf[w] for w in phrasing)
    return sum(idf[w] for w in phrasing if w in said) / total if total > 0 else 1.0


class SparseSearcher(Searcher):
    """A BM25 searcher whose hits carry coverage as their relevance; subclasses supply the word statistics."""

    system = "sparse"

    def __init__(self, tokenizer: Tokenizer) -> None:
        """Cut with ``tokenizer``; the caches of entries' words, specifics and questions' units start empty."""
        self.tokenizer = tokenizer
        self._entry_words = EntryWords(tokenizer)
        self._specifics = SpecificsCache()
        self._question_units = QuestionUnits()

    @abstractmethod
    def term_stats(self, words: Sequence[str]) -> TermStats:
        """Document frequencies of ``words`` over the indexed entries (all fields), and the number of entries."""

    synonyms: Synonyms | None = None  # set by the factory when knowledge.synonyms names a file
    translator: QueryTranslator | None = None  # set by the factory with retrieval.sparse.translate
    homophones: Homophones | None = None  # set by the factory with retrieval.sparse.homophones

    def question_words(self, question: str) -> list[str]:
        """The distinct words of a question, as the index cuts them."""
        return list(dict.fromkeys(self.tokenizer.tokenize(question)))

    def question_units(self, question: str) -> list[Unit]:
        """The question's words; with synonyms, the words of each group found become one unit of alternatives; an
        English question's words, with their Chinese renderings the knowledge uses (bot/search/crosslingual.py)."""
        return self.searched_units(question)[0]

    def searched_units(self, question: str) -> tuple[list[Unit], bool]:
        """The question's units (:meth:`question_units`), and whether its words were searched with their renderings
        in the knowledge's language."""
        units = self._said_units(question)
        translated = self._translated(question, units)
        return (self._heard(question, units), False) if translated is None else (translated, True)

    def translates(self, question: str) -> bool:
        """True when ``question``'s words are searched with their renderings in the knowledge's language."""
        if self.translator is None or language_of(question) != "en":  # no need to cut a Chinese message again
            return False
        return self._translated(question, self._said_units(question)) is not None

    def _translated(self, question: str, units: list[Unit]) -> list[Unit] | None:
        if self.translator is None or not units or language_of(question) != "en":
            return None
        return self.translator.units(question, units, self.term_stats)

    def _heard(self, question: str, units: list[Unit]) -> list[Unit]:
        """``units`` with each run of ``question`` read as the knowledge's word of the same sound
        (bot/search/homophones.py) turned into one unit: that word, or the run's terms as typed."""
        if self.homophones is None or not units:
            return units
        heard = self.homophones.heard(question, lambda words: self.term_stats(words).df)
        if not heard:
            return units
        typed = {t for h in heard for t in h.typed}
        return [u for u in units if not isinstance(u, str) or u not in typed] + [(h.typed, (h.meant,)) for h in heard]

    def _said_units(self, question: str) -> list[Unit]:
        synonyms = self.synonyms
        if synonyms is None:
            key = (question, self.tokenizer.state_key(), -1)
            return self._question_units.get(key, lambda: list(self.question_words(question)))
        synonyms.current()  # first: a changed file can add words to the tokenizer that cuts the question
        key = (question, self.tokenizer.state_key(), synonyms.version)
        return self._question_units.get(key, lambda: synonyms.units(question, self.question_words(question)))

    def entry_words(self, entry: Entry) -> frozenset[str]:
        """The words of an entry (cached by content)."""
        return self._entry_words(entry)

    @property
    def words(self) -> EntryWords:
        """The cache of entries' words, which an index's writes fill from the tokens it cut."""
        return self._entry_words

    def share_caches(self, other: SparseSearcher) -> None:
        """Read entries' words, specifics and questions' units from ``other``'s caches (a staging copy of it: the same tokenizer,
        and both caches are keyed by content, so an entry in both indexes is cut once)."""
        if other.tokenizer is not self.tokenizer:
            raise ValueError("only a searcher with the same tokenizer can share its entries' words")
        self._entry_words, self._specifics = other._entry_words, other._specifics
        self._question_units = other._question_units

    def agreements(self, question: str, entries: Sequence[Entry]) -> list[Agreement]:
        """How well ``question`` and each entry's questions agree, both ways (bot/search/agreement.py)."""
        if not entries:
            return []
        entry_specifics = self._specifics
        units = self.question_units(question)
        # an entry's phrasings hold the words inside its keywords (Tokenizer.index_tokens): a message holding the
        # keyword whole says them too
        said_terms = set(self.tokenizer.with_inner_words(unit_terms(units)))
        said = specifics(question)
        asks = asked_kinds(question)
        qualified = qualifiers(question)
        words = self._entry_words
        phrasings = [words.phrasings(e) for e in entries]
        phrasing_words = {w for ps in phrasings for p in ps for w in p}
        stats = self.term_stats([*said_terms, *phrasing_words])
        content = content_units(units, stats.df)
        weights = QuestionWeights(content, stats)
        # most messages say no such word: their weights are those of every unit, weighed once
        said_weights = weights if len(content) == len(units) else QuestionWeights(units, stats)
        share = weights.total / said_weights.total if weights.total > 0 else 0.0
        idf = {w: stats.idf(w) for w in phrasing_words}
        # the content words no entry holds as a word weigh as much as the rarest word; an entry may hold one inside
        # its own words (接 in 接入, 千问 in 通义千问), which coverage cannot see
        unheld = [u for u in content if isinstance(u, str) and not stats.df.get(u, 0)]
        unheld_share = stats.idf_of_df(0) / said_weights.total if unheld and said_weights.total > 0 else 0.0
        out = []
        for entry, entry_phrasings in zip(entries, phrasings):
            keywords = words.keywords(entry)
            pairs = [(weights.coverage(p | keywords), backward(p, said_terms, idf)) for p in entry_phrasings]
            forward, back = max(pairs, key=lambda fb: (fb[0] + fb[1], fb[0])) if pairs else (0.0, 0.0)
            facts = entry_specifics(entry.content_hash, [*entry.phrasings, *entry.metadata], entry.text, entry.document)
            unmet = not asks <= facts.offers
            specific = agree_specifics(said, facts.labelled, facts.mentioned)
            named = not said.isdisjoint(facts.labelled)
            inside = unheld_share * held_inside(unheld, entry, words(entry)) if unheld_share else 0.0
            contrast = contrasts(qualified, facts.qualified)
            names_asked = asks <= facts.names if asks else None
            out.append(
                Agreement(
                    forward,
                    back,
                    *specific,
                    content=share,
                    unmet=unmet,
                    named=named,
                    inside=inside,
                    contrast=contrast,
                    names_asked=names_asked,
                )
            )
        return out

    def matched_question(self, weights: QuestionWeights, entry: Entry) -> str:
        """The alternative question of ``entry`` that covers more of the question (``weights``) than its query
        does, else ""."""
        if not entry.questions:
            return ""
        scores = [weights.coverage(w) for w in self._entry_words.phrasings(entry)]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return entry.phrasings[best] if best and scores[best] > scores[0] else ""

    def sparse_hit(self, entry: Entry, weights: QuestionWeights, score: float, translated: bool = False) -> Hit:
        """A hit with coverage (of the question's ``weights``) as relevance, the BM25 ``score`` and the alternative
        question that matched, if any; ``translated``: the question's words were searched with their dictionary
        renderings (signal ``translated``)."""
        relevance = weights.coverage(self.entry_words(entry))
        signals = {"bm25": score, "coverage": relevance}
        if translated:
            signals[TRANSLATED] = 1.0
        return Hit(entry, relevance, score, self.name, signals, matched_question=self.matched_question(weights, entry))

    @staticmethod
    def follow_ranking(hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` (BM25 order) with relevance that never rises down the ranking, so the sources read in order
        and a small gap between two hits means they are close (the clarify margin).

        The top hit keeps its coverage (the answer decision is calibrated on it); each next one gets at most its
        own coverage, the previous hit's relevance, and the top's relevance scaled by its share of the top BM25
        score: two entries covering the whole question stay apart by how much better one matches. Coverage stays
        in the signals (hybrid fuses it, not this).
        """
        if not hits:
            return []
        top, out = hits[0], [hits[0]]
        previous = top.relevance
        for hit in hits[1:]:
            share = hit.score / top.score if top.score > 0 else 1.0
            relevance = min(hit.relevance, previous, top.relevance * share)
            out.append(rescored(hit, relevance))
            previous = relevance
        return out

    def relevances(self, question: str, entries: Sequence[Entry]) -> list[float]:
        """Coverage of each entry for ``question`` (used by hybrid for entries only the dense side found)."""
        units = self.question_units(question)
        if not units or not entries:
            return [0.0] * len(entries)
        weights = QuestionWeights(units, self.term_stats(unit_terms(units)))
        return [weights.coverage(self.entry_words(e)) for e in entries]
