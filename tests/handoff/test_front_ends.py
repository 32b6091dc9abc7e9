"""How the front ends show the hand-off, in process: the sources panel of a turn that searched nothing, the offer of
a person as a button (page) or a hint (WeCom), one name for the hand-off in the log, the inbox and analytics (an
older log's ``escalate`` included), and the inbox's filter of hand-off tickets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.chat.answer import OFFERED, Answer, HandoffState, Strategy
from bot.chat.recorder import row_of
from bot.conversations.analytics import Analytics
from bot.conversations.log_store import TurnRow
from bot.conversations.turn_log import TurnLog
from bot.handoff.store import TicketStore
from bot.handoff.tickets import Line, Reason, Said
from bot.texts import HANDOFF_BUTTON, HANDOFF_OFFER, HANDOFF_OFFER_HINT, NOT_SEARCHED
from bot.ui.chat_handlers import reply_message
from bot.ui.inbox_tab import HANDOFFS, STRATEGIES, tickets_html
from bot.ui.render import STRATEGY_LABELS, sources_html

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "answer",
    [
        Answer("你好", "你好！有什么可以帮您？", Strategy.CHITCHAT, "sparse"),
        Answer("转人工", "好的，已为您转接人工客服", Strategy.HANDOFF, "sparse", handoff=HandoffState("open", 1)),
    ],
    ids=["chitchat", "handoff"],
)
def test_a_turn_that_searched_nothing_says_so_not_that_nothing_passed(answer):
    html = sources_html(answer)
    assert NOT_SEARCHED in html and "passed the threshold" not in html


def test_a_miss_that_searched_still_says_nothing_passed():
    from bot.chat.answer import Cutoffs

    miss = Answer("火星", "抱歉", Strategy.LAST_RESORT, "sparse", thresholds=Cutoffs("sparse", 0.5))
    assert "passed the threshold" in sources_html(miss) and NOT_SEARCHED not in sources_html(miss)


def test_the_offer_of_a_person_is_a_button_after_the_did_you_mean_ones():
    offered = Answer(
        "木星",
        f"抱歉…\n\n{HANDOFF_OFFER}",
        Strategy.LAST_RESORT,
        "sparse",
        suggestions=("图书馆开放时间",),
        handoff=OFFERED,
    )
    options = reply_message(offered)["options"]
    assert options == [
        {"value": "图书馆开放时间", "label": "图书馆开放时间"},
        {"value": "转人工", "label": HANDOFF_BUTTON},
    ]


def test_wecom_has_no_buttons_so_the_offer_says_how_to_take_it():
    from bot.api.im.render import render
    from bot.api.wecom.messages import MAX_TEXT_BYTES

    offered = Answer("木星", f"抱歉…\n\n{HANDOFF_OFFER}", Strategy.LAST_RESORT, "sparse", handoff=OFFERED)
    assert render(offered, MAX_TEXT_BYTES).endswith(f"{HANDOFF_OFFER}\n{HANDOFF_OFFER_HINT}")
    assert (
        render(Answer("在吗", "", Strategy.HELD, "sparse"), MAX_TEXT_BYTES) == ""
    )  # a person holds it: the bot sends nothing


def test_one_name_for_the_hand_off_in_the_log_the_inbox_and_analytics(tmp_path):
    """An older log's misses that "escalated" read as hand-offs; no front end offers "escalate" any more."""
    log = TurnLog(tmp_path / "turns.sqlite")
    try:
        log.record(TurnRow("木星有几颗卫星", "escalate", "sparse", text="好的，已为您记录转人工的请求"), "s1")
        log.record(row_of(Answer("转人工", "好的", Strategy.HANDOFF, "sparse")), "s2")
        assert [t["strategy"] for t in log.recent()] == ["handoff", "handoff"]
        [group] = log.unanswered()  # the old miss is still unanswered, under the one name
        assert group.strategies == {"handoff": 1}
        decisions = Analytics(log, 10, 100).compute().tile("decisions").rows
        assert decisions == (("handoff", 2, 1.0),)
    finally:
        log.close()
    assert "escalate" not in {value for _, value in STRATEGIES}
    assert all("escalate" not in label for label in STRATEGY_LABELS.values())


def test_the_inbox_lists_hand_off_tickets_under_their_own_filter_escaped(tmp_path):
    log = TurnLog(tmp_path / "turns.sqlite")
    try:
        store = TicketStore(log, lambda: datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
        store.open("web:1", "web", None, Reason.ASKED, "<script>x</script>宿舍断网", [Line(Said.VISITOR, "转人工")], {})
        html = tickets_html(store.tickets(), [])
        assert "&lt;script&gt;x&lt;/script&gt;宿舍断网" in html and "<script>" not in html
        assert "asked" in html and "open" in html and "2026-03-02 10:00" in html
    finally:
        log.close()
    assert HANDOFFS == "handoffs"


def test_another_knowledge_base_keeps_its_tickets_but_promises_no_person(two_kbs, monkeypatch):
    """Only the default knowledge base's desk has a console and a notices' worker: another one gives the contact."""
    from bot.config.knowledge_bases import knowledge_base_settings
    from bot.config.settings import load_settings
    from bot.factory import build_bot
    from bot.handoff.tickets import Conversation

    monkeypatch.setenv("KBBOT_ADMIN_USER", "boss")
    monkeypatch.setenv("KBBOT_ADMIN_PASSWORD", "boss-password-1")
    top = load_settings(two_kbs(handoff={"contact": "电话 020-1234"}))
    visitor = Conversation("web", "a-visitor-secret-0123456789")
    default = build_bot(top).answer("转人工", conversation=visitor)
    assert "在这里回复" in default.text and default.handoff is not None and default.handoff.ticket is not None
    hr = build_bot(knowledge_base_settings(top, "hr")).answer("转人工", conversation=visitor)
    assert "在这里回复" not in hr.text and "电话 020-1234" in hr.text
    assert hr.handoff is not None and hr.handoff.status == "open"  # kept: its inbox lists it
