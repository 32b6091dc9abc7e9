"""Long documents as passages: cut at index time, each searched on its own, rolled up to one hit per entry.

An entry whose document is longer than ``size`` characters reaches the indexes as several *units*, one per
passage: the entry's query, questions and metadata with one passage as the document, under the id
``<entry id>\\x1f<n>``. Short entries reach them unchanged (same id, same content hash), so their indexes,
scores and thresholds are exactly what they were without passages. A search asks the indexes for more units
than it needs and keeps, per entry, its best unit's relevance and every passage found (best first): the prompt
and the sources show the entry's best passages within a character budget (:func:`excerpt`).

Passages end on paragraph and sentence boundaries; a longer sentence is cut at a comma, else between two
characters, never inside one (a surrogate pair, a combining mark, an emoji sequence joined by ZWJ or a
variation selector stays whole). Each passage repeats the whole sentences at the end of the previous one up to
``overlap`` characters, so a fact stated across a boundary is found whole in one of the two.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import replace

from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.knowledge.markup import plain_text
from bot.search.base import Composite, Hit, ModeSearcher, Passage, Searcher

# Separates an entry's id from a passage number in a unit's id; a control character, so no id typed in a knowledge
# file or the editor contains it.
UNIT_SEPARATOR = "\x1f"
ELLIPSIS = "…"
# A sentence ends after these (plus closing quotes/brackets and the spaces that follow), or at a line break.
_SENTENCE_END = re.compile(r"(?:[。！？!?；;…]+|\.(?=\s))[”’」』）)\]\"']*\s*|\n\s*")
_SOFT_BREAK = re.compile(r"[，,、：:\s]")
_JOINERS = {"\u200d", "\u20e3"}  # zero-width joiner, combining enclosing keycap


def _joins(text: str, i: int) -> bool:
    """True when a cut before ``text[i]`` would split one character or one emoji/grapheme sequence."""
    if i <= 0 or i >= len(text):
        return False
    here, before = text[i], text[i - 1]
    if "\udc00" <= here <= "\udfff" and "\ud800" <= before <= "\udbff":  # a surrogate pair (strings from UTF-16)
        return True
    if before in _JOINERS or here in _JOINERS:
        return True
    code = ord(here)
    return (
        unicodedata.category(here).startswith("M")
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )  # marks, variation selectors, skin tones, tags


def safe_cut(text: str, i: int, low: int = 0) -> int:
    """The nearest cut at or before ``i`` (but after ``low``) that splits no character; ``i`` itself if none."""
    j = i
    while j > low + 1 and _joins(text, j):
        j -= 1
    return j if not _joins(text, j) else i


def _sentences(text: str, size: int) -> list[tuple[int, int]]:
    """Spans of sentences (with their trailing spaces); one longer than ``size`` is cut into pieces that fit."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            spans.append((start, match.end()))
            start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    out: list[tuple[int, int]] = []
    for s, e in spans:
        while e - s > size:
            window = text[s + size // 2 : s + size]
            soft = [m.end() for m in _SOFT_BREAK.finditer(window)]
            cut = s + size // 2 + soft[-1] if soft else safe_cut(text, s + size, s)
            out.append((s, cut))
            s = cut
        out.append((s, e))
    return out


def split_passages(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Spans ``[start, end)`` of passages of at most ``size`` characters covering ``text``; one span when it fits."""
    if len(text) <= size:
        return [(0, len(text))]
    sentences = _sentences(text, size)
    passages: list[tuple[int, int]] = []
    first = 0  # index in `sentences` of the current passage's first sentence
    for i in range(1, len(sentences) + 1):
        if i < len(sentences) and sentences[i][1] - sentences[first][0] <= size:
            continue
        passages.append((sentences[first][0], sentences[i - 1][1]))
        if i == len(sentences):
            break
        # the next passage starts with the last whole sentences of this one that fit in `overlap` (and leave room)
        nxt = i
        while (
            nxt - 1 > first
            and sentences[i - 1][1] - sentences[nxt - 1][0] <= overlap
            and sentences[i][1] - sentences[nxt - 1][0] <= size
        ):
            nxt -= 1
        first = nxt
    return passages


class Passages:
    """Cuts long entries into passage units for the indexes, and rolls unit hits back up to their entries."""

    def __init__(self, size: int, overlap: int):
        self.size, self.overlap = size, overlap
        self._units: dict[str, tuple[Entry, Passage]] = {}

    def expand(self, entries: Sequence[Entry]) -> list[Entry]:
        """What the indexes hold for ``entries``: short entries as they are, long ones as one unit per passage."""
        units: list[Entry] = []
        table: dict[str, tuple[Entry, Passage]] = {}
        for entry in entries:
            spans = split_passages(entry.document, self.size, self.overlap)
            if len(spans) == 1:
                units.append(entry)
                continue
            for n, (start, end) in enumerate(spans):
                unit = replace(
                    entry, id=f"{entry.id}{UNIT_SEPARATOR}{n}", document=plain_text(entry.document[start:end]).strip()
                )
                table[unit.id] = (entry, Passage(n, start, end))
                units.append(unit)
        self._units = table  # replaced whole: a search sees the old table or the new one, never a mix
        return units

    def rollup(self, hits: Sequence[Hit], top_k: int) -> list[Hit]:
        """One hit per entry, in the searcher's order: its best-ranked unit's, carrying every passage found in
        the searcher's order (best first)."""
        table = self._units
        best: dict[str, Hit] = {}
        found: dict[str, list[Passage]] = {}
        for hit in hits:
            known = table.get(hit.entry.id)
            if known is None and UNIT_SEPARATOR in hit.entry.id:
                continue  # a passage of an entry changed or removed since: the sync under way drops it
            entry, passage = known if known is not None else (hit.entry, None)
            if entry.id not in best:
                best[entry.id] = hit if entry is hit.entry else replace(hit, entry=entry)  # most are whole entries
                found[entry.id] = []
            if passage is not None:
                found[entry.id].append(replace(passage, relevance=hit.relevance))
        ranked = list(best.values())[:top_k]
        return [replace(h, passages=tuple(found[h.entry.id])) if found[h.entry.id] else h for h in ranked]


def excerpt(hit: Hit, budget: int) -> str:
    """The text of ``hit``'s entry to show: its best passages within ``budget`` characters, in document order,
    with "…" where text was skipped; a document without passages is cut at the budget."""
    document = hit.entry.document
    if not hit.passages:
        if len(document) <= budget:
            return document
        return document[: safe_cut(document, max(budget - 1, 1))].rstrip() + ELLIPSIS
    chosen: list[Passage] = []
    for passage in hit.passages:  # best first
        if _shown_chars(document, [*chosen, passage]) <= budget:
            chosen.append(passage)
    if not chosen:  # even the best passage is over the budget: its start
        top = hit.passages[0]
        cut = safe_cut(document, top.start + max(budget - 2, 1), top.start)
        return (ELLIPSIS if top.start else "") + document[top.start : cut].strip() + ELLIPSIS
    return _render(document, chosen)


def _merged(passages: Iterable[Passage]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for p in sorted(passages, key=lambda p: p.start):
        if spans and p.start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], p.end))
        else:
            spans.append((p.start, p.end))
    return spans


