"""Nearest vectors found in one batch: the single searches that use them return exactly what a full scan returns."""

from __future__ import annotations

import numpy as np
import pytest

from bot.knowledge.entries import Entry
from bot.search.faiss_batch import PreparedNearest
from bot.search.faiss_files import _search_one_thread
from tests.support.searchers import faiss_builder

faiss = pytest.importorskip("faiss")

pytestmark = pytest.mark.unit

DIM = 48


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def crowded():
    """A flat index of 3,000 vectors where ties and near ties abound: each of 600 vectors five times, the copies
    after the first nudged by a few float32 steps or not at all."""
    rng = np.random.default_rng(7)
    base = np.repeat(unit_rows(rng, 600), 5, axis=0)
    nudge = rng.choice([0.0, 0.0, 1e-7, -1e-7, 3e-7], size=base.shape).astype(np.float32)
    nudge[::5] = 0.0
    rows = base + nudge
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(rows, np.arange(100, 100 + len(rows), dtype=np.int64))
    questions = np.vstack([rows[rng.choice(len(rows), 150)], unit_rows(rng, 150)])  # on a stored vector or not
    return index, questions


def test_every_prepared_search_returns_the_full_scan_s_list(crowded):
    index, questions = crowded
    prepared = PreparedNearest(index, 3_000, questions)
    served = 0
    for k in (1, 5, 20, 80, 99):
        for q in questions:
            got = prepared.nearest(index, 3_000, q, k)
            want = _search_one_thread(index, q[None, :], k)
            if got is not None:
                served += 1
                assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0])
    assert served >= 0.9 * 5 * len(questions)  # the batch spares most scans, ties and all


def test_a_near_tie_beyond_the_candidates_scans_everything():
    # 200 vectors scoring the same: whichever 160 the batch kept, the 20th's score is the last candidate's
    rows = np.tile(unit_rows(np.random.default_rng(1), 1), (200, 1))
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(rows, np.arange(200, dtype=np.int64))
    prepared = PreparedNearest(index, 200, rows[:1])
    assert prepared.nearest(index, 200, rows[0], 20) is None


def test_what_the_batch_cannot_answer_scans_everything(crowded):
    index, questions = crowded
    prepared = PreparedNearest(index, 3_000, questions[:10])
    assert prepared.nearest(index, 3_000, questions[0], 5) is not None
    assert prepared.nearest(index, 3_000, questions[20], 5) is None  # not among the batch's questions
    assert prepared.nearest(index, 3_000, questions[0], 100) is None  # deeper than faiss's heap (a reservoir)
    assert prepared.nearest(index, 3_001, questions[0], 5) is None  # the index was given a vector since
    index.remove_ids(np.array([100], dtype=np.int64))
    assert prepared.nearest(index, 3_000, questions[0], 5) is None  # or lost one


def test_a_prepared_faiss_searcher_ranks_as_before(tmp_path, tokenizer):
    entries = [Entry(f"e{i}", f"问题 {i} 关于 {w}", f"回答 {w}") for i, w in enumerate(["报名", "学费", "宿舍"] * 40)]
    from bot.search.faiss_searcher import FaissSearcher

    searcher = faiss_builder(tmp_path, tokenizer)
    assert isinstance(searcher, FaissSearcher)
    searcher.sync(entries)
    asked = ["报名 问题 3", "学费多少", "宿舍 回答", "问题 17"]
    before = {q: [(h.entry.id, h.relevance) for h in searcher.search(q, 5)] for q in asked}
    vectors = np.stack([v for v in (searcher.query_vector(q) for q in asked) if v is not None])
    assert searcher.prepare_nearest(vectors) == len(vectors) == 4
    assert {q: [(h.entry.id, h.relevance) for h in searcher.search(q, 5)] for q in asked} == before
    # An entry rewritten to say what a prepared question asks (as many vectors as before): a search that kept to
    # the batch's candidates would miss its new vectors.
    searcher.sync([entries[0], Entry("e1", "学费多少", "学费多少"), *entries[2:]])
    assert searcher._prepared is not None
    assert searcher.search("学费多少", 1)[0].entry.id == "e1"
