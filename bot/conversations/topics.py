"""Topics: the questions of a period grouped by meaning, each named by its most central question.

Distinct questions (the inbox's normal form) are embedded with e5 (question role) and clustered with scikit-learn:
up to ``DIRECT`` questions by agglomerative clustering (cosine, average linkage, cut at ``distance``); above that,
k-means first folds them into ``MICRO`` weighted micro-clusters and the agglomerative clustering groups those
(a 100k-question log in seconds rather than the hours of an all-pairs linkage; BENCHMARKS.md "Topics"). A topic's
name is its question closest to the topic's mean vector (weighted by how often each was asked); its size counts
turns, its unanswered share the turns that fell back, were handed off or got a thumbs down (or a "no").

Question vectors are kept in their own store beside the embedding cache (``questions.sqlite``): visitors' questions
never evict the entries' vectors. Encoding is the slow part (about 45 short questions a second per core with e5):
a computation encodes at most ``encode_seconds`` worth of new questions and leaves the rest, counted, to the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.config.base import default_of
from bot.config.operating import TopicSettings
from bot.conversations.log_store import ConversationLog, utc_iso
from bot.conversations.tiles import Stats, StatsFilter, Tile

if TYPE_CHECKING:
    from bot.config.settings import Settings
    from bot.conversations.inbox import Group
    from bot.search.encoders.cache import EmbeddingCache

DIRECT = 3000  # at most this many questions are clustered pair by pair
# A larger set is folded by k-means into as many micro-clusters as are linked pair by pair: 100,000 questions in
# seconds with a random start (k-means++ took ten times longer), and groups as fine as DIRECT allows.
MICRO = DIRECT
TREND_DAYS = 7
ENCODE_BATCH = 64
QUESTIONS_FILE = "questions.sqlite"
# A question is unanswered in its turn when it fell back, went to a person, or got a thumbs down (a "no" included).
UNANSWERED_SQL = "(strategy IN ('hyde', 'last_resort', 'escalate', 'handoff', 'held') OR rating = -1)"
Encode = Callable[[Sequence[str]], np.ndarray]  # texts -> unit rows, one per text


@dataclass(frozen=True)
class Asked:
    """One distinct question of the period: an example text, how often, how often unanswered, its trend."""

    norm: str
    text: str
    turns: int
    unanswered: int = 0
    recent: int = 0
    earlier: int = 0


@dataclass(frozen=True)
class Topic:
    """A group of questions that mean the same: its most central question, size and what share went unanswered."""

    name: str
    turns: int
    questions: int
    unanswered: int
    recent: int
    earlier: int
    examples: tuple[str, ...]
    norms: frozenset[str]

    @property
    def unanswered_share(self) -> float:
        """Unanswered turns / turns."""
        return round(self.unanswered / self.turns, 4) if self.turns else 0.0

    @property
    def trend(self) -> str:
        """Turns of the last 7 days against the 7 before: "↑ 3", "↓ 2" or "→"."""
        change = self.recent - self.earlier
        return f"↑ {change}" if change > 0 else f"↓ {-change}" if change < 0 else "→"


@dataclass(frozen=True)
class Topics:
    """The topics of a set of questions, largest first, and what was left out (``note``, None: nothing)."""

    topics: tuple[Topic, ...]
    questions: int
    note: str | None = None

    def tile(self, top: int) -> Tile:
        """The ``top`` largest topics as the analytics tile ``topics``."""
        return Tile(
            "topics",
            "问题主题（按语义分组）/ Topics (questions grouped by meaning)",
            ("topic", "turns", "questions", "unanswered_share", "last_7_days", "previous_7_days", "trend", "examples"),
            tuple(
                (t.name, t.turns, t.questions, t.unanswered_share, t.recent, t.earlier, t.trend, " | ".join(t.examples))
                for t in self.topics[:top]
            ),
            note=self.note,
        )


def cluster(vectors: np.ndarray, weights: np.ndarray, distance: float, random_state: int = 0) -> np.ndarray:
    """A topic label per row of ``vectors`` (unit rows): rows closer than ``distance`` share one.

    Cosine distance, average linkage; above DIRECT rows, k-means micro-clusters (weighted) are what is linked.
    """
    from sklearn.cluster import AgglomerativeClustering, MiniBatchKMeans

    n = len(vectors)
    if n < 2:
        return np.zeros(n, dtype=int)
    link = AgglomerativeClustering(n_clusters=None, distance_threshold=distance, metric="cosine", linkage="average")
    if n <= DIRECT:
        return link.fit_predict(vectors)
    kmeans = MiniBatchKMeans(
        n_clusters=MICRO,
        init="random",
        batch_size=2048,
        max_iter=5,
        n_init=1,
        random_state=random_state,
        max_no_improvement=3,
    )
    micro = kmeans.fit_predict(vectors, sample_weight=weights)
    centres = kmeans.cluster_centers_
    norms = np.linalg.norm(centres, axis=1, keepdims=True)
    used = np.unique(micro)
    labels = np.full(len(centres), -1)
    labels[used] = link.fit_predict(centres[used] / np.maximum(norms[used], 1e-12))
    return labels[micro]


def group(asked: Sequence[Asked], vectors: np.ndarray, distance: float, shown: int = 3) -> list[Topic]:
    """The topics of ``asked`` (one unit vector each), largest first."""
    weights = np.array([a.turns for a in asked], dtype=np.float32)
    labels = cluster(vectors, weights, distance)
    topics = []
    for label in np.unique(labels):
        members = [int(i) for i in np.flatnonzero(labels == label)]
        mean = (vectors[members] * weights[members, None]).sum(axis=0)
        central = members[int(np.argmax(vectors[members] @ mean))]
        by_count = sorted(members, key=lambda i: (-asked[i].turns, asked[i].norm))
        topics.append(
            Topic(
                name=asked[central].text,
                turns=sum(asked[i].turns for i in members),
                questions=len(members),
                unanswered=sum(asked[i].unanswered for i in members),
                recent=sum(asked[i].recent for i in members),
                earlier=sum(asked[i].earlier for i in members),
                examples=tuple(asked[i].text for i in by_count[:shown]),
                norms=frozenset(asked[i].norm for i in members),
            )
        )
    topics.sort(key=lambda t: (-t.turns, t.name))
    return topics


class QuestionVectors:
    """e5 vectors of visitors' questions in their own store, encoded on demand within a time budget."""

    def __init__(self, encoder: Any, store: EmbeddingCache, clock: Callable[[], float] = time.monotonic):
        self.encoder = encoder
        self.store = store
        self.clock = clock

    def vectors(self, texts: Sequence[str], seconds: float | None) -> tuple[dict[str, np.ndarray], int]:
        """text -> unit vector for the ``texts`` stored or encodable in time, and how many were left to encode.

        ``seconds`` bounds the encoding (None: no limit).
        """
        from bot.search.encoders.cache import cache_key

        signature = self.encoder.signature()
        keys = {t: cache_key(signature, "question", t) for t in texts}
        found = self.store.get_many(keys.values(), None, touch=False)
        out = {t: found[k] for t, k in keys.items() if k in found}
        missing = [t for t in texts if t not in out]
        start = self.clock()
        done = 0
        for i in range(0, len(missing), ENCODE_BATCH):
            if seconds is not None and i and self.clock() - start > seconds:
                break
            batch = missing[i : i + ENCODE_BATCH]
            rows = np.asarray(self.encoder.encode_questions(batch), dtype=np.float32)
            self.store.put_many({keys[t]: row for t, row in zip(batch, rows, strict=True)})
            out.update(zip(batch, rows, strict=True))
            done += len(batch)
        return out, len(missing) - done