def _render(document: str, passages: Iterable[Passage]) -> str:
    spans = _merged(passages)
    text = ELLIPSIS.join(document[s:e].strip() for s, e in spans)
    return (ELLIPSIS if spans[0][0] > 0 else "") + text + (ELLIPSIS if spans[-1][1] < len(document.rstrip()) else "")


def _shown_chars(document: str, passages: Sequence[Passage]) -> int:
    return len(_render(document, passages))


class PassageSearcher(Composite):
    """A mode's searcher over passage units, returning one hit per entry (see the module's docstring)."""

    # Units asked for per hit wanted: a long entry's passages can fill the first ranks.
    DEPTH = 4

    def __init__(self, inner: ModeSearcher, passages: Passages):
        self.inner, self.passages = inner, passages
        self.name, self.system = inner.name, inner.system

    def check(self) -> str | None:
        """Why the inner searcher's index cannot serve, or None."""
        return self.inner.check()

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The best ``top_k`` entries (of those ``within`` admits), each with the passages that matched."""
        if top_k <= 0:
            return []
        depth = top_k * self.DEPTH
        while True:
            hits = self.inner.search(query, depth, within)
            rolled = self.passages.rollup(hits, top_k)
            if len(rolled) >= top_k or len(hits) < depth or depth >= top_k * self.DEPTH**3:
                return rolled
            depth *= self.DEPTH

    def leaves(self) -> list[Searcher]:
        """The inner searcher's indexes (they hold the passage units, which the knowledge index expands)."""
        return self.inner.leaves()
