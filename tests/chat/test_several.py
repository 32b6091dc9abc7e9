"""Whether a message asks for several things of a kind."""

from __future__ import annotations

import pytest

from bot.chat.several import asks_for_several

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "message",
    [
        "珠海校区食堂有哪些",
        "北校区有什么食堂",
        "学校一共有几个校区",
        "各校区分别在哪",
        "列出所有学院",
        "哪里有打印店",
        "Which dorms are there?",
        "list the canteens",
        "what kinds of rooms do you have",
    ],
)
def test_a_message_asking_for_the_members_of_a_kind_asks_for_several(message):
    assert asks_for_several(message)


@pytest.mark.parametrize(
    "message",
    ["图书馆几点开门", "食堂在哪里？", "中大哪年成立的", "校歌是什么", "Where is the library?", "Is it free?"],
)
def test_a_message_asking_for_one_thing_does_not(message):
    assert not asks_for_several(message)
