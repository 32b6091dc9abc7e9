"""Sparse relevance: coverage() itself, the statistics it uses, and the ranking it was designed to fix.

coverage(q, e) = share of the question words' IDF mass (BM25's IDF over the whole knowledge) found in the entry.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from bot.knowledge.entries import load_entries
from bot.search.relevance import TermStats, coverage, weighted_text
from bot.search.tantivy_searcher import TantivySearcher
from tests.support.es_server import FIELD_WEIGHTS, client_for, index_name, shared_server
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.unit

STATS = TermStats(10, {"怎么": 8, "图书馆": 1, "开放": 2})  # "天气": never used by the knowledge


# -- coverage() ----------------------------------------------------------------------------
def test_idf_is_bm25s_and_highest_for_a_word_the_knowledge_never_uses():
    assert STATS.idf("图书馆") == pytest.approx(math.log(1 + (10 - 1 + 0.5) / (1 + 0.5)))
    assert STATS.idf("天气") > STATS.idf("图书馆") > STATS.idf("开放") > STATS.idf("怎么") > 0
    assert TermStats(3, {"x": 7}).idf("x") == TermStats(3, {"x": 3}).idf("x")  # df beyond N is N


def test_all_words_present_is_1():
    assert coverage(["图书馆", "开放", "怎么"], frozenset({"图书馆", "开放", "怎么", "时间"}), STATS) == 1.0


def test_no_word_present_is_0():
    assert coverage(["图书馆", "开放"], frozenset({"食堂"}), STATS) == 0.0


def test_empty_question_is_0():
    assert coverage([], frozenset({"图书馆"}), STATS) == 0.0
    assert coverage([], frozenset(), TermStats(0, {})) == 0.0


def test_the_share_is_of_idf_mass_not_of_words():
    words = ["图书馆", "怎么"]
    expected = STATS.idf("图书馆") / (STATS.idf("图书馆") + STATS.idf("怎么"))
    assert coverage(words, frozenset({"图书馆"}), STATS) == pytest.approx(expected)
    assert coverage(words, frozenset({"图书馆"}), STATS) > 0.5 > coverage(words, frozenset({"怎么"}), STATS)


def test_a_word_the_knowledge_never_uses_weighs_more_than_a_common_one():
    # "天气怎么" against an entry holding the common word only: most of what the question is about is missing.
    question = ["天气", "怎么"]
    common_only = coverage(question, frozenset({"怎么"}), STATS)
    unknown_only = coverage(question, frozenset({"天气"}), STATS)
    assert common_only < 0.2 and unknown_only > 0.8 and common_only + unknown_only == pytest.approx(1.0)


def test_repeated_question_words_count_once():
    once = coverage(["图书馆", "怎么"], frozenset({"怎么"}), STATS)
    assert coverage(["图书馆", "怎么", "怎么", "怎么"], frozenset({"怎么"}), STATS) == pytest.approx(once)


def test_weighted_text_repeats_each_field_by_its_weight():
    assert weighted_text(("q", "m", "d"), {"query": 3, "metadata": 2, "document": 1}) == "q q q m m d"
    assert weighted_text(("q", "", "d"), {"query": 1, "metadata": 2, "document": 0}) == "q"


# -- on a real index ---------------------------------------------------------------------
@pytest.fixture
def entries(tmp_path):
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


def test_off_topic_question_with_common_words_scores_low(tmp_path, tokenizer, entries):
    searcher = TantivySearcher(tmp_path / "t", tokenizer, FIELD_WEIGHTS)
    searcher.sync(entries)
    off_topic = searcher.search("今天天气怎么样", 5)
    assert off_topic and all(h.relevance < 0.1 for h in off_topic)  # found through 怎么, but covers little
    assert searcher.search("怎么添加知识", 1)[0].relevance == 1.0


def test_statistics_count_only_live_entries(tmp_path, tokenizer, entries):
    """After edits and removals the statistics are those of the knowledge now, as a fresh index's are."""
    searcher = TantivySearcher(tmp_path / "edited", tokenizer, FIELD_WEIGHTS)
    searcher.sync(entries)
    edited = [
        dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:canteen" else e
        for e in entries
        if e.id != "faq:library"
    ]
    searcher.sync(edited)  # faq:canteen replaced (delete + add), faq:library removed
    fresh = TantivySearcher(tmp_path / "fresh", tokenizer, FIELD_WEIGHTS)
    fresh.sync(edited)
    words = ["食堂", "图书馆", "阈值", "怎么"]
    assert (
        searcher.term_stats(words)
        == fresh.term_stats(words)
        == TermStats(5, {"食堂": 1, "图书馆": 0, "阈值": 1, "怎么": 2})
    )
    for question in ["食堂 阈值", "食堂在哪里", "图书馆食堂怎么走"]:  # (BM25's order is tantivy's own business)
        assert {h.entry.id: h.signals["coverage"] for h in searcher.search(question, 5)} == {
            h.entry.id: h.signals["coverage"] for h in fresh.search(question, 5)
        }
    assert {h.entry.id: h.signals["coverage"] for h in searcher.search("食堂 阈值", 5)} == {
        "faq:canteen": 0.5,
        "faq:threshold": 0.5,
    }