@dataclass
class TopicFinder:
    """Topics of the log's questions (``log.topics``), with the question vectors it reads and fills."""

    vectors: QuestionVectors | None
    distance: float = default_of(TopicSettings, "distance")
    min_questions: int = default_of(TopicSettings, "min_questions")
    max_questions: int = default_of(TopicSettings, "max_questions")
    encode_seconds: float | None = default_of(TopicSettings, "encode_seconds")
    why_not: str = ""  # why there are no vectors (the e5 extra missing), shown as the tile's note

    def asked(self, log: ConversationLog, flt: StatsFilter, now: datetime) -> tuple[list[Asked], int]:
        """The distinct questions of ``flt`` and how many more there were.

        The most asked first, at most ``max_questions``.
        """
        where, args = flt.where()
        mid, start = utc_iso(now - timedelta(days=TREND_DAYS)), utc_iso(now - timedelta(days=2 * TREND_DAYS))
        rows = log.query(
            f"SELECT norm, MAX(question), COUNT(*), SUM(CASE WHEN {UNANSWERED_SQL} THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN time >= ? THEN 1 ELSE 0 END), SUM(CASE WHEN time >= ? AND time < ? THEN 1 ELSE 0 END) "
            f"FROM turns WHERE {where} AND norm != '' GROUP BY norm ORDER BY 3 DESC, 1",
            [mid, start, mid, *args],
        )
        asked = [Asked(n, q, int(c), int(u or 0), int(r or 0), int(e or 0)) for n, q, c, u, r, e in rows]
        return asked[: self.max_questions], max(0, len(asked) - self.max_questions)

    def find(self, asked: Sequence[Asked], skipped: int = 0) -> Topics:
        """The topics of ``asked``; too few questions, or no vectors, give none and a note that says why."""
        if self.vectors is None:
            return Topics((), len(asked), self.why_not or "没有 e5 向量 / no e5 vectors")
        if len(asked) < self.min_questions:
            return Topics(
                (),
                len(asked),
                f"问题太少，不分组 / Too few questions to group: {len(asked)} distinct, at least "
                f"{self.min_questions} needed",
            )
        found, left = self.vectors.vectors([a.text for a in asked], self.encode_seconds)
        kept = [a for a in asked if a.text in found]
        notes = []
        if skipped:
            notes.append(
                f"只分组最常问的 {len(asked)} 个，略过 {skipped} 个 / grouped the {len(asked)} most asked, skipped {skipped}"
            )
        if left:
            notes.append(f"{left} 个问题尚未编码，下次再分组 / {left} questions not encoded yet: grouped next time")
        if len(kept) < self.min_questions:
            return Topics((), len(asked), "; ".join(notes) or None)
        vectors = np.stack([found[a.text] for a in kept])
        return Topics(tuple(group(kept, vectors, self.distance)), len(kept), "; ".join(notes) or None)

    def topics(self, log: ConversationLog, flt: StatsFilter, now: datetime) -> Topics:
        """The topics of the log's questions that ``flt`` selects; trends end at ``now``."""
        asked, skipped = self.asked(log, flt, now)
        return self.find(asked, skipped)

    def merge(self, groups: Sequence[Group]) -> list[list[Group]]:
        """The inbox's near-duplicate groups joined by topic (same clustering, on each group's question).

        In the order of each topic's first group; without vectors or with too few groups, each group alone.
        """
        if self.vectors is None or len(groups) < 2:
            return [[g] for g in groups]
        found, _ = self.vectors.vectors([g.question for g in groups], self.encode_seconds)
        placed = [n for n, g in enumerate(groups) if g.question in found]
        if len(placed) < 2:
            return [[g] for g in groups]
        labels = cluster(np.stack([found[groups[n].question] for n in placed]), np.ones(len(placed)), self.distance)
        label_of = {n: int(label) for n, label in zip(placed, labels, strict=True)}
        merged: dict[tuple[str, int], list[Group]] = {}
        for n, g in enumerate(groups):
            key = ("topic", label_of[n]) if n in label_of else ("alone", n)
            merged.setdefault(key, []).append(g)
        return list(merged.values())


