"""The parts the IM channels (WeCom, Feishu) share, without a server: answers as plain text with numbered offers
and sources, cut to one message; each conversation's bounded memory; the events taken once; the cached token."""

from __future__ import annotations

import logging

import httpx
import pytest

from bot.api.im.delivery import TokenCache
from bot.api.im.memory import Histories, Seen
from bot.api.im.render import fit, plain, render
from bot.api.im.seen import SeenFile
from bot.chat.answer import Answer, Option, Strategy
from bot.chat.offers import CLARIFY_TAIL, clarify_text, read_offer
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from bot.texts import DID_YOU_MEAN, PICK_HINT

pytestmark = pytest.mark.unit

MAX_BYTES = 2048  # WeCom's text message


def answer(text: str, strategy: Strategy = Strategy.VERBATIM, options: tuple[Option, ...] = ()) -> Answer:
    return Answer(question="q", text=text, strategy=strategy, mode="sparse", options=options)


def test_markdown_becomes_plain_text():
    text = "## 标题\n**加粗** 和 `代码`，见 [文档](https://example.org/a)。\n* 一项\n![图](https://x/y.png)"
    assert plain(text) == "标题\n加粗 和 代码，见 文档 (https://example.org/a)。\n- 一项\n图"


def test_a_clarify_question_keeps_the_cores_numbering_once_with_the_pick_hint():
    core = clarify_text(["本科生学费是多少？", "研究生学费是多少？"])
    shown = render(
        answer(core, Strategy.CLARIFY, (Option("a", "本科生学费是多少？"), Option("b", "研究生学费是多少？"))),
        MAX_BYTES,
    )
    assert shown.count("1.") == 1 and shown.count("2.") == 1 and CLARIFY_TAIL not in shown
    offer = read_offer(shown)
    assert offer is not None, shown
    assert shown.endswith(PICK_HINT) and offer.questions == ("本科生学费是多少？", "研究生学费是多少？")


def test_did_you_mean_suggestions_are_renumbered_so_a_number_picks_one():
    text = f"没有找到答案。\n\n{DID_YOU_MEAN}\n- 甲？\n- 乙？"
    shown = render(answer(text, Strategy.LAST_RESORT, (Option("a", "甲？"), Option("b", "乙？"))), MAX_BYTES)
    assert "- 甲？" not in shown and "1. 甲？" in shown and "2. 乙？" in shown
    offer = read_offer(shown)
    assert offer is not None and offer.questions == ("甲？", "乙？")
    one = render(
        answer(f"没有找到答案。\n\n{DID_YOU_MEAN}\n- 甲？", Strategy.LAST_RESORT, (Option("a", "甲？"),)), MAX_BYTES
    )
    offer = read_offer(one)
    assert offer is not None and offer.kind == "confirm"


def test_sources_are_listed_only_when_asked_and_only_under_answers():
    entry = Entry(id="faq:a", query="怎么连接校园网？", document="...")
    hit = Hit(entry=entry, relevance=0.9, score=9.0, searcher="sparse")
    answered = Answer(question="q", text="连接 SYSU-WiFi。", strategy=Strategy.VERBATIM, mode="sparse", hits=[hit])
    assert render(answered, MAX_BYTES, show_sources=True).endswith("来源 / Sources:\n- 怎么连接校园网？")
    assert "来源" not in render(answered, MAX_BYTES)
    handed = Answer(question="q", text="转人工", strategy=Strategy.HANDOFF, mode="sparse", hits=[hit])
    assert "来源" not in render(handed, MAX_BYTES, show_sources=True)


def test_long_answers_fit_in_one_text_message():
    cut = fit("汉" * 2000, MAX_BYTES)
    assert len(cut.encode()) <= MAX_BYTES and cut.endswith("cut short）")
    assert fit("short", MAX_BYTES) == "short"


def test_histories_expire_are_bounded_and_per_user():
    now = [0.0]
    memory = Histories(size=4, ttl=60, max_users=2, clock=lambda: now[0])
    memory.add("a", "q1", "r1")
    memory.add("a", "q2", "r2")
    memory.add("a", "q3", "r3")
    assert [m["content"] for m in memory.get("a")] == ["q2", "r2", "q3", "r3"] and memory.get("b") == []
    memory.add("b", "x", "y")
    memory.add("c", "x", "y")  # a third user: the least recently active ("a") is dropped
    assert memory.get("a") == [] and len(memory) == 2
    now[0] = 61.0
    assert memory.get("b") == []


def test_seen_takes_a_key_once_within_its_ttl():
    now = [0.0]
    seen = Seen(ttl=10, clock=lambda: now[0])
    assert seen.first("id:1") and not seen.first("id:1") and seen.first("id:2")
    now[0] = 11.0
    assert seen.first("id:1")


def test_a_token_is_kept_until_shortly_before_it_expires_and_fetched_again_when_refused():
    now, fetched = [0.0], []

    def fetch(http: httpx.Client) -> tuple[str, float]:
        fetched.append(now[0])
        return f"t-{len(fetched)}", 7200.0

    tokens = TokenCache(fetch, clock=lambda: now[0])
    with httpx.Client() as http:  # the fetch above makes no request
        assert tokens.get(http) == "t-1" and tokens.get(http) == "t-1"
        now[0] = 7200.0 - 301  # five minutes and a second before it expires: still the cached one
        assert tokens.get(http) == "t-1"
        now[0] = 7200.0 - 299
        assert tokens.get(http) == "t-2"
        assert tokens.get(http, fresh=True) == "t-3" and "t-3" not in repr(tokens)
    assert fetched == [0.0, 6901.0, 6901.0]


def test_events_taken_are_remembered_across_a_restart_and_forgotten_after_their_time(tmp_path):
    now = [1_700_000_000.0]
    path = tmp_path / "feishu" / "events.sqlite"
    first = SeenFile(path, 3600, "Feishu", clock=lambda: now[0])
    assert first.first("ev-1") and not first.first("ev-1") and first.first("ev-2")
    first.close()
    again = SeenFile(path, 3600, "Feishu", clock=lambda: now[0])  # a new process: only the file knows
    assert not again.first("ev-1")
    now[0] += 3601
    assert again.first("ev-1") and not again.first("ev-1")
    again.first("ev:lisi:1:enter_agent")  # a WeCom event key names its member: the file keeps keys hashed
    assert b"lisi" not in path.read_bytes() and b"ev-1" not in path.read_bytes()


def test_a_state_folder_that_cannot_be_written_keeps_the_events_in_memory_and_says_so(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    seen = SeenFile(blocker / "events.sqlite", 3600, "Feishu")
    with caplog.at_level(logging.ERROR, logger="bot.api.im"):
        assert seen.first("ev-1") and not seen.first("ev-1")
    assert "kept in memory meanwhile" in caplog.text


def test_a_conversations_turns_run_in_order_while_other_conversations_go_ahead():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from bot.api.im.order import InOrder

    done: list[str] = []
    slow_started, release = threading.Event(), threading.Event()

    def slow() -> None:
        slow_started.set()
        release.wait(10)
        done.append("a1")

    with ThreadPoolExecutor(max_workers=3) as pool:
        order = InOrder(pool)
        first = order.submit("a", slow)
        assert slow_started.wait(10)
        second = order.submit("a", lambda: done.append("a2"))
        other = order.submit("b", lambda: done.append("b1"))
        other.result(10)  # another conversation is not held up
        assert done == ["b1"] and not second.done()  # the same conversation's next turn waits for the first
        release.set()
        second.result(10)
    assert first.done() and done == ["b1", "a1", "a2"]
