"""Pinyin typos: a run no word of the knowledge holds, read as the knowledge's word of the same sound."""

from __future__ import annotations

import pytest

from bot.chat.answer import Decision
from bot.config.variants import replace
from bot.factory import build_bot
from bot.search.homophones import Heard, Homophones
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit


def knowledge(*words: str):
    """How many entries hold each word: 3 for ``words``, 0 for any other."""
    return lambda asked: {w: 3 if w in words else 0 for w in asked}


@pytest.fixture
def homophones(tokenizer) -> Homophones:
    return Homophones(tokenizer)


def test_a_mistyped_character_is_read_as_the_knowledge_word_of_the_same_sound(homophones):
    assert homophones.heard("中大的效训是什么", knowledge("校训")) == [Heard(("效训",), "校训")]
    assert homophones.heard("计算机学院有啥专叶", knowledge("专业", "计算机")) == [Heard(("专叶",), "专业")]
    # jieba cuts the typo into two pieces: the run spans both
    assert homophones.heard("珠海校区地只", knowledge("地址", "珠海")) == [Heard(("地", "只"), "地址")]


def test_only_a_character_of_the_same_sound_and_tone_is_a_typo_and_only_one_word_may_fit(homophones):
    # 只 zhǐ: 址 zhǐ, not 质 zhì
    assert homophones.heard("珠海校区地只", knowledge("地址", "地质")) == [Heard(("地", "只"), "地址")]
    assert homophones.heard("珠海校区地只", knowledge("地质")) == []
    # a phrase typed right, one character of another tone away from a word of the knowledge (买 mǎi, 卖 mài)
    assert homophones.heard("在哪里买东西", knowledge("卖东西")) == []
    # 效 xiào: 校 and 笑 both xiào; the knowledge holding both, nothing tells which was meant
    assert homophones.heard("效训是什么", knowledge("校训", "笑训")) == []


def test_words_typed_right_and_words_the_knowledge_holds_are_left_alone(homophones):
    assert homophones.heard("这是什么事实", knowledge("史实")) == []  # 事实 is a word: typed as meant
    assert homophones.heard("中大的效训是什么", knowledge("校训", "效训")) == []  # the knowledge says it as typed
    assert homophones.heard("校歌歌词发一下", knowledge("校歌", "歌词")) == []
    assert homophones.heard("的是什么", knowledge("得是")) == []  # particles are not a mistyped word
    # a rare reading of the typed character does not count: 接 is jiē (xié only in old texts), 写 is xiě
    assert homophones.heard("不接大模型", knowledge("不写")) == []
    assert homophones.heard("hyde 是啥", knowledge("hyde")) == []


def test_a_sparse_bot_answers_a_message_with_a_pinyin_typo(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    asked = "图书管开放时间"  # 管 for 馆
    on = build_bot(settings).answer(asked)
    assert on.decision is Decision.ANSWER and on.hits[0].entry.id == "faq:library"
    off = build_bot(replace(settings, "retrieval.sparse.homophones", False)).answer(asked)
    assert off.hits[0].relevance < on.hits[0].relevance
