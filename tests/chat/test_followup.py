"""The follow-up rule without an LLM: only messages that read as follow-ups are searched with the last question.

Before, any short message after an answered one was searched together with it, so "谢谢" after
"中大有哪些附属医院" returned the hospital list again (30 of 30 tries). Each pair below is (previous question,
message, whether it is a follow-up), asked through the bot in retrieval-only mode.
"""

from __future__ import annotations

import pytest

from bot.chat.followup import is_small_talk, reads_as_followup
from bot.config.variants import replace
from bot.factory import build_bot
from tests.support.knowledge import with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

CAMPUS = {
    "hospitals": {
        "query": "中山大学的附属医院",
        "document": "中山大学有附属第一医院、附属第二医院、附属第三医院等十家附属医院。",
        "metadata": "附属医院,医院",
    },
    "south": {
        "query": "广州校区南校园地址",
        "document": "南校园位于广州市海珠区新港西路135号。",
        "metadata": "南校园,地址",
    },
    "zhuhai": {"query": "珠海校区地址", "document": "珠海校区位于珠海市香洲区唐家湾。", "metadata": "珠海校区,地址"},
    "library": {"query": "中山大学图书馆", "document": "图书馆由多个分馆组成，馆藏丰富。", "metadata": "图书馆"},
    "motto": {"query": "中山大学的校训", "document": "博学、审问、慎思、明辨、笃行。", "metadata": "校训"},
    "founder": {"query": "中山大学的创办人", "document": "中山大学由孙中山先生亲手创办。", "metadata": "创办人,孙中山"},
}

NOT_FOLLOWUPS = [
    "谢谢",
    "谢谢你！",
    "多谢",
    "感谢",
    "好的",
    "嗯嗯",
    "哦",
    "你好",
    "您好",
    "早上好",
    "再见",
    "拜拜",
    "哈哈哈",
    "辛苦了",
    "thanks",
    "Thank you!",
    "hello",
    "hi there",
    "ok",
    "bye",
    "火星上有几座城市",
    "帮我写一首诗",
    "推荐一部电影",
    "1+1等于几",
    "这个机器人是什么？",
    "其他学院有哪些",
    "中大的校训是什么",
    "珠海校区在哪里",
    "How do I add knowledge?",
    "北京大学的校训是什么",
]
FOLLOWUPS = [
    ("广州校区南校园地址在哪", "那珠海校区呢？"),
    ("中大的校训是什么", "英文的呢"),
    ("中山大学的附属医院", "那图书馆呢"),
    ("中山大学的创办人是谁", "他是谁"),
    ("珠海校区地址", "它在哪个区"),
    ("南校园地址在哪", "那里有图书馆吗"),
    ("中大的校训是什么", "还有校歌吗"),
    ("Where is the south campus?", "what about Zhuhai?"),
    ("Who founded the university?", "when was it founded?"),
    ("南校园地址在哪", "这个呢？"),
]


@pytest.mark.parametrize("message", NOT_FOLLOWUPS)
def test_small_talk_and_complete_questions_are_not_followups(message):
    assert not reads_as_followup(message)


@pytest.mark.parametrize("previous,message", FOLLOWUPS)
def test_elliptical_and_anaphoric_questions_are_followups(previous, message):
    assert reads_as_followup(message)


def test_small_talk_detection():
    assert (
        is_small_talk("谢谢！") and is_small_talk("Thanks a lot.") and not is_small_talk("谢谢你告诉我校训，那校歌呢")
    )


@pytest.fixture
def campus_bot(settings, tmp_path):
    write_knowledge(tmp_path / "campus", CAMPUS)
    settings = replace(settings, "knowledge.path", str(tmp_path / "campus"))
    settings = with_cutoffs(settings, "sparse", 0.35)
    return build_bot(settings)


def _history(question: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


@pytest.mark.parametrize("message", NOT_FOLLOWUPS)
def test_after_an_answered_question_a_non_followup_never_gets_the_previous_answer(campus_bot, message):
    first = campus_bot.answer("中山大学有哪些附属医院")
    assert first.hits and first.hits[0].entry.id == "faq:hospitals"
    answer = campus_bot.answer(message, _history("中山大学有哪些附属医院", first.text))
    assert answer.rewritten is None
    assert all(h.entry.id != "faq:hospitals" for h in answer.hits)


def test_elliptical_followup_is_searched_with_its_subject_in_the_previous_questions_slot(campus_bot):
    answer = campus_bot.answer("那珠海校区呢？", _history("广州校区南校园地址在哪", "南校园位于广州市海珠区。"))
    assert answer.rewritten == "珠海校区南校园地址在哪"  # not both messages: 广州校区南校园 outweighed 珠海 there
    assert answer.hits[0].entry.id == "faq:zhuhai"


def test_anaphoric_followup_finds_the_entry_the_pronoun_points_to(campus_bot):
    answer = campus_bot.answer("他是谁", _history("中山大学的创办人", "中山大学由孙中山先生亲手创办。"))
    assert answer.rewritten == "中山大学的创办人 他是谁"
    assert answer.hits[0].entry.id == "faq:founder"


def test_followup_alone_without_history_falls_back(campus_bot):
    assert campus_bot.answer("他是谁").hits == []
