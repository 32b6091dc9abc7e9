"""No edit published blind: replay real questions against the knowledge as an edit would leave it.

The questions are the distinct ones of the conversation log's last ``days`` days (the newest first, at most
``max_questions``: a log of a million turns replays its newest distinct questions and says how many it skipped) and
every question of every test set. Each is searched twice, in two staging indexes built in a scratch folder
(bot/search/staging_index.py): one over the knowledge as it is, one over the knowledge after the edit. Its answer
is what the ladder's answer rung would take: the best hit that passes the answer threshold, after the entries'
negative questions, drafts and validity (clarify, confirm and the LLM's fallbacks are not replayed). The entries
the edit touches count as published after it, so replaying a draft shows what publishing it would do.

A question *gains* an answer (none before, one after), *loses* it (the reverse) or *changes* entry. Dense and hybrid
modes need every question's vector: they come from the question store topics fill (bot/conversations/topics.py),
and the ones missing are encoded first (e5: about 45 questions a second per core).
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.chat.answer import Cutoffs
from bot.chat.negatives import NegativeExamples
from bot.config.base import default_of
from bot.config.operating import ReplaySettings
from bot.conversations.log_store import ConversationLog, utc_iso
from bot.conversations.topics import QUESTIONS_FILE, QuestionVectors
from bot.knowledge.entries import Entry, load_entries
from bot.knowledge.scratch import scratch_store
from bot.knowledge.store import KnowledgeStore
from bot.knowledge.validity import answers_on, in_window
from bot.search.background import Worker
from bot.search.base import ModeSearcher, dense_leaf
from bot.search.staging_index import fill, prepare, staged_copy

if TYPE_CHECKING:
    from bot.chat.recorder import TurnRecorder
    from bot.chat.turn_search import TurnSearch
    from bot.config.settings import Settings
    from bot.evaluation.testsets import TestSetStore
    from bot.search.encoders.cache import EmbeddingCache

log = logging.getLogger(__name__)

Edit = Callable[[KnowledgeStore], Iterable[str]]  # applies an edit to a store; the ids it wrote or deleted
WORKERS = 2  # searches run on this many threads (tantivy and FAISS release the GIL while they search)


@dataclass(frozen=True)
class Question:
    """One question to replay: its text, where it came from ("log" or "testset:<name>"), how often it was asked."""

    text: str
    source: str
    asked: int = 1


@dataclass(frozen=True)
class Answering:
    """The entry that answers a question, and the relevance it answered with."""

    id: str
    query: str
    relevance: float

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.id, "query": self.query, "relevance": round(self.relevance, 4)}


@dataclass(frozen=True)
class Change:
    """A question whose answer the edit changes: the entry before and after (None: no answer)."""

    question: str
    source: str
    asked: int
    before: Answering | None
    after: Answering | None

    @property
    def kind(self) -> str:
        """ "gained", "lost" or "changed"."""
        return "gained" if self.before is None else "lost" if self.after is None else "changed"

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {
            "question": self.question,
            "source": self.source,
            "asked": self.asked,
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
        }


@dataclass(frozen=True)
class Replay:
    """What an edit would change for the replayed questions."""

    replayed: int
    gained: tuple[Change, ...]
    lost: tuple[Change, ...]
    changed: tuple[Change, ...]
    mode: str
    skipped: int = 0  # distinct log questions of the period beyond the cap
    seconds: float = 0.0

    @property
    def needs_confirmation(self) -> bool:
        """True when some question would lose its answer or get another entry's."""
        return bool(self.lost or self.changed)

    def summary(self) -> str:
        """One line: how many questions, and how many gain, lose and change."""
        skipped = f", {self.skipped} older distinct questions skipped" if self.skipped else ""
        return (
            f"replayed {self.replayed} questions ({self.mode}{skipped}): {len(self.gained)} gain an answer, "
            f"{len(self.lost)} lose it, {len(self.changed)} change entry"
        )

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"replayed", "gained", "lost", "changed", "skipped", "mode", "seconds"}``."""
        return {
            "replayed": self.replayed,
            "gained": [c.to_dict() for c in self.gained],
            "lost": [c.to_dict() for c in self.lost],
            "changed": [c.to_dict() for c in self.changed],
            "skipped": self.skipped,
            "mode": self.mode,
            "seconds": round(self.seconds, 2),
        }


def log_questions(log: ConversationLog, days: int, cap: int, now: datetime) -> tuple[list[Question], int]:
    """The distinct questions of the log's last ``days`` days and how many more the period held.

    By normal form, newest first, at most ``cap``.
    """
    since = utc_iso(now - timedelta(days=days))
    total = int(log.query("SELECT COUNT(DISTINCT norm) FROM turns WHERE time >= ? AND norm != ''", [since])[0][0])
    rows = log.query(
        "SELECT MAX(question), COUNT(*) FROM turns WHERE time >= ? AND norm != '' GROUP BY norm "
        "ORDER BY MAX(id) DESC LIMIT ?",
        [since, cap],
    )
    return [Question(q, "log", int(n)) for q, n in rows], max(0, total - cap)


def testset_questions(store: TestSetStore | None, entries: Sequence[Entry]) -> list[Question]:
    """Every question of every stored test set (a set that no longer parses is left out)."""
    from bot.errors import BotError

    out: list[Question] = []
    if store is None:
        return out
    for name in store.names():
        try:
            out += [Question(q.question, f"testset:{name}") for q in store.cases(name, entries)]
        except BotError:
            continue
    return out


class Side:
    """One side of a replay: a staging index over some entries, and how a question gets its answer there."""

    def __init__(
        self,
        searcher: ModeSearcher,
        entries: Sequence[Entry],
        cutoffs: Callable[[str], Cutoffs],
        negatives: NegativeExamples,
        day: date,
        top_k: int,
        publishing: Collection[str] = (),
    ):
        self.searcher, self.entries, self.cutoffs = searcher, list(entries), cutoffs
        self.negatives, self.day, self.top_k, self.publishing = negatives, day, top_k, set(publishing)

    def _answers(self, entry: Entry) -> bool:
        if entry.id in self.publishing:
            return in_window(entry, self.day)
        return answers_on(entry, self.day)

    def answer(self, question: str) -> Answering | None:
        """The entry the answer rung would answer ``question`` from (None: nothing passes)."""
        hits = self.searcher.search(question, self.top_k)
        hits = [h for h in self.negatives.filter(question, hits, self.entries, self.searcher) if self._answers(h.entry)]
        if not hits or not self.cutoffs(self.searcher.system).passes(hits[0]):
            return None
        top = hits[0]
        return Answering(top.entry.id, top.entry.query, top.relevance)


class KeptAnswers:
    """The "before" side's answers for one version of the live knowledge, at most ``limit`` questions.

    They are the same for every edit's replay until the knowledge (or anything else a search reads) changes.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._version: tuple = ()
        self._answers: dict[str, Answering | None] = {}

    def known(self, version: tuple, questions: Iterable[str]) -> dict[str, Answering | None]:
        """The kept answers of ``questions`` for ``version`` (those not kept are left out)."""
        with self._lock:
            if version != self._version:
                return {}
            return {q: self._answers[q] for q in questions if q in self._answers}

    def keep(self, version: tuple, answers: Mapping[str, Answering | None]) -> None:
        """Keep ``answers`` for ``version``: another version's are dropped, and all of them when over the limit."""
        with self._lock:
            if version != self._version or len(self._answers) + len(answers) > self.limit:
                self._version, self._answers = version, {}
            if len(answers) <= self.limit:
                self._answers.update(answers)

    def __len__(self) -> int:
        with self._lock:
            return len(self._answers)