# -- the "药学" pattern -------------------------------------------------------------------
# A campus guide: almost every document mentions 中山大学. One entry's only link to "中山大学有几个校区" is 中山大学,
# concentrated in a short metadata field; with one BM25 per field (its own statistics) that field made it the top
# hit, above the entry about the campuses. One field with shared statistics (BM25F) and coverage put it last.
SYSU = {
    "campus": {
        "query": "校区分布",
        "document": "中山大学有五个校区：广州南校园、广州北校园、广州东校园、珠海校区和深圳校区。",
        "metadata": "校区",
    },
    "pharmacy": {"query": "中山大学的药学院(深圳)本科招生专业", "document": "药学", "metadata": "中山大学药学院(深圳)"},
    "library": {
        "query": "图书馆开放时间",
        "document": "中山大学图书馆每天早上八点到晚上十点开放。",
        "metadata": "图书馆",
    },
    "canteen": {"query": "食堂在哪里", "document": "中山大学南校园的学生食堂靠近体育馆。", "metadata": "食堂,餐饮"},
    "history": {"query": "学校历史", "document": "中山大学由孙中山先生于1924年亲手创办。", "metadata": "历史,校史"},
    "motto": {"query": "校训是什么", "document": "中山大学的校训是博学、审问、慎思、明辨、笃行。", "metadata": "校训"},
    "admission": {
        "query": "本科招生咨询电话",
        "document": "中山大学本科招生办公室电话020-84036491。",
        "metadata": "招生,电话",
    },
    "dorm": {
        "query": "宿舍条件怎么样",
        "document": "中山大学本科生宿舍多为四人间，配有空调和独立卫生间。",
        "metadata": "宿舍,住宿",
    },
    "scholarship": {
        "query": "奖学金有哪些",
        "document": "中山大学设有国家奖学金、校级奖学金和各类社会奖学金。",
        "metadata": "奖学金",
    },
    "transfer": {
        "query": "可以转专业吗",
        "document": "中山大学本科生在第一学年结束后可以申请转专业。",
        "metadata": "转专业",
    },
    "exchange": {"query": "交换生项目", "document": "中山大学与世界多所大学有交换生项目。", "metadata": "交换,国际"},
    "hospital": {
        "query": "附属医院",
        "document": "中山大学有多家附属医院，例如中山大学附属第一医院。",
        "metadata": "医院,医学",
    },
    "ranking": {"query": "学校排名", "document": "中山大学在国内高校排名中位居前列。", "metadata": "排名"},
    "postgrad": {"query": "研究生招生", "document": "中山大学每年招收硕士和博士研究生。", "metadata": "研究生,招生"},
    "sports": {"query": "体育设施", "document": "中山大学有体育馆、游泳池和多个田径场。", "metadata": "体育,运动"},
    "bus": {"query": "校车时刻表", "document": "中山大学广州各校园之间有校车往返。", "metadata": "校车,交通"},
    "wifi": {"query": "校园网怎么连接", "document": "中山大学校园网用 NetID 登录。", "metadata": "校园网,网络"},
}


