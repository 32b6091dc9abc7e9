"""The welcome card: pinned questions first, then the entries most asked in the window of a real conversation log
(a minimum count, no 👎 majority), shown as the phrasing visitors asked most, never one holding personal data; a
fresh deployment shows ``ui.examples``; per category filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.chat.answer import Answer, Strategy
from bot.chat.recorder import row_of
from bot.chat.welcome import WelcomeCard
from bot.config.serving import UISettings
from bot.conversations.asking import MostAsked
from bot.conversations.privacy import PersonalData
from bot.conversations.turn_log import TurnLog
from bot.knowledge.entries import Entry
from bot.knowledge.filters import entry_filter
from tests.support.answers import hit

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
LIBRARY = Entry("faq:library", "图书馆开放时间", "八点到十点。", categories=("校园",))
CANTEEN = Entry("faq:canteen", "食堂在哪里？", "东区。", categories=("校园",))
GYM = Entry("faq:gym", "体育馆开放时间", "九点关门。", questions=("体育馆几点关门？",), categories=("体育",))
CARD = Entry("faq:card", "校园卡补办", "到一卡通中心。", categories=("校园",))
PHONE = Entry("faq:phone", "校医院电话", "020-84112233。", categories=("校园",))
ENTRIES = [LIBRARY, CANTEEN, GYM, CARD, PHONE]


@pytest.fixture
def turn_log(tmp_path):
    mask = PersonalData().mask
    tl = TurnLog(tmp_path / "turns.sqlite", retention_days=365, clock=lambda: T0, mask=mask)
    yield tl
    tl.close()


def ask(turn_log: TurnLog, question: str, entry: Entry, times: int = 1, rating: int | None = None, days_ago: int = 0):
    """Record ``times`` answered turns of ``question`` from ``entry`` (each rated ``rating`` when given)."""
    for _ in range(times):
        answer = Answer(question, "…", Strategy.DIRECT, "sparse", hits=[hit(entry, 0.9), hit(CANTEEN, 0.6)])
        turn_id = turn_log.record(row_of(answer), "s", source="web", now=T0 - timedelta(days=days_ago, hours=1))
        if rating is not None:
            turn_log.feedback(turn_id, rating)


def card(turn_log: TurnLog | None, **ui) -> WelcomeCard:
    settings = UISettings(**{"welcome_min_count": 2, "welcome_size": 6, **ui})
    return WelcomeCard(lambda: ENTRIES, settings, MostAsked(turn_log, settings.welcome_days, ttl=0), PersonalData())


def test_pinned_first_then_the_most_asked_as_people_ask_them(turn_log):
    ask(turn_log, "图书馆几点开门", LIBRARY, 3)
    ask(turn_log, "图书馆周末开吗", LIBRARY, 1)
    ask(turn_log, "体育馆几点关门", GYM, 4)
    ask(turn_log, "校园卡丢了", CARD, 1)  # under the minimum count
    shown = card(turn_log, pinned=["校医院电话", "不在知识库里的问题"]).questions()
    # the library's most asked phrasing, not its title; the canteen was only ever a second reference
    assert shown == ["校医院电话", "体育馆几点关门", "图书馆几点开门"]


def test_a_pinned_entry_is_not_repeated_and_the_size_caps_the_card(turn_log):
    ask(turn_log, "体育馆几点关门", GYM, 4)
    ask(turn_log, "图书馆几点开门", LIBRARY, 3)
    assert card(turn_log, pinned=["体育馆几点关门？"]).questions() == ["体育馆几点关门？", "图书馆几点开门"]
    assert card(turn_log, pinned=["体育馆几点关门？"], welcome_size=1).questions() == ["体育馆几点关门？"]


def test_an_entry_with_a_thumbs_down_majority_is_left_out(turn_log):
    ask(turn_log, "图书馆几点开门", LIBRARY, 2, rating=-1)
    ask(turn_log, "图书馆几点开门", LIBRARY, 1, rating=1)
    ask(turn_log, "体育馆几点关门", GYM, 2, rating=-1)
    ask(turn_log, "体育馆几点关门", GYM, 2, rating=1)  # as many up as down: no majority
    assert card(turn_log).questions() == ["体育馆几点关门"]


def test_only_the_last_days_count(turn_log):
    ask(turn_log, "图书馆几点开门", LIBRARY, 5, days_ago=31)
    ask(turn_log, "图书馆几点开门", LIBRARY, 1, days_ago=29)
    ask(turn_log, "体育馆几点关门", GYM, 2, days_ago=29)
    assert card(turn_log).questions() == ["体育馆几点关门"]
    assert card(turn_log, welcome_days=60).questions() == ["图书馆几点开门", "体育馆几点关门"]


def test_a_fresh_deployment_shows_the_examples(turn_log):
    examples = ["食堂在哪里？", "不在知识库里的问题"]
    assert card(turn_log, examples=examples, pinned=["校园卡补办"]).questions() == ["校园卡补办", "食堂在哪里？"]
    assert card(None, examples=examples).questions() == ["食堂在哪里？"]  # recording off: the same
    ask(turn_log, "体育馆几点关门", GYM, 2)
    assert card(turn_log, examples=examples).questions() == ["体育馆几点关门"]
    assert card(turn_log, examples=examples, examples_source="fixed").questions() == ["食堂在哪里？"]


def test_personal_data_never_shows(turn_log):
    # Masked as stored: the most asked phrasing holds a mask label, so the next one shows.
    ask(turn_log, "我的手机13812345678打不开校园卡", CARD, 3)
    ask(turn_log, "校园卡丢了怎么补办", CARD, 2)
    # Only phrasings with personal data: the entry's own question.
    ask(turn_log, "电话 13987654321 是校医院的吗", PHONE, 3)
    stored = [t["question"] for t in turn_log.recent(50)]
    assert "我的手机[mobile]打不开校园卡" in stored and not any("13812345678" in q for q in stored)
    shown = card(turn_log).questions()
    assert shown == ["校园卡丢了怎么补办", "校医院电话"]
    assert not any("[mobile]" in q or "138" in q for q in shown)


def test_personal_data_stored_unmasked_is_never_shown_either(tmp_path):
    plain = TurnLog(tmp_path / "plain.sqlite", retention_days=365, clock=lambda: T0)  # privacy.mask off
    try:
        ask(plain, "请回电 13812345678 关于校园卡", CARD, 3)
        assert card(plain).questions() == ["校园卡补办"]
    finally:
        plain.close()


def test_the_category_filter_picks_the_card(turn_log):
    ask(turn_log, "图书馆几点开门", LIBRARY, 3)
    ask(turn_log, "体育馆几点关门", GYM, 4)
    welcome = card(turn_log, pinned=["校医院电话"])
    assert welcome.questions(entry_filter(["体育"])) == ["体育馆几点关门"]
    assert welcome.questions(entry_filter(["校园"])) == ["校医院电话", "图书馆几点开门"]
