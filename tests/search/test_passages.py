"""Long documents as passages: cutting, roll-up to one hit per entry, incremental re-indexing, prompt excerpts."""

from __future__ import annotations

import itertools
import json
import unicodedata

import pytest

from bot.chat.answer import hit_dict
from bot.chat.prompt import PromptBuilder
from bot.config.settings import PassageSettings
from bot.config.variants import replace
from bot.factory import build_bot, build_index
from bot.knowledge.entries import load_entries
from bot.search.base import Hit
from bot.search.passages import (
    ELLIPSIS,
    UNIT_SEPARATOR,
    Passages,
    PassageSearcher,
    excerpt,
    split_passages,
)
from tests.support.knowledge import TINY, write_knowledge
from tests.support.searchers import BUILDERS

pytestmark = pytest.mark.unit

PARAGRAPHS = [
    "游泳馆位于东区体育中心二楼。每周二至周日下午两点到晚上九点开放，周一闭馆清洁。入馆需要出示校园卡并通过健康检查。",
    "快递驿站设在南门宿舍区旁边的平房里。营业时间是早上九点到晚上八点，取件时请出示取件码。大件包裹可以预约送货上门。",
    "校医院在北区图书馆的西侧。普通门诊全天开放，急诊二十四小时值班。学生凭校园卡挂号，医保报销比例为百分之八十。",
    "自习室需要在微信小程序上提前一天预约。每人每天最多预约四个小时，超时未签到会被记录一次违约。三次违约将暂停预约一周。",
    "校车每二十分钟一班，从南门开往北区实验楼。首班车早上七点发车，末班车晚上十点发车，寒暑假期间按假期时刻表运行。",
    "宿舍网络故障请拨打网络中心电话报修。工作人员通常在两个工作日内上门处理，紧急情况可以直接到信息楼一楼服务台。",
    "打印店在第二教学楼一楼大厅。黑白打印每页一角，彩色打印每页一元，论文装订需要提前半天预约。",
    "洗衣房位于每栋宿舍楼的一楼。洗衣机使用校园卡支付，每次四元，烘干机每次三元，晚上十一点以后暂停使用。",
]
LONG_DOCUMENT = "\n\n".join(PARAGRAPHS)
SIZE, OVERLAP = 120, 30


def knowledge(long_document: str = LONG_DOCUMENT) -> dict:
    return {**TINY, "guide": {"query": "校园生活指南", "document": long_document, "metadata": "校园,指南"}}


# -- cutting -----------------------------------------------------------------
def test_a_document_that_fits_is_one_passage():
    assert split_passages("短文本。", 120, 30) == [(0, 4)]


def test_passages_cover_the_document_on_sentence_boundaries_within_the_size():
    spans = split_passages(LONG_DOCUMENT, SIZE, OVERLAP)
    assert len(spans) >= len(LONG_DOCUMENT) // SIZE + 1
    assert spans[0][0] == 0 and spans[-1][1] == len(LONG_DOCUMENT)
    for (_, end), (next_start, _) in itertools.pairwise(spans):
        assert next_start <= end  # no gap: every character is in a passage
        assert end - next_start <= OVERLAP  # the overlap stays small
    for start, end in spans:
        assert 0 < end - start <= SIZE
        text = LONG_DOCUMENT[start:end].rstrip()
        assert text[-1] in "。！？；", text  # every passage ends a sentence (no sentence here is over the size)


def test_overlap_repeats_the_last_whole_sentences():
    spans = split_passages(LONG_DOCUMENT, SIZE, OVERLAP)
    overlapping = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert overlapping, "some neighbours share a sentence"
    for (_, end), (start, _) in overlapping:
        shared = LONG_DOCUMENT[start:end].strip()
        assert shared.endswith("。") and shared in LONG_DOCUMENT


@pytest.mark.parametrize(
    "unit",
    [
        "😀",  # one astral code point (a surrogate pair in UTF-16)
        "\ud83d\ude00",  # the same as two surrogate code points, as a UTF-16 decode with surrogatepass leaves it
        "👨\u200d👩\u200d👧",  # a ZWJ family
        "e\u0301",  # e + combining acute accent
        "❤\ufe0f",  # heart + variation selector
        "𠀀中",  # CJK extension B + a BMP ideograph (4 + 3 UTF-8 bytes)
        "👍🏽",  # a skin-tone modifier
    ],
)
def test_hard_cuts_never_split_a_character(unit):
    text = unit * 200  # no sentence boundary at all: every cut is a hard one
    spans = split_passages(text, 50, 0)
    assert len(spans) > 1
    assert "".join(text[s:e] for s, e in spans) == text
    for start, end in spans:
        piece = text[start:end]
        assert piece and end - start <= 50
        assert not unicodedata.category(piece[0]).startswith("M")
        assert piece[0] not in "\u200d\ufe0f\U0001f3fd" and piece[-1] != "\u200d"
        assert not ("\udc00" <= piece[0] <= "\udfff")  # never starts with the low half of a pair
        if "\ud83d" not in unit:
            piece.encode("utf-8")  # whole characters only (a lone surrogate would raise)


