"""The unanswered-questions inbox: near-duplicate questions grouped, with the entries that almost answered them.

Questions are compared in a normal form (NFKC, lower case, no punctuation, symbols or whitespace), so
"图书馆几点开门？", "图书馆几点开门" and "图书馆 几点开门!" are one question. Distinct normal forms whose
character-bigram sets have a Jaccard similarity of at least ``threshold`` are merged too (single linkage), found
with a prefix-filtered similarity join (PPJoin) rather than comparing all pairs.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from bot.search.script import folded

# Strategy names older logs hold, and the one name each goes by now (misses used to "escalate" to the hand-off).
RENAMED_STRATEGIES = {"escalate": "handoff"}
SIMILARITY = 0.8  # bigram Jaccard at or above which two questions are one group
CANDIDATES_SHOWN = 3


def normalise(text: str) -> str:
    """The comparison form of a question: NFKC, lower case, traditional Chinese as simplified, without punctuation,
    symbols, controls or whitespace."""
    text = folded(text or "")
    kept = "".join(ch for ch in text if unicodedata.category(ch)[0] not in "PSZC")
    return kept or text.strip()


def bigrams(norm: str) -> frozenset[str]:
    """The character bigrams of a normal form (a one-character form is its own single token)."""
    return frozenset(norm[i : i + 2] for i in range(len(norm) - 1)) or frozenset([norm])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def similar_pairs(norms: Sequence[str], threshold: float = SIMILARITY) -> list[tuple[int, int]]:
    """Index pairs of ``norms`` whose bigram Jaccard ≥ ``threshold`` (PPJoin: size, prefix and position filters)."""
    sets = [bigrams(n) for n in norms]
    freq: dict[str, int] = defaultdict(int)
    for s in sets:
        for token in s:
            freq[token] += 1
    ordered = [sorted(s, key=lambda t: (freq[t], t)) for s in sets]  # rarest tokens first: short posting lists
    ratio, eps = threshold / (1 + threshold), 1e-9  # J(x, y) ≥ t  ⇔  |x ∩ y| ≥ t/(1+t)·(|x| + |y|)
    index: dict[str, list[tuple[int, int]]] = defaultdict(list)
    lengths = [len(s) for s in sets]
    pairs = []
    for i in sorted(range(len(sets)), key=lengths.__getitem__):
        x, size = ordered[i], lengths[i]
        smallest = threshold * size - eps
        overlap: dict[int, int] = {}  # candidate -> common tokens seen in the prefixes; -1 once ruled out
        for p, token in enumerate(x[: size - math.ceil(threshold * size - eps) + 1]):
            left = size - p - 1
            for j, q in index[token]:
                seen = overlap.get(j, 0)
                other = lengths[j]
                if seen < 0 or other < smallest:
                    continue
                rest = min(left, other - q - 1)  # the bound never grows for later tokens
                overlap[j] = seen + 1 if seen + 1 + rest >= ratio * (size + other) - eps else -1
        for j, seen in overlap.items():
            if seen > 0 and len(sets[i] & sets[j]) >= ratio * (size + lengths[j]) - eps:
                pairs.append((j, i))
        for q, token in enumerate(x[: size - math.ceil(2 * ratio * size - eps) + 1]):
            index[token].append((i, q))
    return pairs


class StoredHit(TypedDict):
    """One hit of a turn as the log stores it (JSON): the entry, its scores, whether it passed and was used."""

    id: str
    query: str
    relevance: float
    score: float
    searcher: str
    passed: bool
    used: bool
    subquestion: NotRequired[str]  # the part of a split message (or the rewrite's phrasing) that found it


class AnsweredEntry(TypedDict):
    """An entry that answered a thumbs-down turn (JSON): its id and question."""

    id: str
    query: str


class NearMiss(AnsweredEntry):
    """A stored hit that did not pass (JSON): its relevance and the answer threshold it missed."""

    relevance: float
    threshold: float | None


class Candidate(NearMiss):
    """A group's near miss (JSON): its best relevance over the group's turns and how many turns it missed in."""

    seen: int


class SessionTurn(TypedDict):
    """A conversation's turn as the suggestions read it (JSON columns decoded)."""

    id: int
    time: str
    session: str
    question: str
    strategy: str
    hits: list[StoredHit]
    rating: int | None  # +1 / -1 feedback, None when unrated


class TurnRecord(TypedDict):
    """One stored turn (a row of the log's turns table, JSON columns decoded, flags as booleans): what the admin
    pages and the API show."""

    id: int
    time: str
    session: str | None
    source: str | None
    client: str | None
    question: str
    rewritten: str | None
    norm: str
    strategy: str
    mode: str | None
    hits: list[StoredHit]
    thresholds: dict[str, float | None] | None
    timings: dict[str, float] | None
    latency_ms: float | None
    llm: str | None
    llm_used: bool
    answer: str | None
    hypothetical: str | None
    notices: list[str] | None
    finished: bool
    rating: int | None
    reason: str | None
    rated_at: str | None
    top_relevance: float | None


