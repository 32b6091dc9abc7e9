"""Traditional Chinese read as simplified: the fold, and the words and answers a traditional message gets."""

from __future__ import annotations

import pytest

from bot.chat.answer import Decision
from bot.factory import build_bot
from bot.search.script import simplified
from bot.search.tokenizer import normalize
from tests.support.knowledge import with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit


def test_traditional_characters_and_phrases_become_simplified():
    assert simplified("中山大學的校訓是甚麼？") == "中山大学的校训是甚么？"
    # phrases before characters: 乾 is 干 in 乾燥 but stays in the name 乾隆
    assert simplified("乾燥") == "干燥" and simplified("乾隆") == "乾隆"


@pytest.mark.parametrize("text", ["图书馆几点开门", "乾隆", "API key 123", "", "😀", "a\tb"])
def test_simplified_and_other_text_are_unchanged(text):
    assert simplified(text) == text


def test_text_opencc_cannot_take_is_folded_around():
    # a lone surrogate cannot cross into OpenCC (UTF-8); a NUL would end a C string
    assert simplified("學\ud800校") == "学\ud800校"
    assert simplified("圖\0書館") == "图\0书馆"


def test_both_scripts_cut_into_the_same_words(tokenizer):
    assert tokenizer.tokenize("圖書館開放時間") == tokenizer.tokenize("图书馆开放时间")
    assert normalize("ＡＰＩ 開放") == "api 开放"


def test_a_traditional_message_gets_the_simplified_one_s_answer(settings):
    bot = build_bot(with_cutoffs(settings, "sparse", 0.5))
    simple, traditional = bot.answer("图书馆开放时间是几点"), bot.answer("圖書館開放時間是幾點")
    assert traditional.decision is Decision.ANSWER and traditional.hits[0].entry.id == "faq:library"
    assert traditional.hits[0].relevance == pytest.approx(simple.hits[0].relevance)
    assert "图书馆每天早上八点" in traditional.text  # shown as the knowledge writes it


def test_traditional_knowledge_answers_a_simplified_message(settings, kb_dir):
    write_knowledge(
        kb_dir,
        {
            "library": {"query": "圖書館開放時間", "document": "圖書館每天早上八點開放。", "metadata": "圖書館"},
            "canteen": {"query": "飯堂在哪裏？", "document": "學生飯堂在南門旁邊。", "metadata": "飯堂,餐飲"},
        },
    )
    bot = build_bot(with_cutoffs(settings, "sparse", 0.5))
    got = bot.answer("图书馆几点开放")
    assert got.decision is Decision.ANSWER and got.hits[0].entry.id == "faq:library"
    assert "圖書館每天早上八點開放" in got.text  # the knowledge's own characters, not folded
