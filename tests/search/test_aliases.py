"""Aliases mined from the knowledge: what the patterns find and refuse, searching with them from the first index on,
following edits of the knowledge, dropping a wrong one, and the linter listing them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.config.variants import replace
from bot.knowledge.entries import Entry
from bot.search.aliases import AliasMiner, alias_groups
from bot.search.synonyms import Synonyms, parse_synonyms
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.unit

CAMPUS = {
    **TINY,
    "intro": {
        "query": "学校简介",
        "document": "中山大学（Sun Yat-sen University），简称“中大”，位于广东省，是教育部直属的综合性全国重点大学。",
        "metadata": "简介",
    },
    "motto": {"query": "中山大学的校训", "document": "博学、审问、慎思、明辨、笃行。", "metadata": "校训"},
    "song": {"query": "中山大学的校歌", "document": "白云山高，珠江水长。", "metadata": "校歌"},
    "other": {"query": "华南农业大学的校训", "document": "修德、博学、求实、创新。", "metadata": "校训"},
}


def _entry(key: str, query: str, document: str, metadata: tuple[str, ...] = ()) -> Entry:
    return Entry(f"kb:{key}", query, document, metadata)


def _pairs(found) -> set[tuple[str, str, str]]:
    return {(a.alias, a.name, a.how) for a in found}


def test_markers_brackets_and_a_question_about_a_name_are_mined(tokenizer):
    entries = [
        _entry("a", "学校简介", "中山大学（Sun Yat-sen University, SYSU），简称“中大”，位于广东省。"),
        _entry("b", "学部", "经济与管理学部（以下简称经管学部）于2022年成立。"),
        _entry("c", "颜料", "丙烯颜料又称为塑胶彩或压克力颜料，发明于1950年代。"),
        _entry("d", "学校的英文缩写", "2020年，根据基本科学指标数据库（简称ESI）的统计，共有20个学科进入前1%。"),
        _entry("e", "中山医科大学简称", "中山医、中山医大"),
    ]
    found = _pairs(AliasMiner(tokenizer).mine(entries))
    assert {
        ("中大", "中山大学", "marker"),
        ("sun yat-sen university", "中山大学", "brackets"),
        ("sysu", "中山大学", "brackets"),
        ("经管学部", "经济与管理学部", "marker"),
        ("塑胶彩", "丙烯颜料", "marker"),
        ("压克力颜料", "丙烯颜料", "marker"),
        ("esi", "基本科学指标数据库", "marker"),
        ("中山医", "中山医科大学", "question"),
        ("中山医大", "中山医科大学", "question"),
    } <= found


@pytest.mark.parametrize(
    "document",
    [
        "四川大学华西医院，成都市民俗称为川医。",  # 俗称 inside 民俗: no marker
        "1946年，新医院在现址建成，简称大学医院。",  # the clause before the marker ends in a verb: no name
        "每一种检索模式（sparse、dense、hybrid）都能用。",  # an enumeration in brackets, not a name
        "实验室（ecoland）的教授来访。",  # one ordinary noun is a kind of thing, not a name
        "首钢集团有限公司，简称首钢，是北京市属国有公司。",  # the alias is a word of the name: adds nothing
    ],
)
def test_what_is_not_an_alias_is_not_mined(tokenizer, document):
    assert AliasMiner(tokenizer).mine([_entry("x", "介绍", document)]) == []


def test_a_query_asking_for_an_abbreviation_states_none_and_an_ambiguous_alias_is_dropped(tokenizer):
    asks = _entry("q", "中国各省市自治区简称都是什么？", "京、津、沪、渝、冀……")
    twice = [
        _entry("a", "介绍", "中山大学，简称中大，位于广州。"),
        _entry("b", "介绍", "中央大学，简称中大，位于南京。"),
    ]
    assert AliasMiner(tokenizer).mine([asks]) == []
    assert AliasMiner(tokenizer).mine(twice) == []


def test_a_short_form_the_knowledge_uses_of_a_frequent_name_is_mined(tokenizer):
    entries = [
        _entry(str(i), f"经济与管理学部{topic}", "见学院主页。") for i, topic in enumerate(["简介", "招生", "专业"])
    ]
    entries += [_entry("u1", "新学部", "经管学部成立于2022年。"), _entry("u2", "学部活动", "经管学部举办讲座。")]
    assert ("经管学部", "经济与管理学部", "short form") in _pairs(AliasMiner(tokenizer).mine(entries))
    # used by one entry only: not enough evidence
    assert AliasMiner(tokenizer).mine(entries[:-1]) == []


def _canteens(*campuses: str) -> list[Entry]:
    """Entries whose questions say X校区 and whose documents say X校园, as the campus knowledge writes them."""
    return [
        _entry(f"c{i}", f"广州{campus}校区第{i}食堂", f"广州{campus}校园饮食服务：食堂位于{campus}校园宿舍区。")
        for i, campus in enumerate(campuses)
    ]


def test_a_name_written_two_ways_by_several_entries_is_one_name(tokenizer):
    found = _pairs(AliasMiner(tokenizer).mine(_canteens("南", "北", "东", "南")))
    assert found == {(f"{c}校区", f"{c}校园", "two ways") for c in "南北东"}
    address = _entry("a", "南校园地址", "广东省广州市海珠区新港西路135号")
    synonyms = Synonyms(None, tokenizer, check_interval=0, miner=AliasMiner(tokenizer))
    synonyms.learn([*_canteens("南", "北", "东"), address])
    assert synonyms.canonical("南校区在哪") == "南校园在哪"  # the documents' way leads the group


def test_a_name_written_both_ways_matches_either_form_whichever_is_said(tokenizer):
    synonyms = Synonyms(None, tokenizer, check_interval=0, miner=AliasMiner(tokenizer))
    intro = _entry("i", "简介", "中山大学（SYSU），简称“中大”，位于广东省。")
    synonyms.learn([*_canteens("南", "北", "东"), intro])

    def alternatives(question: str) -> list[tuple[str, ...]]:
        return [form for unit in synonyms.units(question, []) if isinstance(unit, tuple) for form in unit]

    # the documents' form said: the questions' form (广州北校区学一食堂) is an alternative too, and the other way round
    assert ("北校区",) in alternatives("北校园在哪")
    assert ("北", "校园") in alternatives("北校区在哪")
    # an alias the knowledge states once stays out unless said (中山大学 does not search 中大)
    assert ("中大",) not in alternatives("中山大学在哪")


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param(_canteens("南", "北"), id="two entries swap the heads"),
        pytest.param(_canteens("南", "南", "南"), id="one name only"),
        pytest.param(
            [_entry(f"d{i}", f"{c}校区食堂", f"{c}校区和{c}校园都有食堂。") for i, c in enumerate("南北东")],
            id="the documents write it both ways",
        ),
        pytest.param(
            [_entry(f"p{i}", f"学校的学部{i}", f"学校的学术委员会第{i}次会议。") for i in range(4)],
            id="a particle before the head",
        ),
    ],
)
def test_a_name_written_two_ways_needs_several_entries_and_names(tokenizer, entries):
    assert [a for a in AliasMiner(tokenizer).mine(entries) if a.how == "two ways"] == []


def test_groups_are_led_by_the_name_and_join_a_file_group_without_taking_its_canonical_word(tokenizer):
    found = AliasMiner(tokenizer).mine([_entry("a", "简介", "中山大学（SYSU），简称“中大”，位于广东省。")])
    (group,) = alias_groups(found)
    assert group[0] == "中山大学" and set(group) == {"中山大学", "中大", "sysu"}
    merged = parse_synonyms("中山大学校, 中山大学\n!sysu\n").with_mined([group])
    assert merged.groups == (("中山大学校", "中山大学", "中大"),)  # sysu dropped, the file's first word leads
    assert merged.mined == {"中大"} and merged.excluded == {"sysu"}


def test_the_abbreviation_finds_its_entry_from_the_first_sparse_index_on(settings):
    from bot.factory import build_bot

    write_knowledge(Path(settings.knowledge.path), CAMPUS)
    off = build_bot(replace(replace(settings, "knowledge.aliases", False), "state_dir", settings.state_dir + "-off"))
    motto = {h.entry.id: h.relevance for h in off.retrieve("中大校训")[0]}.get("faq:motto", 0.0)
    assert motto < 0.6  # without aliases 中大 matches nothing it means, and holds most of the question's weight
    bot = build_bot(settings, llm=None)
    hits, passed = bot.retrieve("中大校训")
    assert passed and passed[0].entry.id == "faq:motto" and hits[0].relevance == 1.0
    assert bot.retrieve("SUN YAT-SEN UNIVERSITY 校歌")[1][0].entry.id == "faq:song"


def test_a_campus_asked_by_its_other_name_finds_its_address(settings):
    from bot.factory import build_bot

    campus = {f"canteen{i}": {"query": e.query, "document": e.document} for i, e in enumerate(_canteens(*"南北东南"))}
    campus["address"] = {"query": "南校园地址", "document": "广东省广州市海珠区新港西路135号", "metadata": "地址"}
    write_knowledge(Path(settings.knowledge.path), {**TINY, **campus})
    off = build_bot(replace(replace(settings, "knowledge.aliases", False), "state_dir", settings.state_dir + "-off"))
    assert off.retrieve("南校区地址")[0][0].entry.id != "faq:address"
    passed = build_bot(settings, llm=None).retrieve("南校区地址")[1]
    assert passed and passed[0].entry.id == "faq:address"


def test_aliases_follow_edits_of_the_knowledge_and_a_file_line_drops_a_wrong_one(settings, tmp_path):
    from bot.factory import build_bot

    folder = Path(settings.knowledge.path)
    write_knowledge(folder, TINY)
    synonyms = tmp_path / "synonyms.txt"
    settings = replace(settings, "knowledge.synonyms", str(synonyms))
    bot = build_bot(settings, llm=None)
    assert bot.index.aliases() == ()
    write_knowledge(folder, CAMPUS)
    bot.index.refresh(force=True)
    assert {(a.alias, dropped) for a, dropped in bot.index.aliases()} == {
        ("中大", False),
        ("sun yat-sen university", False),
    }
    assert bot.retrieve("中大校训")[1][0].entry.id == "faq:motto"
    # dropped by the file (re-read on its next check, no reload of the knowledge)
    synonyms.write_text("!中大\n", encoding="utf-8")
    os.utime(synonyms, ns=(10**18, 10**18))
    leaf = bot.index.synonyms
    assert leaf is not None
    leaf.check_interval = 0
    assert ("中大", True) in {(a.alias, dropped) for a, dropped in bot.index.aliases()}
    assert bot.retrieve("中大校训")[0][0].relevance < 0.6
    # the knowledge no longer says it: gone at the next load
    synonyms.unlink()
    without = {k: v for k, v in CAMPUS.items() if k != "intro"}
    write_knowledge(folder, without)
    bot.index.refresh(force=True)
    assert bot.index.aliases() == ()


def test_dense_questions_get_the_name_an_alias_stands_for(tokenizer):
    synonyms = Synonyms(None, tokenizer, check_interval=0, miner=AliasMiner(tokenizer))
    synonyms.learn([_entry("a", "简介", "中山大学（SYSU），简称“中大”，位于广东省。")])
    assert synonyms.canonical("中大的校训") == "中山大学的校训"
    assert synonyms.canonical("sysu motto") == "中山大学 motto"
    assert Synonyms(None, tokenizer, miner=None).listed() == ()


def test_a_miner_that_fails_keeps_the_previous_aliases_and_the_knowledge_loads(tokenizer, caplog):
    class Broken(AliasMiner):
        def mine(self, entries):
            raise ValueError("boom")

    synonyms = Synonyms(None, tokenizer, miner=AliasMiner(tokenizer))
    synonyms.learn([_entry("a", "简介", "中山大学，简称中大，位于广州。")])
    synonyms.miner = Broken(tokenizer)
    synonyms.learn([])
    assert [a.alias for a, _ in synonyms.listed()] == ["中大"] and "aliases not mined" in caplog.text
