"""The Searcher contract: every implementation must pass this suite on the same tiny knowledge base.

To add a backend, add a builder to ``BUILDERS`` in tests/support/searchers.py: ``(path, tokenizer) -> Searcher``
that reopens the same on-disk (or remote) index when called twice with the same path. The same suite runs against
a real Elasticsearch cluster when ES_URL is set.

What every searcher promises about relevance (docs/retrieval-and-decision.md "Scores and thresholds"): it lies in [0, 1] whatever the
question; it is what the hit's signals say it is; the exact question of an entry gives that entry a relevance at
least as high as any other entry's. Ranking differs by kind, and the suite checks each: sparse searchers return
hits in BM25 order (``score``; relevance = coverage does not reorder them), dense and hybrid ones by relevance.
The storage role's ``check()`` is a reason before the first sync and for a damaged index, None after a sync (the
contract is written in bot/search/base.py's docstring). A composite (hybrid) stores nothing: its leaves are edited
and synced one by one, as the knowledge index does, and it answers from them.
"""

from __future__ import annotations

import dataclasses

import pytest

from bot.config.settings import SYSTEMS
from bot.knowledge.entries import Entry, load_entries
from bot.search.base import Hit, IndexStore, ModeSearcher, Retriever, Searcher, SyncReport
from bot.search.dense_scoring import DenseScoring
from bot.search.relevance import SparseSearcher
from tests.support.knowledge import TINY, write_knowledge
from tests.support.searchers import BUILDERS, E5_SPARSE_WEIGHT, QUESTION_WEIGHT, QUESTIONS, cluster_builder

pytestmark = pytest.mark.contract

DISAGREE = "knowledge 检索"  # a question whose BM25 order and coverage order differ on TINY


@pytest.fixture(params=[*sorted(BUILDERS), "elasticsearch-cluster", "es-vectors-cluster"])
def make(request, tmp_path, tokenizer):
    if request.param.endswith("-cluster"):  # the opt-in real cluster at ES_URL (skipped without it)
        with cluster_builder(tokenizer, vectors=request.param.startswith("es-vectors")) as build:
            yield build
        return
    builder = BUILDERS[request.param]
    yield lambda: builder(tmp_path, tokenizer)


