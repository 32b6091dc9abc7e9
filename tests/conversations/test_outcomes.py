"""Outcomes: when an answer is resolved, what a conversation counts as, the rates per day, the "was this solved?"
replies and the fixed thumbs-down reasons, judged from a real conversation log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.conversations.analytics import Analytics
from bot.conversations.inbox import normalise
from bot.conversations.outcomes import Judge, TurnFacts, asks_solved, reason_code, says_it_did_not_help
from bot.conversations.tiles import StatsFilter
from bot.factory import build_knowledge_base
from bot.texts import DOWN_REASONS

pytestmark = pytest.mark.unit

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def turn(i: int, minutes: float, question: str, strategy: str = "direct", session: str | None = "s", **kw) -> TurnFacts:
    return TurnFacts(
        i,
        T0 + timedelta(minutes=minutes),
        session,
        normalise(question),
        strategy,
        kw.get("rating"),
        kw.get("reason"),
        kw.get("entries", ("faq:a",)),
    )


JUDGE = Judge(30, 0.5)


def outcome(*turns: TurnFacts, judge: Judge = JUDGE):
    answers = judge.answers(turns)
    return [a.resolved for a in sorted(answers, key=lambda a: a.turn.id)], judge.conversations(turns, answers)


def test_an_answer_is_resolved_unless_something_in_the_window_says_otherwise():
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 3, "食堂在哪里"))[0] == [True, True]
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 3, "图书馆周末几点开门", "last_resort"))[0] == [False]
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 45, "图书馆周末几点开门"))[0] == [
        True,
        True,
    ]  # past the window
    assert outcome(turn(1, 0, "图书馆几点开门", rating=-1))[0] == [False]
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 1, "转人工", "handoff"))[0] == [False]
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 1, "没用", "chitchat"))[0] == [False]
    assert outcome(turn(1, 0, "图书馆几点开门"), turn(2, 1, "图书馆几点开门", session="other"))[0] == [True, True]


def test_a_conversation_counts_its_last_answer_and_small_talk_alone_counts_nowhere():
    _, convs = outcome(
        turn(1, 0, "你好", "chitchat", session="hello"),
        turn(2, 0, "图书馆几点开门", session="a"),
        turn(3, 2, "图书馆几点开门呀", session="a"),  # the re-ask got a better answer: the last one resolves it
        turn(4, 0, "宿舍几点熄灯", "last_resort", session="b"),
        turn(5, 1, "转人工", "handoff", session="b"),
        turn(6, 0, "食堂在哪里", session=None),  # a single API exchange is its own conversation
    )
    by_key = {c.key: c for c in convs}
    assert "hello" not in by_key and by_key["a"].resolved and by_key["a"].answered
    assert not by_key["b"].answered and by_key["b"].handed_off and not by_key["b"].resolved
    assert by_key["turn:6"].resolved and by_key["turn:6"].day == "2026-05-04"


def test_reasons_are_fixed_choices_and_free_text_counts_as_other():
    for code, label in DOWN_REASONS:
        assert reason_code(label) == code and reason_code(f"{label}: 说得不对") == code
    assert reason_code("不相关 / Irrelevant") == "not_asked" and reason_code("错误 / Wrong") == "wrong"
    assert reason_code("随便写的") == "other" and reason_code(None) == "unspecified"
    assert reason_code("未解决 / Not solved") == "not_solved" and reason_code("已解决 / Solved", 1) is None
    assert says_it_did_not_help(normalise("没用！")) and not says_it_did_not_help(
        normalise("没用的东西放在哪里可以回收呢")
    )


def test_the_question_follows_answers_from_the_knowledge_as_configured():
    assert not asks_solved("off", 200, "direct", "x" * 500)
    assert asks_solved("every", 200, "direct", "短") and not asks_solved("every", 200, "clarify", "短")
    assert asks_solved("long", 10, "rewrite", "一二三四五六七八九十") and not asks_solved("long", 10, "direct", "短")


def test_the_log_gives_rates_per_day_the_solved_yes_rate_and_a_no_is_a_miss_in_the_inbox(settings):
    kb = build_knowledge_base(settings)
    ask = lambda q, s: kb.ask(q, source="web", session=s)
    good = ask("食堂在哪里？", "a")
    bad = ask("怎么添加知识？", "b")
    ask("怎么添加知识呢", "b")  # the same thing again: b's first answer was not it
    third = ask("阈值是什么意思？", "c")
    ask("转人工", "d")
    recorder, log = kb.recorder, kb.recorder.log
    assert log is not None
    assert recorder.solved(good.turn_id, True) and recorder.solved(third.turn_id, False)
    assert recorder.rate(bad.turn_id, DOWN_REASONS[1][1])
    stats = Analytics(log, 10, 1000).compute(StatsFilter(), [e.id for e in kb.index.entries])
    total = {name: stats.tile(name).total or () for name in ("resolution_rate", "answered_rate", "handoff_rate")}
    assert total["answered_rate"][1:3] == (4, 3)  # d asked for a person and got no answer from the knowledge
    assert total["resolution_rate"][2] == 2  # a, and b's second answer; c said no
    assert total["handoff_rate"][2] == 1
    assert stats.tile("resolution_rate").columns == ("day", "conversations", "resolved", "rate")
    assert stats.tile("solved_yes_rate").total == ("total", 2, 1, 0.5)
    reasons = {r[0]: r[1] for r in stats.tile("down_reasons").rows}
    assert reasons == {"outdated": 1, "not_solved": 1}
    assert third.turn_id in {i for g in log.unanswered() for i in g.turn_ids}  # a "no" is a miss
    assert stats.to_dict()["resolution_rate"]["total"][0] == "total"