@dataclass(frozen=True)
class AskedTurn:
    """One turn that went unanswered (a fallback strategy or a thumbs down), as the inbox needs it."""

    id: int
    time: str
    question: str
    norm: str
    strategy: str
    rating: int | None = None
    reason: str | None = None
    near_misses: tuple[NearMiss, ...] = ()  # stored hits that did not pass
    answered: tuple[AnsweredEntry, ...] = ()  # a thumbs-down turn's used hits: the entries that answered wrong

    @classmethod
    def from_row(cls, row: Mapping) -> AskedTurn:
        """From a row of the log's turns table (hits and thresholds as stored JSON)."""
        cutoff = (json.loads(row["thresholds"]) or {}).get("answer") if row["thresholds"] else None
        misses = tuple(
            NearMiss({"id": h["id"], "query": h["query"], "relevance": h["relevance"], "threshold": cutoff})
            for h in json.loads(row["hits"])
            if not h.get("passed")
        )
        # The entry that answered is the first used hit (of each part of a split question): the others were listed
        # under "other related entries" or given as further references, not the answer the thumbs down was for.
        tops: dict[str, AnsweredEntry] = {}
        for h in json.loads(row["hits"]) if row["rating"] == -1 else ():
            if h.get("used"):
                tops.setdefault(h.get("subquestion", ""), AnsweredEntry({"id": h["id"], "query": h["query"]}))
        used = tuple(tops.values())
        return cls(
            row["id"],
            row["time"],
            row["question"],
            row["norm"],
            strategy_name(row["strategy"]),
            row["rating"],
            row["reason"],
            misses,
            used,
        )


def strategy_name(stored: str) -> str:
    """The name a stored strategy goes by now (an older log's ``escalate`` is ``handoff``)."""
    return RENAMED_STRATEGIES.get(stored, stored)


@dataclass(frozen=True)
class Group:
    """Near-duplicate unanswered questions: how often, when last, an example, and the entries that almost passed.

    ``key`` is the normal form of the most asked member; pass it to ``TurnLog.dismiss``. ``candidates`` are the
    best hits below the threshold over the group's turns (id, query, best relevance, threshold, times seen);
    ``answered`` the entries that answered its thumbs-down turns (id, query): the question may be their phrasing.
    """

    key: str
    count: int
    latest: str
    question: str
    questions: tuple[str, ...]
    strategies: dict[str, int]
    thumbs_down: int
    reasons: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    turn_ids: tuple[int, ...] = field(repr=False, default=())
    norms: frozenset[str] = field(repr=False, default=frozenset())
    answered: tuple[AnsweredEntry, ...] = ()

    def to_dict(self) -> dict:
        """JSON-ready form (without the member normal forms)."""
        return {
            "key": self.key,
            "count": self.count,
            "latest": self.latest,
            "question": self.question,
            "questions": list(self.questions),
            "strategies": dict(self.strategies),
            "thumbs_down": self.thumbs_down,
            "reasons": list(self.reasons),
            "candidates": [dict(c) for c in self.candidates],
            "answered": [dict(a) for a in self.answered],
            "turn_ids": list(self.turn_ids),
        }


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def group_turns(turns: Iterable[AskedTurn], threshold: float = SIMILARITY, sort: str = "latest") -> list[Group]:
    """Group turns by near-duplicate question; ``sort`` "latest" (newest, then most asked) or "count" (the reverse)."""
    by_norm: dict[str, list[AskedTurn]] = defaultdict(list)
    for t in turns:
        by_norm[t.norm].append(t)
    norms = list(by_norm)
    parent = list(range(len(norms)))
    for a, b in similar_pairs(norms, threshold):
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict[int, list[str]] = defaultdict(list)
    for i, norm in enumerate(norms):
        members[_find(parent, i)].append(norm)
    groups = [_group([t for n in ns for t in by_norm[n]], {n: len(by_norm[n]) for n in ns}) for ns in members.values()]
    if sort == "count":
        groups.sort(key=lambda g: (g.count, g.latest), reverse=True)
    else:
        groups.sort(key=lambda g: (g.latest, g.count), reverse=True)
    return groups


def _group(turns: list[AskedTurn], counts: dict[str, int]) -> Group:
    turns.sort(key=lambda t: (t.time, t.id), reverse=True)
    latest_of: dict[str, str] = {}  # norm -> time of its latest turn
    for t in turns:
        latest_of.setdefault(t.norm, t.time)
    key = max(counts, key=lambda n: (counts[n], latest_of[n], n))
    example = next(t.question for t in turns if t.norm == key)
    strategies: dict[str, int] = defaultdict(int)
    best: dict[str, Candidate] = {}
    for t in turns:
        strategies[t.strategy] += 1
        for miss in t.near_misses:
            old = best.get(miss["id"])
            seen = old["seen"] + 1 if old else 1
            if old is None or miss["relevance"] > old["relevance"]:
                best[miss["id"]] = Candidate(**miss, seen=seen)
            else:
                old["seen"] = seen
    candidates = sorted(best.values(), key=lambda c: c["relevance"], reverse=True)[:CANDIDATES_SHOWN]
    return Group(
        key=key,
        count=len(turns),
        latest=turns[0].time,
        question=example,
        questions=tuple(dict.fromkeys(t.question for t in turns))[:5],
        strategies=dict(strategies),
        thumbs_down=sum(1 for t in turns if t.rating == -1),
        reasons=tuple(dict.fromkeys(t.reason for t in turns if t.reason))[:5],
        candidates=tuple(candidates),
        turn_ids=tuple(t.id for t in turns),
        norms=frozenset(counts),
        answered=tuple({a["id"]: a for t in turns for a in t.answered}.values())[:CANDIDATES_SHOWN],
    )