class Replayer:
    """Replays questions for edits of one knowledge base (``knowledge.replay``: days and the cap)."""

    def __init__(
        self,
        search: TurnSearch,
        store: KnowledgeStore,
        log: ConversationLog | None,
        testsets: TestSetStore | None = None,
        question_store: EmbeddingCache | None = None,
        days: int = default_of(ReplaySettings, "days"),
        max_questions: int = default_of(ReplaySettings, "max_questions"),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        """``question_store``: where visitors' question vectors are kept (shared with topics), None: encode each."""
        self.search, self.store, self.log, self.testsets = search, store, log, testsets
        self.question_store = question_store
        self.days, self.max_questions, self.clock = days, max_questions, clock
        # A log's questions plus test sets': room for twice the cap, so a replay's whole batch stays kept.
        self.kept = KeptAnswers(2 * max_questions)
        self._warmer = Worker("replay-warm")

    def questions(self) -> tuple[list[Question], int]:
        """What a replay asks, and how many log questions were skipped.

        The log's distinct questions (capped) and every test set's, once each.
        """
        logged, skipped = (
            log_questions(self.log, self.days, self.max_questions, self.clock()) if self.log is not None else ([], 0)
        )
        seen = {q.text for q in logged}
        tests = [q for q in testset_questions(self.testsets, self.search.index.entries) if q.text not in seen]
        return logged + list({q.text: q for q in tests}.values()), skipped

    def replay_edit(self, edit: Edit, mode: str | None = None) -> Replay:
        """Apply ``edit`` to a scratch copy of the knowledge and replay: nothing is written to the real folder."""
        with scratch_store(self.store) as scratch:
            touched = set(edit(scratch))
            after = load_entries(scratch.folder)
        return self.replay(after, touched, mode)

    def replay(
        self,
        after: Sequence[Entry],
        publishing: Collection[str] = (),
        mode: str | None = None,
        questions: Sequence[Question] | None = None,
        skipped: int = 0,
    ) -> Replay:
        """Replay ``questions`` against the knowledge now and ``after`` the edit.

        ``questions`` defaults to :meth:`questions`; the ``publishing`` ids answer after the edit even as drafts.
        """
        start = time.perf_counter()
        mode = mode or self.search.current_mode()
        if questions is None:
            questions, skipped = self.questions()
        results = self.answers(after, publishing, mode, [q.text for q in questions])
        changes = [
            Change(q.text, q.source, q.asked, b, a)
            for q, (b, a) in zip(questions, results, strict=True)
            if (b.id if b else None) != (a.id if a else None)
        ]
        return Replay(
            replayed=len(questions),
            gained=tuple(c for c in changes if c.kind == "gained"),
            lost=tuple(c for c in changes if c.kind == "lost"),
            changed=tuple(c for c in changes if c.kind == "changed"),
            mode=mode,
            skipped=skipped,
            seconds=time.perf_counter() - start,
        )

    def answers(
        self, after: Sequence[Entry], publishing: Collection[str], mode: str, questions: Sequence[str]
    ) -> list[tuple[Answering | None, Answering | None]]:
        """Each question's answer (None: none) in a staging index of the knowledge now and of ``after``.

        The answers before the edit come from :attr:`kept` where it holds them for the live knowledge as it is.
        """
        return self._answer(mode, questions, (after, publishing))

    def before_answers(self, mode: str, questions: Sequence[str]) -> list[Answering | None]:
        """Each question's answer in the knowledge as it is now, kept for the replays of edits that follow."""
        return [b for b, _ in self._answer(mode, questions, None)]

    def warm(self, mode: str | None = None) -> int:
        """Answer what a replay asks in the knowledge as it is, ahead of an edit; how many questions it answered."""
        texts = [q.text for q in self.questions()[0]]
        self.before_answers(mode or self.search.current_mode(), texts)
        return len(texts)

    def keep_warm(self) -> None:
        """Warm the answers before an edit now and after every load of the knowledge, in a background thread."""
        self.search.index.on_load(self.schedule_warm)
        self.schedule_warm()

    def schedule_warm(self) -> None:
        """Queue a warm-up (one waits at a time); a failure is logged and leaves the next replay to search both sides."""

        def job() -> None:
            try:
                self.warm()
            except Exception:
                log.exception("warming the replay's answers before an edit failed")

        self._warmer.submit("warm", job)

    def wait_warm(self, timeout: float | None = None) -> bool:
        """Wait until no warm-up waits or runs; False when ``timeout`` passed first."""
        return self._warmer.wait_idle(timeout)

    def version(self, live: ModeSearcher, mode: str, day: date) -> tuple:
        """What the answers before an edit depend on: the live knowledge's content and how a search reads it."""
        h = hashlib.sha256()
        for entry in self.search.index.entries:
            # content_hash leaves out the negative questions, which the answer rung reads
            h.update(f"{entry.content_hash}{entry.negative_questions}".encode())
        tokenizer = self.search.index.tokenizer
        synonyms = self.search.index.synonyms
        dense = dense_leaf(live)
        return (
            h.hexdigest(),
            mode,
            live.name,  # another mode standing in while this one builds is another version
            tuple(leaf.name for leaf in live.leaves()),
            day,
            self.search.top_k,
            self.search.cutoffs(live.system),
            self.search.negatives.min_similarity,
            tokenizer.state_key(),
            synonyms.current() if synonyms is not None else None,
            dense.encoder.signature() if dense is not None else None,
        )

    def _answer(
        self, mode: str, questions: Sequence[str], after: tuple[Sequence[Entry], Collection[str]] | None
    ) -> list[tuple[Answering | None, Answering | None]]:
        index = self.search.index
        live = index.searcher(mode)
        day = self.search.availability.today()
        version = self.version(live, mode, day)
        kept = self.kept.known(version, questions)
        missing = [q for q in dict.fromkeys(questions) if q not in kept]
        asked = list(dict.fromkeys(questions)) if after is not None else missing
        known = self._question_vectors(live, asked) if asked else None
        with tempfile.TemporaryDirectory(prefix="kbbot-replay-") as tmp:

            def side(name: str, entries: Sequence[Entry], touched: Collection[str]) -> tuple[Side, Callable[[], None]]:
                searcher = staged_copy(live, Path(tmp) / name, known)  # here: it shares (or makes) the live caches

                def build() -> None:
                    fill(searcher, entries, index.passages)
                    if known:
                        prepare(searcher, known)

                negatives = NegativeExamples(self.search.negatives.min_similarity)
                return Side(searcher, entries, self.search.cutoffs, negatives, day, self.search.top_k, touched), build

            before, build_before = side("before", index.entries, ()) if missing else (None, None)
            after_side, build_after = side("after", *after) if after is not None else (None, None)
            with ThreadPoolExecutor(WORKERS, thread_name_prefix="kbbot-replay") as pool:
                # Both staging indexes filled at once: finding the nearest vectors and committing free the GIL.
                building = pool.submit(build_before) if build_before is not None else None
                if build_after is not None:
                    build_after()
                if building is not None:
                    building.result()

                def both(question: str) -> tuple[Answering | None, Answering | None]:
                    b = kept[question] if question in kept else before.answer(question)  # type: ignore[union-attr]
                    return b, after_side.answer(question) if after_side is not None else None

                results = list(pool.map(both, questions))
        self.kept.keep(version, {q: b for q, (b, _) in zip(questions, results, strict=True) if q not in kept})
        return results

    def _question_vectors(self, live: ModeSearcher, texts: Sequence[str]) -> dict[str, Any] | None:
        """Every question's vector as the dense side will ask for it.

        None for a sparse mode, or an encoder that cannot encode in batches: it encodes each as it goes.
        """
        dense = dense_leaf(live)
        if dense is None or self.question_store is None or not hasattr(dense.encoder, "encode_questions"):
            return None
        synonyms = getattr(dense, "synonyms", None)
        form = getattr(dense, "synonym_mode", "substitute")
        asked = [synonyms.canonical(t, form) if synonyms is not None else t for t in texts]
        found, _ = QuestionVectors(dense.encoder, self.question_store).vectors(list(dict.fromkeys(asked)), None)
        return found


def replayer_from_settings(
    search: TurnSearch, store: KnowledgeStore, recorder: TurnRecorder, settings: Settings
) -> Replayer:
    """A Replayer over the recorder's log, the stored test sets and the question store under ``state_dir``.

    ``knowledge.replay`` gives the days and the cap.
    """
    from bot.evaluation.testsets import TestSetStore
    from bot.search.encoders.cache import EmbeddingCache

    state = settings.resolve(settings.state_dir)
    tests = state / "testsets.sqlite"
    r = settings.knowledge.replay
    return Replayer(
        search,
        store,
        recorder.log,
        TestSetStore(tests) if tests.exists() else None,
        EmbeddingCache(state / "embeddings" / QUESTIONS_FILE, max_rows=2 * settings.log.topics.max_questions),
        r.days,
        r.max_questions,
    )