def sparse_searcher(backend: str, path: Path, tokenizer):
    if backend == "tantivy":
        return TantivySearcher(path / "tantivy", tokenizer, FIELD_WEIGHTS)
    from bot.search.es_searcher import ElasticsearchSearcher

    return ElasticsearchSearcher(client_for(shared_server().url), index_name(path), tokenizer, FIELD_WEIGHTS)


@pytest.mark.parametrize("backend", ["tantivy", "elasticsearch"])
def test_common_words_in_a_short_field_do_not_outrank_the_entry_that_answers(backend, tmp_path):
    from bot.search.tokenizer import Tokenizer

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "sysu.json").write_text(json.dumps(SYSU, ensure_ascii=False), encoding="utf-8")
    entries = load_entries(tmp_path / "kb")
    tokenizer = Tokenizer()
    tokenizer.add_words(w for e in entries for w in e.metadata)  # as the index does with the knowledge's keywords
    searcher = sparse_searcher(backend, tmp_path, tokenizer)
    searcher.sync(entries)
    assert sum("中山大学" in e.document for e in entries) == len(entries) - 1

    question = "中山大学有几个校区"
    hits = searcher.search(question, len(entries))
    ranked = [h.entry.id for h in hits]
    assert ranked[0] == "sysu:campus"
    pharmacy = next(e for e in entries if e.id == "sysu:pharmacy")
    (pharmacy_relevance,) = searcher.relevances(question, [pharmacy])
    assert hits[0].relevance > 0.45 and pharmacy_relevance < 0.05  # 中山大学 is in every entry: it weighs ~nothing
    if "sysu:pharmacy" in ranked:
        assert ranked.index("sysu:pharmacy") > 0
        pharmacy_hit = hits[ranked.index("sysu:pharmacy")]
        assert pharmacy_hit.signals["coverage"] == pytest.approx(pharmacy_relevance)
        assert pharmacy_hit.relevance <= pharmacy_relevance + 1e-12
    # The entry is still found by what it is about.
    assert searcher.search(pharmacy.query, 1)[0].entry.id == "sysu:pharmacy"
    assert searcher.search("药学院招生", 1)[0].entry.id == "sysu:pharmacy"


def test_the_words_an_index_remembers_are_those_cut_again(tmp_path, tokenizer):
    from bot.knowledge.entries import Entry
    from bot.search.relevance import EntryWords
    from tests.support.knowledge import ROOT

    guide = load_entries(ROOT / "knowledge")
    tricky = [
        Entry("a", "ΟΔΟΣ 中山大学?", "Σχολή！报名", metadata=("中大", "ΑΣ")),  # a final sigma on each side of a join
        Entry("b", "ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ", "…末尾", metadata=()),
        Entry("c", "第一问", "答", questions=("第二问，还有", "English one?")),
        Entry("d", "e\u0301te 咖啡", "\u0301开头的组合符", metadata=("x-y", "a.b")),
    ]
    entries = [*guide, *tricky]
    searcher = TantivySearcher(tmp_path / "t", tokenizer, FIELD_WEIGHTS)
    searcher.upsert(entries)
    remembered, fresh = searcher.words, EntryWords(tokenizer)
    assert len(remembered._cache) >= 2 * len(entries)  # the upsert kept them: no entry is cut below
    for entry in entries:
        assert remembered(entry) == fresh(entry), entry.id
        assert remembered.keywords(entry) == fresh.keywords(entry), entry.id
        assert remembered.phrasings(entry) == fresh.phrasings(entry), entry.id