def test_a_long_sentence_is_cut_at_a_comma():
    sentence = "，".join(f"第{i}项规定适用于全体学生" for i in range(30)) + "。"
    spans = split_passages(sentence, 100, 0)
    assert all(sentence[s:e].endswith(("，", "。")) for s, e in spans)


def test_overlap_is_at_most_half_the_size():
    with pytest.raises(ValueError, match="overlap"):
        PassageSettings(size=100, overlap=60)


# -- roll-up over every backend ------------------------------------------------
def faiss_document_builder(path, tokenizer):
    """The contract's fastText FAISS searcher, embedding the document too (the contract's embeds query and keywords)."""
    searcher = BUILDERS["faiss"](path, tokenizer)
    searcher.embed_template = "{query} {metadata} {document}"  # type: ignore[union-attr]
    return searcher


ROLLUP_BUILDERS = {**BUILDERS, "faiss": faiss_document_builder}


@pytest.fixture(params=sorted(ROLLUP_BUILDERS))
def long_searcher(request, tmp_path, tokenizer):
    entries = load_entries(write_knowledge(tmp_path / "kb", knowledge()).parent)
    passages = Passages(SIZE, OVERLAP)
    searcher = PassageSearcher(ROLLUP_BUILDERS[request.param](tmp_path, tokenizer), passages)
    for leaf in searcher.leaves():  # as the knowledge index syncs: the indexes, with the units it expanded
        leaf.sync(passages.expand(entries))
    return searcher


def test_one_hit_per_entry_with_the_passage_that_matched(long_searcher):
    hits = long_searcher.search("校车末班车几点发车？", 5)
    ids = [h.entry.id for h in hits]
    assert ids[0] == "faq:guide" and len(ids) == len(set(ids))
    best = hits[0]
    assert best.entry.document == LONG_DOCUMENT  # the entry itself, not a unit
    assert UNIT_SEPARATOR not in best.entry.id
    top = best.passages[0]
    assert "末班车" in LONG_DOCUMENT[top.start : top.end]
    assert top.relevance == best.relevance  # the entry's hit is its best-ranked passage's


def test_short_entries_score_exactly_as_without_passages(tmp_path, tokenizer):
    entries = load_entries(write_knowledge(tmp_path / "kb", TINY).parent)
    plain = BUILDERS["tantivy"](tmp_path / "plain", tokenizer)
    for leaf in plain.leaves():
        leaf.sync(entries)
    passages = Passages(SIZE, OVERLAP)
    wrapped = PassageSearcher(BUILDERS["tantivy"](tmp_path / "wrapped", tokenizer), passages)
    assert passages.expand(entries) == entries
    for leaf in wrapped.leaves():
        leaf.sync(passages.expand(entries))
    for question in ["怎么添加知识", "图书馆几点开放？", "knowledge 检索", "食堂"]:
        a, b = plain.search(question, 5), wrapped.search(question, 5)
        assert [(h.entry.id, h.relevance, h.score) for h in a] == [(h.entry.id, h.relevance, h.score) for h in b]
        assert all(not h.passages for h in b)


# -- index manager: an edit re-indexes that entry's passages only -------------
def test_an_edit_of_a_long_entry_reindexes_only_its_passages(settings, kb_dir):
    other = LONG_DOCUMENT.replace("游泳馆", "体育馆").replace("快递驿站", "邮局")
    data = {**knowledge(), "other": {"query": "另一份指南", "document": other, "metadata": ""}}
    write_knowledge(kb_dir, data)
    settings = replace(settings, "retrieval.passages", PassageSettings(size=SIZE, overlap=OVERLAP))
    index = build_index(settings)
    index.load()
    leaf = index.searcher("sparse").leaves()[0]
    before = leaf.indexed_hashes()
    assert before is not None
    assert sum(1 for k in before if k.startswith(f"faq:guide{UNIT_SEPARATOR}")) >= 4

    data["guide"]["document"] = LONG_DOCUMENT.replace("每次四元", "每次五元")  # one sentence of the last paragraph
    write_knowledge(kb_dir, data)
    report = index.refresh(force=True)
    assert report
    after = leaf.indexed_hashes()
    assert after is not None
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed and all(k.startswith(f"faq:guide{UNIT_SEPARATOR}") for k in changed)
    assert len(changed) <= 2  # the passage(s) holding that sentence, not the whole entry
    hit = index.searcher("sparse").search("洗衣机每次五元吗", 1)[0]
    assert hit.entry.id == "faq:guide" and "五元" in excerpt(hit, 200)


