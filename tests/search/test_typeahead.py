"""Type-ahead: the index of the knowledge's questions, its ranking, filters and synonyms, and its rebuild after an
edit of the knowledge through the editor."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.config.serving import TypeaheadSettings
from bot.config.variants import replace
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.knowledge.validity import Availability
from bot.search.synonyms import Synonyms, parse_synonyms
from bot.search.tokenizer import Tokenizer
from bot.search.typeahead import MAX_VARIANTS, SynonymSpellings, Typeahead, TypeaheadIndex, match_form
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.unit

FAQ = [
    Entry("faq:fee", "学费是多少？", "5000 元", questions=("学费怎么交", "一年学费多少钱")),
    Entry("faq:fee-late", "学费晚交有什么后果", "滞纳金"),
    Entry("faq:dorm", "宿舍几点关门", "23:00", categories=("住宿",)),
    Entry("faq:dorm-fee", "宿舍费用和学费一起交吗", "是", categories=("住宿", "财务")),
    Entry("faq:card", "校园卡丢了怎么办", "补办", questions=("一卡通丢失",)),
    Entry("faq:draft", "学费减免政策（草稿）", "…", draft=True),
    Entry("faq:old", "2025 年学费调整", "…", valid_until="2025-12-31"),
    Entry("faq:later", "2027 年学费公告", "…", valid_from="2027-01-01"),
    Entry("faq:html", "<b>学费</b> <script>alert(1)</script> 发票", "…"),
]


def typeahead(entries, synonyms: Synonyms | None = None, **options) -> Typeahead:
    """A Typeahead over ``entries`` on 2026-06-01 (Asia/Shanghai)."""
    day = Availability(clock=lambda: datetime(2026, 6, 1, 4, tzinfo=UTC))
    return Typeahead(TypeaheadSettings(**options), lambda: entries, synonyms, day)


def asked(found) -> list[str]:
    return [s.question for s in found]


def test_match_form_folds_width_case_spaces_and_punctuation():
    assert match_form("  ＡＢＣ 怎么 添加知识？!") == "abc怎么添加知识"
    assert match_form(".*?[](){}\\") == ""
    assert match_form("C++ | x^2 $") == "c++|x^2$"  # symbols stay: C++ is not C


def test_questions_that_contain_the_text_starting_ones_first_then_shorter():
    found = typeahead(FAQ).suggest("学费")
    # starting with 学费 (the shorter first), then containing it (shorter first), one question per entry: the fee
    # entry's 一年学费多少钱 is left out, having given 学费怎么交; the expired, future and draft entries too
    assert asked(found) == [
        "学费怎么交",
        "学费晚交有什么后果",
        "宿舍费用和学费一起交吗",
        "<b>学费</b> <script>alert(1)</script> 发票",
    ]
    assert [s.entry_id for s in found] == ["faq:fee", "faq:fee-late", "faq:dorm-fee", "faq:html"]


def test_traditional_characters_find_the_simplified_questions():
    assert asked(typeahead(FAQ).suggest("學費")) == asked(typeahead(FAQ).suggest("学费"))
    assert asked(typeahead(FAQ).suggest("校園卡")) == ["校园卡丢了怎么办"]


def test_a_phrasing_is_found_as_well_as_the_query():
    assert asked(typeahead(FAQ).suggest("一卡通")) == ["一卡通丢失"]
    assert asked(typeahead(FAQ).suggest("多少钱")) == ["一年学费多少钱"]


def test_at_most_the_configured_number():
    assert len(typeahead(FAQ, suggestions=2).suggest("学费")) == 2
    many = [Entry(f"f:{i}", f"问题{i:03d}号关于学费", "d") for i in range(50)]
    assert len(typeahead(many).suggest("学费")) == 5


def test_the_log_counts_put_often_asked_entries_first():
    entries = [Entry("a", "校园卡怎么充值", "d"), Entry("b", "校园卡丢了怎么办呢", "d")]
    plain = TypeaheadIndex(entries)
    popular = TypeaheadIndex(entries, {"b": 40})
    live = plain.live(datetime(2026, 6, 1).date())
    assert asked(plain.find(["校园卡"], live, 5)) == ["校园卡怎么充值", "校园卡丢了怎么办呢"]
    assert asked(popular.find(["校园卡"], popular.live(datetime(2026, 6, 1).date()), 5))[0] == "校园卡丢了怎么办呢"


def test_drafts_and_entries_outside_their_dates_are_never_offered():
    found = {s.entry_id for s in typeahead(FAQ, suggestions=10).suggest("学费")}
    assert "faq:draft" not in found and "faq:old" not in found and "faq:later" not in found
    assert typeahead(FAQ).suggest("草稿") == []
    assert typeahead(FAQ).suggest("2027") == []


def test_the_category_filter_keeps_its_entries_only():
    t = typeahead(FAQ)
    assert asked(t.suggest("宿舍", EntryFilter(frozenset({"财务"})))) == ["宿舍费用和学费一起交吗"]
    assert asked(t.suggest("学费", EntryFilter(frozenset({"住宿"})))) == ["宿舍费用和学费一起交吗"]
    assert t.suggest("学费", EntryFilter(frozenset({"没有这个分类"}))) == []


def test_a_synonym_finds_the_questions_of_its_group_after_the_literal_ones(tmp_path: Path, tokenizer: Tokenizer):
    file = tmp_path / "synonyms.txt"
    file.write_text("校园卡, 一卡通, 饭卡\n", encoding="utf-8")
    entries = [Entry("card", "校园卡丢了怎么办", "补办"), Entry("topup", "饭卡在哪充值", "食堂")]
    t = typeahead(entries, Synonyms(file, tokenizer))
    # 一卡通 is in no question: both come through the group; those starting with a spelling first
    assert asked(t.suggest("一卡通")) == ["校园卡丢了怎么办", "饭卡在哪充值"]
    assert asked(t.suggest("饭卡")) == ["饭卡在哪充值", "校园卡丢了怎么办"]
    assert asked(typeahead(entries).suggest("一卡通")) == []


def test_synonym_spellings_are_bounded():
    groups = parse_synonyms("\n".join(f"词{i}a, 词{i}b, 词{i}c" for i in range(10)))
    text = "".join(f"词{i}a" for i in range(10))
    spellings = SynonymSpellings().of(text, groups)
    assert 0 < len(spellings) <= MAX_VARIANTS and text not in spellings


@pytest.mark.parametrize(
    "text",
    ["", " ", "学", "？", "  学  ", ".*", "[(", "\\", "%", "' OR 1=1 --", "<script>", "\x00\x01"],
)
def test_empty_short_and_special_input_offers_nothing_or_only_literal_matches(text):
    found = typeahead(FAQ).suggest(text)
    form = match_form(text)
    assert all(form in match_form(s.question) for s in found)
    if len(form) < 2:
        assert found == []


def test_special_characters_match_literally_never_as_a_pattern():
    entries = [Entry("c", "C++ 和 C# 的区别", "d"), Entry("r", "正则 a.*b 怎么写", "d"), Entry("x", "Cxx 教程", "d")]
    t = typeahead(entries)
    assert asked(t.suggest("c++")) == ["C++ 和 C# 的区别"]
    assert asked(t.suggest("a.*b")) == ["正则 a.*b 怎么写"]  # punctuation folded away: "ab" is what is matched
    assert asked(t.suggest("<b>")) == []  # "b" alone: too short


def test_html_in_a_question_comes_back_as_text():
    found = typeahead(FAQ).suggest("发票")
    assert asked(found) == ["<b>学费</b> <script>alert(1)</script> 发票"]  # the front ends escape it


def test_too_long_input_offers_nothing():
    t = typeahead(FAQ, max_chars=20)
    assert t.suggest("学费" + " " * 18)  # 20 characters: still typed
    assert t.suggest("学费" + " " * 19) == []
    assert typeahead(FAQ).suggest("学费" * 10_000) == []


def test_off_offers_nothing():
    assert typeahead(FAQ, enabled=False).suggest("学费") == []


def test_an_empty_knowledge_offers_nothing():
    assert typeahead([]).suggest("学费") == []


def test_long_texts_intersect_many_bigrams_and_still_check_containment():
    entries = [
        Entry("a", "怎么申请奖学金和助学金", "d"),
        Entry("b", "助学金和奖学金怎么申请", "d"),
        Entry("c", "奖学 学金", "d"),  # holds both bigrams of 奖学金, not the text
    ]
    t = typeahead(entries)
    assert asked(t.suggest("申请奖学金和助学金")) == ["怎么申请奖学金和助学金"]
    assert asked(t.suggest("奖学金")) == ["助学金和奖学金怎么申请", "怎么申请奖学金和助学金"]  # same length: by text


def test_the_index_follows_the_knowledge_after_an_edit(settings, kb_dir):
    from bot.factory import build_knowledge_base

    write_knowledge(kb_dir, TINY)
    kb = build_knowledge_base(settings)
    assert kb.typeahead is not None
    assert asked(kb.typeahead.suggest("图书馆")) == ["图书馆开放时间"]
    kb.editor.add("faq", None, "图书馆能借几本书？", "每人最多 10 本。", "")
    assert asked(kb.typeahead.suggest("图书馆")) == ["图书馆开放时间", "图书馆能借几本书？"]
    kb.editor.delete("faq", "library")
    assert asked(kb.typeahead.suggest("图书馆")) == ["图书馆能借几本书？"]


def test_in_the_background_a_rebuild_never_makes_a_look_up_wait():
    entries = [Entry("a", "图书馆开放时间", "d")]
    current = {"entries": entries}
    t = Typeahead(TypeaheadSettings(), lambda: current["entries"], background=True)
    assert t.wait_idle(10)
    assert asked(t.suggest("图书馆")) == ["图书馆开放时间"]
    current["entries"] = [*entries, Entry("b", "图书馆能借几本书", "d")]
    t.suggest("图书馆")  # starts the rebuild; the previous index answers meanwhile
    assert t.wait_idle(10)
    assert asked(t.suggest("图书馆")) == ["图书馆开放时间", "图书馆能借几本书"]


def test_the_log_counts_are_read_again_after_a_while():
    now = {"t": 0.0}
    counts = {"b": 0}
    entries = [Entry("a", "校园卡怎么充值", "d"), Entry("b", "校园卡丢了怎么办呢", "d")]
    t = Typeahead(TypeaheadSettings(), lambda: entries, asked=lambda: dict(counts), clock=lambda: now["t"])
    assert t.suggest("校园卡")[0].entry_id == "a"
    counts["b"] = 100
    assert t.suggest("校园卡")[0].entry_id == "a"  # counts are not read at every keystroke
    now["t"] = 10_000.0
    assert t.suggest("校园卡")[0].entry_id == "b"


def test_a_failing_log_ranks_without_counts():
    def broken():
        raise OSError("log gone")

    t = Typeahead(TypeaheadSettings(), lambda: [Entry("a", "校园卡怎么充值", "d")], asked=broken)
    assert asked(t.suggest("校园卡")) == ["校园卡怎么充值"]


def test_settings_reach_the_typeahead_of_a_knowledge_base(settings, kb_dir):
    from bot.factory import build_knowledge_base

    write_knowledge(kb_dir, TINY)
    kb = build_knowledge_base(replace(settings, "typeahead.suggestions", 1))
    assert kb.typeahead is not None and len(kb.typeahead.suggest("怎么")) == 1


def test_before_the_knowledge_loads_a_keystroke_builds_nothing_again():
    t = Typeahead(TypeaheadSettings(), lambda: [])  # a new empty list at each call, as before the first load
    first = t.index()
    assert first is not None and t.index() is first and t.suggest("学费") == []