@pytest.fixture
def entries(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


@pytest.fixture
def searcher(make, entries) -> ModeSearcher:
    s = make()
    report = sync(s, entries)
    assert report.added == len(entries)
    return s


def sync(searcher: ModeSearcher, entries: list[Entry]) -> SyncReport:
    """Sync a mode's indexes as the knowledge index does: a composite's leaves one by one, one report."""
    return SyncReport.of_all({leaf.name: leaf.sync(entries) for leaf in searcher.leaves()}, 0.0)


def upsert(searcher: ModeSearcher, entries: list[Entry]) -> None:
    """Add or replace ``entries`` in every index the searcher reads."""
    for leaf in searcher.leaves():
        leaf.upsert(entries)


def remove(searcher: ModeSearcher, entry_ids: list[str]) -> None:
    """Remove ``entry_ids`` from every index the searcher reads."""
    for leaf in searcher.leaves():
        leaf.remove(entry_ids)


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


def ranking(searcher: Searcher, hit: Hit) -> float:
    """The number a searcher orders its hits by: BM25 for sparse searchers, relevance for the others."""
    return hit.score if isinstance(searcher, SparseSearcher) else hit.relevance


def dense_relevance(signals: dict[str, float]) -> float:
    return min(1.0, max(0.0, QUESTION_WEIGHT * signals["question"] + (1 - QUESTION_WEIGHT) * signals["passage"]))


def test_best_match_first_and_hits_in_the_searchers_order(searcher):
    hits = searcher.search("怎么添加知识", 5)
    assert ids(hits)[0] == "faq:add"
    assert all(h.searcher == searcher.name for h in hits)
    for question in [*QUESTIONS, DISAGREE]:
        order = [ranking(searcher, h) for h in searcher.search(question, 10)]
        assert order == sorted(order, reverse=True), question


def test_sparse_hits_keep_bm25_order_and_relevance_follows_it_where_coverage_disagrees(searcher):
    if not isinstance(searcher, SparseSearcher):
        pytest.skip("dense and hybrid hits are ordered by relevance (previous test)")
    # "检索" three times in faq:mode's query field outscores "knowledge" once in faq:add's document, but
    # "knowledge" is the rarer word, so faq:add covers more of the question: its relevance is capped at the top's.
    first, second = searcher.search(DISAGREE, 2)
    assert (first.entry.id, second.entry.id) == ("faq:mode", "faq:add")
    assert first.score > second.score and first.signals["coverage"] < second.signals["coverage"]
    assert first.relevance == first.signals["coverage"] and second.relevance <= first.relevance


def test_relevance_never_rises_down_the_ranking(searcher):
    for question in [*QUESTIONS, DISAGREE]:
        relevances = [h.relevance for h in searcher.search(question, 10)]
        assert relevances == sorted(relevances, reverse=True), question


def test_relevance_lies_between_0_and_1_for_every_question(searcher):
    for question in QUESTIONS:
        for hit in searcher.search(question, 10):
            assert 0.0 <= hit.relevance <= 1.0, (question, hit)


def test_relevance_is_what_the_signals_say(searcher):
    for question in QUESTIONS:
        for hit in searcher.search(question, 10):
            s = hit.signals
            if isinstance(searcher, SparseSearcher):  # the BM25 score orders the hits, coverage caps the relevance
                assert set(s) == {"bm25", "coverage"} and s["bm25"] == hit.score
                assert hit.relevance <= s["coverage"] + 1e-12
            elif isinstance(searcher, DenseScoring):  # weighted question and passage cosines (FAISS or the cluster)
                assert hit.score == hit.relevance == pytest.approx(dense_relevance(s), abs=1e-6)
            else:  # hybrid: both sides' signals for every hit, whichever side proposed it (an entry in another
                # language than the question: the dense side alone)
                weight = 0.0 if s.get("cross_language") else E5_SPARSE_WEIGHT
                expected = weight * s["coverage"] + (1 - weight) * dense_relevance(s)
                assert hit.relevance == pytest.approx(expected, abs=1e-6), (question, hit)


def test_the_exact_question_of_an_entry_is_at_least_as_relevant_as_any_other(searcher, entries):
    for entry in entries:
        hits = searcher.search(entry.query, len(entries))
        relevance = {h.entry.id: h.relevance for h in hits}
        assert entry.id in relevance, (entry.id, ids(hits))
        assert relevance[entry.id] >= max(relevance.values()) - 1e-9, (entry.id, relevance)


def test_system_names_a_thresholds_key(searcher):
    assert searcher.system in SYSTEMS


def test_paraphrase_with_shared_words(searcher):
    assert ids(searcher.search("图书馆几点开放？", 3))[0] == "faq:library"


def test_top_k_larger_than_corpus(searcher, entries):
    hits = searcher.search("知识 模式 阈值 图书馆 食堂 ollama", 100)
    assert 0 < len(hits) <= len(entries)
    assert len(set(ids(hits))) == len(hits)


def test_top_k_limits(searcher):
    assert len(searcher.search("知识 模式 阈值 图书馆 食堂", 2)) <= 2


@pytest.mark.parametrize("query", ["", "   ", "？！。，", "?!..."])
def test_empty_and_punctuation_only_query(searcher, query):
    assert searcher.search(query, 5) == []


def test_unknown_words_never_beat_a_real_match(searcher):
    real = searcher.search("怎么添加知识", 1)[0].relevance
    unknown = searcher.search("qwxzv plokij", 5)
    assert all(h.relevance < real for h in unknown)


def test_chinese_english_mix(searcher):
    assert ids(searcher.search("Ollama 怎么连接", 3))[0] == "faq:ollama"


def test_add_replace_remove(searcher, entries):
    new = Entry("faq:new", "停车场收费标准", "校内停车每小时五元。", ("停车",))
    upsert(searcher, [new])
    assert ids(searcher.search("停车场收费", 1)) == ["faq:new"]
    upsert(searcher, [dataclasses.replace(new, document="校内停车每小时八元。")])
    hits = searcher.search("停车场收费", 3)
    assert ids(hits).count("faq:new") == 1
    assert hits[0].entry.document == "校内停车每小时八元。"
    remove(searcher, ["faq:new"])
    assert "faq:new" not in ids(searcher.search("停车场收费", 5))


def test_sync_touches_only_changes(searcher, entries):
    changed = [dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:mode" else e for e in entries]
    changed = [e for e in changed if e.id != "faq:canteen"]
    report = sync(searcher, changed)
    assert (report.added, report.updated, report.removed, report.rebuilt) == (0, 1, 1, False)
    assert "faq:canteen" not in ids(searcher.search("食堂在哪里", 5))
    assert searcher.search("切换检索模式", 1)[0].entry.document.endswith("更新。")


def test_persistence_round_trip(searcher, make, entries):
    expected = ids(searcher.search("怎么添加知识", 3))
    reopened = make()
    for leaf in reopened.leaves():
        assert leaf.indexed_hashes() == {e.id: e.content_hash for e in entries}
    report = sync(reopened, entries)
    assert not report.changed
    assert ids(reopened.search("怎么添加知识", 3)) == expected


# An entry whose query shares no word with the question, but one of whose alternative questions is the question.
PHRASED = Entry(
    "faq:wifi",
    "无线网络怎么连接",
    "打开设置，选择 SYSU-Secure，用学号和密码登录。",
    ("无线网络",),
    questions=("宿舍上不了网怎么办", "校园 WiFi 密码是什么"),
)


def test_an_alternative_question_matches_like_the_query(searcher):
    upsert(searcher, [PHRASED])
    hits = searcher.search("宿舍上不了网怎么办", 3)
    assert ids(hits)[0] == "faq:wifi"
    assert hits[0].entry.questions == PHRASED.questions  # the stored entry keeps its questions
    assert hits[0].matched_question == "宿舍上不了网怎么办"  # shown in the sources panel
    assert searcher.search("无线网络怎么连接", 1)[0].matched_question == ""  # the query itself matched


def test_editing_an_alternative_question_reindexes_the_entry(searcher, entries):
    sync(searcher, [*entries, PHRASED])
    edited = dataclasses.replace(PHRASED, questions=("快递包裹寄存",))
    report = sync(searcher, [*entries, edited])
    assert (report.added, report.updated, report.removed) == (0, 1, 0)
    assert ids(searcher.search("快递包裹寄存", 1)) == ["faq:wifi"]
    old = searcher.search("宿舍上不了网怎么办", 5)
    assert all(h.matched_question != "宿舍上不了网怎么办" for h in old)  # its words and vector are gone
    if isinstance(searcher, SparseSearcher):  # (a dense searcher still finds the wifi entry close in meaning)
        assert ids(old)[0] != "faq:wifi"


CATEGORIES = {
    "add": ("guide",),
    "mode": ("guide",),
    "threshold": ("guide", "scores"),
    "ollama": ("llm",),
    "library": ("campus",),
    "canteen": ("campus",),
}
FILTERS = [("guide",), ("campus",), ("llm",), ("scores",), ("campus", "llm"), ("nowhere",)]


@pytest.fixture
def categorised(searcher, entries) -> list[Entry]:
    """The tiny knowledge with categories, synced into the searcher as an edit (each entry's hash changes)."""
    tagged = [dataclasses.replace(e, categories=CATEGORIES[e.id.split(":", 1)[1]]) for e in entries]
    report = sync(searcher, tagged)
    assert report.added + report.updated == len(tagged)
    return tagged


@pytest.mark.parametrize("top_k", [1, 2, 10])
def test_a_filter_returns_only_its_entries_in_the_unfiltered_order(searcher, categorised, top_k):
    from bot.knowledge.filters import entry_filter

    for names in FILTERS:
        within = entry_filter(names)
        assert within is not None
        for question in [*QUESTIONS, DISAGREE]:
            hits = searcher.search(question, top_k, within)
            assert all(set(h.entry.categories) & set(names) for h in hits), (names, question, ids(hits))
            unfiltered = [h for h in searcher.search(question, len(categorised)) if within.admits(h.entry)]
            assert ids(hits) == ids(unfiltered)[:top_k], (names, question)
            assert [ranking(searcher, h) for h in hits] == pytest.approx(
                [ranking(searcher, h) for h in unfiltered[:top_k]]
            )
            relevances = [h.relevance for h in hits]
            assert relevances == sorted(relevances, reverse=True)


def test_no_filter_and_a_filter_on_every_category_give_the_same_hits(searcher, categorised):
    from bot.knowledge.filters import entry_filter

    everything = entry_filter(sorted({c for cs in CATEGORIES.values() for c in cs}))
    for question in QUESTIONS:
        plain, filtered = searcher.search(question, 5), searcher.search(question, 5, everything)
        assert ids(plain) == ids(filtered), question
        assert [h.relevance for h in plain] == pytest.approx([h.relevance for h in filtered])


def test_check_is_a_reason_before_the_first_sync_and_none_after_it(make, entries):
    fresh = make()
    assert isinstance(make(), Retriever)  # the query role on every backend; the storage role on what it reads
    assert fresh.leaves() and all(isinstance(leaf, IndexStore) for leaf in fresh.leaves())
    reason = fresh.check()
    assert isinstance(reason, str) and reason  # nothing on disk yet: it says so
    sync(fresh, entries)
    assert fresh.check() is None
    assert make().check() is None  # reopened from what the sync left


def damage(leaf: Searcher) -> None:
    """Make the index as it is stored unusable: unreadable state on disk, or (a remote index) the index gone."""
    folder = getattr(leaf, "path", None)
    if folder is None:
        leaf.client.indices.delete(index=leaf.index)  # type: ignore[attr-defined]
    else:
        (folder / "kbbot-state.json").write_text("{not json", encoding="utf-8")


def test_check_gives_why_a_damaged_index_cannot_serve_and_a_sync_rebuilds_it(searcher, make, entries):
    for leaf in searcher.leaves():
        damage(leaf)
    reopened = make()
    reason = reopened.check()
    assert isinstance(reason, str) and reason, reason
    report = sync(reopened, entries)
    assert report.rebuilt and report.reason and reopened.check() is None
    assert ids(reopened.search("怎么添加知识", 1)) == ["faq:add"]


def test_served_the_search_reports_what_answered_it(searcher):
    from bot.search.serving import ServedSearcher

    found = ServedSearcher("sparse", searcher, None, lambda s, exc: None).find(QUESTIONS[0], 3)
    assert ids(found.hits) == ids(searcher.search(QUESTIONS[0], 3)) and not found.failed and found.notices == ()
    assert (found.system, found.searcher) == (searcher.system, searcher.name)


class Broken(Searcher):
    """An index that fails mid-search (a damaged file)."""

    def search(self, query, top_k, within=None):
        raise OSError("segment unreadable")

    def upsert(self, entries, progress=None):
        pass

    def remove(self, ids):
        pass

    def indexed_hashes(self):
        return {}


def test_a_failed_search_is_reported_in_its_result_and_changes_nothing_stored():
    from bot.search.serving import ServedSearcher
    from bot.texts import HEALING_ALONE

    healed: list[str] = []
    broken = Broken()
    served = ServedSearcher("sparse", broken, None, lambda s, exc: healed.append(str(exc)))
    failed = served.find("校歌", 3)
    assert failed.failed and failed.hits == () and HEALING_ALONE in failed.notices and healed == ["segment unreadable"]
    assert served.notices() == () and served.standing_in is False  # nothing was written on the shared searcher
    with pytest.raises(OSError):  # without a healer (scripts, the CLI) the error reaches the caller
        ServedSearcher("sparse", broken).find("校歌", 3)