def test_turning_passages_off_indexes_documents_whole(settings, kb_dir):
    write_knowledge(kb_dir, knowledge())
    settings = replace(settings, "retrieval.passages", PassageSettings(enabled=False))
    index = build_index(settings)
    index.load()
    hashes = index.searcher("sparse").leaves()[0].indexed_hashes() or {}
    assert "faq:guide" in hashes and not any(UNIT_SEPARATOR in k for k in hashes)


# -- what the LLM and the user see ---------------------------------------------
def _hit(searcher_hits: list[Hit]) -> Hit:
    return next(h for h in searcher_hits if h.entry.id == "faq:guide")


def test_excerpt_shows_the_best_passages_in_document_order_with_ellipses(long_searcher):
    hit = _hit(long_searcher.search("校医院挂号和洗衣房", 5))
    text = excerpt(hit, 260)
    assert len(text) <= 260
    assert text.startswith(ELLIPSIS) or text.startswith(PARAGRAPHS[0][:10])
    shown = [p for p in hit.passages if LONG_DOCUMENT[p.start : p.end].strip() in text]
    assert shown and hit.passages[0] in shown  # the best passage is always shown
    positions = [text.index(LONG_DOCUMENT[p.start : p.end].strip()[:15]) for p in sorted(shown, key=lambda p: p.start)]
    assert positions == sorted(positions)
    whole = excerpt(hit, 10_000)
    assert len(whole) < len(LONG_DOCUMENT) or ELLIPSIS not in whole


def test_a_document_without_passages_is_cut_at_the_budget():
    from bot.knowledge.entries import Entry

    hit = Hit(Entry("a:1", "q", "字" * 500), 0.9, 0.9, "tantivy")
    assert excerpt(hit, 100) == "字" * 99 + ELLIPSIS
    assert excerpt(hit, 1000) == "字" * 500


def test_prompt_sends_the_passage_not_the_whole_document(long_searcher, settings):
    settings = replace(settings, "prompt.max_hit_chars", 200)
    hits = long_searcher.search("自习室预约超时未签到会怎样？", 3)
    text, _used = PromptBuilder(settings.prompt).references(hits)
    assert "违约" in text and "游泳馆" not in text
    shown = excerpt(_hit(hits), 200)
    assert ELLIPSIS in shown and len(shown) <= 200 and json.dumps(shown, ensure_ascii=False) in text


def test_retrieval_only_reply_sources_and_json_show_the_passages(settings, kb_dir):
    write_knowledge(kb_dir, knowledge(LONG_DOCUMENT + "\n\n<img src=http://evil.example/x.png>会议室在三楼。"))
    settings = replace(settings, "retrieval.passages", PassageSettings(size=SIZE, overlap=OVERLAP))
    settings = replace(settings, "prompt.max_hit_chars", 300)
    bot = build_bot(settings)
    answer = bot.answer("打印店彩色打印每页多少钱？")
    assert answer.hits and answer.hits[0].entry.id == "faq:guide"
    assert "彩色打印每页一元" in answer.text and "游泳馆" not in answer.text
    record = hit_dict(answer.hits[0])
    assert record["passages"][0]["text"] in LONG_DOCUMENT + "\n\n<img src=http://evil.example/x.png>会议室在三楼。"
    assert "彩色打印" in record["passages"][0]["text"]
    json.dumps(record, ensure_ascii=False)

    from bot.ui.render import sources_html

    answer = bot.answer("会议室在几楼")
    html = sources_html(answer)
    assert "kb-passages" in html and "<img" not in html and "&lt;img" in html


def test_the_llm_request_carries_the_matching_passage(llm_settings, llm_server, kb_dir):
    write_knowledge(kb_dir, knowledge())
    llm_settings = replace(llm_settings, "retrieval.passages", PassageSettings(size=SIZE, overlap=OVERLAP))
    llm_settings = replace(llm_settings, "prompt.max_hit_chars", 150)
    answer = build_bot(llm_settings).answer("校医院急诊几点关门？")
    assert answer.llm_used and answer.hits[0].entry.id == "faq:guide"
    question = llm_server.requests[-1]["body"]["messages"][-1]["content"]
    assert "急诊二十四小时值班" in question and "洗衣机" not in question
    assert json.dumps(excerpt(answer.hits[0], 150), ensure_ascii=False) in question
