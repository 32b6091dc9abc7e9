"""The shared tokenizer: normalisation, punctuation, keywords kept whole, user dictionary."""

from __future__ import annotations

import pytest

from bot.errors import ConfigError
from bot.search.tokenizer import Tokenizer, normalize

pytestmark = pytest.mark.unit


def test_full_width_and_case_are_normalised():
    assert normalize("ＡＰＩ　Ｋｅｙ１２３") == "api key123"


def test_punctuation_dropped_words_and_numbers_kept(tokenizer):
    toks = tokenizer.tokenize("你好，GPT-4o！价格是 2024 元？")
    assert "gpt" in toks and "4o" in toks and "2024" in toks
    assert not any(t in toks for t in ("，", "！", "？", "-"))


def test_search_mode_emits_sub_words(tokenizer):
    toks = tokenizer.tokenize("中华人民共和国")
    assert "中华人民共和国" in toks and "中华" in toks


def test_keywords_stay_whole():
    tok = Tokenizer()
    assert "鸭大水平" not in tok.tokenize("鸭大水平怎么样")
    tok.add_words(["鸭大水平"])
    assert "鸭大水平" in tok.tokenize("鸭大水平怎么样")


def test_knowledge_is_indexed_under_the_chinese_words_a_visitor_types_of_its_keywords():
    tok = Tokenizer()
    tok.add_words(["广州校区北校园", "中山大学广州校区", "api_key"])
    entry = tok.index_tokens("中山大学广州校区北校园地址")
    assert "广州校区北校园" in entry and "北" in entry  # main: 北 was no token of the entry
    assert set(tok.tokenize("北校园地址")) <= set(entry)
    assert "中山大学" in tok.index_tokens("中山大学广州校区")  # main: only its 2- and 3-character pieces
    assert tok.index_tokens("api_key放哪") == ["api_key", "放", "哪"]  # a name keeps its parts to itself
    # a message holding the whole keyword is cut as before: its inner words would weigh it twice
    assert "北" not in tok.tokenize("广州校区北校园在哪")
    assert tok.tokenize_many(["广州校区北校园"]) == [tok.index_tokens("广州校区北校园")]


def test_an_english_word_is_not_cut_around_a_word_the_knowledge_added():
    tok = Tokenizer()
    tok.add_words(["esi", "sysu", "e5模型"])
    toks = tok.tokenize("The presidents of SYSU, ESI排名, a sysuer, 用e5模型")
    assert "presidents" in toks and "sysuer" in toks  # main: pr|esi|dents, sysu|er
    assert toks.count("esi") == 1 and toks.count("sysu") == 1 and "e5模型" in toks and "模型" in toks
    assert "".join(tok.segments("presidents of sysuer")) == "presidents of sysuer"
    assert "presidents" in tok.segments("presidents of sysuer")


def test_user_dictionary(tmp_path):
    d = tmp_path / "dict.txt"
    d.write_text("量子纠缠态 100 n\n", encoding="utf-8")
    tok = Tokenizer(user_dict=d)
    assert "量子纠缠态" in tok.tokenize("什么是量子纠缠态")
    assert tok.signature() != Tokenizer().signature()


def test_missing_user_dictionary_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="knowledge.user_dict"):
        Tokenizer(user_dict=tmp_path / "missing.txt").tokenize("x")


def test_control_characters_become_spaces(tokenizer):
    assert tokenizer.tokenize("abc\x00def\x07") == ["abc", "def"]


CAMPUSES = {
    side: {
        "query": f"中山大学广州校区{side}校园地址",
        "document": f"广东省广州市{district}({code})",
        "metadata": f"广州校区{side}校园,地址",
    }
    for side, district, code in (
        ("南", "海珠区新港西路135号", 510275),
        ("北", "越秀区中山二路74号", 510080),
        ("东", "番禺区外环东路132号", 510006),
    )
}


def test_a_sparse_bot_tells_campuses_apart_whose_keywords_name_them_whole(settings):
    from pathlib import Path

    from bot.factory import build_bot
    from tests.support.knowledge import write_knowledge

    write_knowledge(Path(settings.knowledge.path), CAMPUSES)
    hits, _ = build_bot(settings, llm=None).retrieve("北校园地址是什么")
    assert hits[0].entry.id == "faq:北"  # main: the three tied, south first
    assert hits[0].relevance > hits[1].relevance
