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