def with_topics(stats: Stats, finder: TopicFinder | None, log: ConversationLog, top: int) -> Stats:
    """``stats`` with the topics tile (none without a finder)."""
    if finder is None:
        return stats
    found = finder.topics(log, stats.filter, stats.filter.until or log.clock())
    return Stats(filter=stats.filter, tiles=(*stats.tiles, found.tile(top)))


def joined(members: Sequence[Group]) -> Group:
    """One inbox group of several that share a topic: the most asked one's key and question first, counts added."""
    from bot.conversations.inbox import Group

    if len(members) == 1:
        return members[0]
    ordered = sorted(members, key=lambda g: (-g.count, g.key))
    first = ordered[0]
    strategies: dict[str, int] = {}
    for g in ordered:
        for name, n in g.strategies.items():
            strategies[name] = strategies.get(name, 0) + n
    candidates = sorted((c for g in ordered for c in g.candidates), key=lambda c: -c["relevance"])
    return Group(
        key=first.key,
        count=sum(g.count for g in ordered),
        latest=max(g.latest for g in ordered),
        question=first.question,
        questions=tuple(dict.fromkeys(q for g in ordered for q in g.questions))[:8],
        strategies=strategies,
        thumbs_down=sum(g.thumbs_down for g in ordered),
        reasons=tuple(dict.fromkeys(r for g in ordered for r in g.reasons))[:5],
        candidates=tuple({c["id"]: c for c in candidates}.values())[:3],
        turn_ids=tuple(i for g in ordered for i in g.turn_ids),
        norms=frozenset(n for g in ordered for n in g.norms),
        answered=tuple({a["id"]: a for g in ordered for a in g.answered}.values())[:3],
    )


def topic_finder_from_settings(settings: Settings) -> TopicFinder:
    """A TopicFinder with e5 (``retrieval.dense.e5``) and the question store under ``state_dir``.

    Without the e5 extra or scikit-learn, one whose tile says what to install.
    """
    t = settings.log.topics
    finder = TopicFinder(None, t.distance, t.min_questions, t.max_questions, t.encode_seconds)
    try:
        import sklearn  # noqa: F401 - checked here so the tile says what is missing

        from bot.search.encoders import E5Encoder
        from bot.search.encoders.cache import EmbeddingCache

        e = settings.retrieval.dense.e5
        folder = settings.resolve(settings.state_dir) / "embeddings"
        encoder = E5Encoder(folder, e.num_threads, e.batch_size, e.variant, build_workers=1)
        store = EmbeddingCache(Path(folder) / QUESTIONS_FILE, max_rows=2 * t.max_questions)
    except Exception as exc:  # a missing extra: no topics, and the note says which
        finder.why_not = f"主题需要 e5 和 scikit-learn / topics need the e5 and topics extras: {exc}"
        return finder
    finder.vectors = QuestionVectors(encoder, store)
    return finder
