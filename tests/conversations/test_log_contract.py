"""The conversation log's contract, held by both backends: every test runs on SQLite (a temp file) and on a real
PostgreSQL server (a fresh schema), through the ``open_log`` fixture; the analytics give the same numbers on both."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.chat.recorder import row_of
from bot.config.settings import PrivacySettings
from bot.conversations.analytics import Analytics
from bot.conversations.log_store import TurnLogError
from bot.conversations.pg_log import PgTurnLog
from bot.conversations.privacy import PrivacyPolicy
from bot.conversations.suggestions import suggestions
from bot.conversations.tiles import StatsFilter
from bot.conversations.turn_log import TurnLog
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from tests.support.answers import CANTEEN, LIBRARY, answered, hit, missed

pytestmark = pytest.mark.contract

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
MASK = PrivacyPolicy.from_settings(PrivacySettings()).stored.mask  # the default kinds, as config.yaml has them


def test_a_turn_reads_back_with_every_field(open_log):
    log = open_log(clock=lambda: T0)
    turn_id = log.record(
        row_of(answered(rewritten="图书馆几点开门", notices=("note",))), "sess-1", "kbbot", source="api"
    )
    t = log.get(turn_id)
    assert t["time"] == "2025-03-01T08:00:00.000000+00:00" and (t["session"], t["client"], t["source"]) == (
        "sess-1",
        "kbbot",
        "api",
    )
    assert (t["question"], t["rewritten"], t["norm"], t["strategy"]) == (
        "图书馆几点开门？",
        "图书馆几点开门",
        "图书馆几点开门",
        "direct",
    )
    assert [(h["id"], h["relevance"], h["used"], h["passed"]) for h in t["hits"]] == [
        ("faq:library", 0.8, True, True),
        ("faq:canteen", 0.3, False, False),
    ]
    assert t["thresholds"]["answer"] == 0.5 and t["timings"]["total"] == 130.25 and t["latency_ms"] == 130.25
    assert (t["llm_used"], t["finished"], t["notices"], t["top_relevance"], t["rating"]) == (
        True,
        True,
        ["note"],
        0.8,
        None,
    )
    assert log.count() == 1
    with pytest.raises(TurnLogError, match="no turn 999"):
        log.get(999)


def test_feedback_latest_wins_and_unknown_turns_are_refused(open_log):
    log = open_log(clock=lambda: T0)
    turn_id = log.record(row_of(answered()), "s")
    log.feedback(turn_id, 1)
    log.feedback(turn_id, -1, "  答非所问  ")
    t = log.get(turn_id)
    assert (t["rating"], t["reason"], t["rated_at"]) == (-1, "答非所问", "2025-03-01T08:00:00.000000+00:00")
    with pytest.raises(TurnLogError, match="no turn 4242"):
        log.feedback(4242, 1)
    with pytest.raises(ValueError, match="rating must be"):
        log.feedback(turn_id, 5)


def test_recent_filters_page_and_order(open_log):
    log = open_log(clock=lambda: T0)
    ids = [
        log.record(
            row_of(answered(f"图书馆问题{i}")), f"s{i % 2}", source=("web", "api")[i % 2], now=T0 + timedelta(hours=i)
        )
        for i in range(6)
    ]
    ids.append(log.record(row_of(missed("食堂开门吗")), "s9", source="web", now=T0 + timedelta(hours=7)))
    log.feedback(ids[2], -1)
    assert [t["id"] for t in log.recent()] == ids[::-1]
    assert [t["id"] for t in log.recent(limit=2, offset=1)] == [ids[5], ids[4]]
    assert [t["id"] for t in log.recent(filters={"session": "s1"})] == [ids[5], ids[3], ids[1]]
    assert [t["id"] for t in log.recent(filters={"source": "web", "strategy": "direct"})] == [ids[4], ids[2], ids[0]]
    assert [t["id"] for t in log.recent(filters={"rating": -1})] == [ids[2]]
    since, until = T0 + timedelta(hours=2), T0 + timedelta(hours=4)
    assert [t["id"] for t in log.recent(filters={"since": since, "until": until})] == [ids[3], ids[2]]
    assert [t["id"] for t in log.recent(filters={"text": "问题3"})] == [ids[3]]
    assert [t["id"] for t in log.recent(filters={"text": "食堂", "mode": "sparse"})] == [ids[6]]
    assert log.recent(filters={"text": None}) == log.recent()
    with pytest.raises(ValueError, match="unknown filter"):
        log.recent(filters={"password": "x"})


def test_unanswered_groups_near_duplicates_and_dismiss_hides_until_asked_again(open_log):
    log = open_log(clock=lambda: T0)
    for i, q in enumerate(["图书馆几点开门？", "图书馆几点开门", "图书馆 几点开门!", "食堂在哪"]):
        log.record(row_of(missed(q)), "s", now=T0 + timedelta(minutes=i))
    thumbs_down = log.record(row_of(answered("怎么借书")), "s", now=T0 + timedelta(minutes=9))
    log.feedback(thumbs_down, -1, "wrong")
    groups = log.unanswered(sort="count")
    assert [(g.key, g.count) for g in groups] == [("图书馆几点开门", 3), ("怎么借书", 1), ("食堂在哪", 1)]
    assert groups[0].candidates[0]["id"] == "faq:library" and groups[1].answered == (
        {"id": "faq:library", "query": "图书馆开放时间"},
    )
    assert groups[1].reasons == ("wrong",) and groups[1].thumbs_down == 1
    assert log.dismiss("图书馆几点开门？", now=T0 + timedelta(hours=1)) == 3
    assert [g.key for g in log.unanswered()] == ["怎么借书", "食堂在哪"]
    log.record(row_of(missed("图书馆几点开门")), "s", now=T0 + timedelta(hours=2))
    assert [(g.key, g.count) for g in log.unanswered(limit=1)] == [("图书馆几点开门", 1)]
    assert [g.key for g in log.unanswered(filters={"until": T0 + timedelta(minutes=5)})] == ["食堂在哪"]


def test_retention_by_age_and_by_rows_keeps_counts_in_step(open_log):
    log = open_log(retention_days=30, retention_rows=3, prune_on_open=False, clock=lambda: T0)
    assert log.last_purge() is None
    for days in (40, 35, 3, 2, 1, 0):
        log.record(row_of(answered()), "s", now=T0 - timedelta(days=days))
    assert log.prune(now=T0) == 3 and log.count() == 3  # two by age, one beyond the newest three
    assert log.last_purge().removed == 3 and log.last_purge().time == "2025-03-01T08:00:00.000000+00:00"
    assert log.hit_counts()["faq:library"][0] == 3
    per_day = Analytics(log, top=5, sample=100).compute(now=T0).tile("per_day").rows
    assert sum(n for _, n in per_day) == 3


def test_prune_runs_every_n_records(open_log):
    log = open_log(retention_days=0, retention_rows=2, prune_every=3, prune_on_open=False, clock=lambda: T0)
    for _ in range(3):
        log.record(row_of(answered()), "s")
    assert log.count() == 2 and log.last_purge().removed == 1


def test_personal_data_is_masked_before_it_is_stored(open_log):
    mask = MASK
    log = open_log(mask=mask, clock=lambda: T0)
    turn_id = log.record(row_of(answered("我的手机 13812345678 借书")), "s")
    log.feedback(turn_id, -1, "发到 a.b@example.com")
    t = log.get(turn_id)
    assert "13812345678" not in t["question"] and "[mobile]" in t["question"] and t["reason"] == "发到 [email]"
    assert log.masking and log.recent(filters={"text": "13812345678"}) == []


def test_mask_stored_masks_older_turns(open_log):
    plain = open_log(clock=lambda: T0)
    plain.record(row_of(answered("身份证 110101199003071234 丢了")), "s")
    plain.record(row_of(answered("没有个人信息")), "s")
    plain.close()
    masked = open_log(mask=MASK, clock=lambda: T0)
    assert masked.mask_stored() == 1
    assert [t["question"] for t in masked.recent()] == ["没有个人信息", "身份证 [id_card] 丢了"]


def test_suggestions_read_conversations_and_rejections_stick(open_log):
    log = open_log(clock=lambda: T0)
    offer = Answer(
        question="开馆时间", text="您是想问？", strategy=Strategy.CLARIFY, mode="sparse", candidates=[hit(LIBRARY, 0.6)]
    )
    log.record(row_of(offer), "conv", now=T0)
    log.record(row_of(answered("图书馆开放时间", strategy=Strategy.CHOSEN)), "conv", now=T0 + timedelta(seconds=5))
    log.record(row_of(answered("无会话")), None)
    assert [t["question"] for t in log.session_turns()] == ["开馆时间", "图书馆开放时间"]
    found = suggestions(log, [LIBRARY, CANTEEN])
    assert [(s.entry_id, s.question, s.via) for s in found] == [("faq:library", "开馆时间", ("clarify",))]
    log.reject_suggestion(found[0].norm, "faq:library")
    log.reject_suggestion(found[0].norm, "faq:library")  # twice: still one row
    assert log.rejected_suggestions() == {("开馆时间", "faq:library")} and suggestions(log, [LIBRARY]) == []


def test_hit_counts_count_used_entries_only(open_log):
    log = open_log(clock=lambda: T0)
    log.record(row_of(answered()), "s", now=T0)
    log.record(row_of(answered()), "s", now=T0 + timedelta(days=1))
    log.record(row_of(missed("x")), "s")
    assert log.hit_counts() == {"faq:library": (2, "2025-03-02T08:00:00.000000+00:00")}


def test_concurrent_writers_lose_no_turn(open_log):
    log = open_log(retention_days=0, retention_rows=0)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(15):
                turn_id = log.record(row_of(answered(f"问题{n}-{i}")), f"s{n}")
                log.feedback(turn_id, 1 if i % 2 else -1)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and log.count() == 90
    feedback = Analytics(log, top=5, sample=100).compute().tile("feedback").rows
    assert feedback == ((90, 90, 42, 48, round(42 / 90, 4), round(48 / 90, 4)),)


def seeded_turns(log) -> None:
    """70 turns over 20 days, varied in every column the tiles read (time, source, mode, strategy, rating, hits)."""
    now = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
    strategies = ["direct", "verbatim", "rewrite", "hyde", "last_resort", "direct", "refused"]
    for i in range(70):
        strategy = strategies[i % len(strategies)]
        entry = Entry(("faq:a", "faq:b", "faq:c")[i % 3], f"问题{i % 6}", "d")
        hits = [] if strategy == "refused" else [Hit(entry, round((i % 20) / 20 + 0.01, 2), 1.0, "sparse")]
        used = strategy in ("direct", "verbatim", "rewrite")
        answer = Answer(
            question="热门问题" if i % 9 == 0 else f"问题{i % 6}",
            text="答",
            strategy=Strategy(strategy),
            mode=("sparse", "hybrid")[i % 2],
            hits=hits if used else [],
            candidates=[] if used else hits,
            thresholds=Cutoffs("sparse", 0.5, 0.9),
            timings={"retrieve": float(i % 10 + 1), "total": float(100 + i)},
        )
        when = now - timedelta(days=i // 4, hours=i % 5, minutes=7 * i)
        turn_id = log.record(row_of(answer), "s", source=("web", "api", "cli")[i % 3], now=when)
        if i % 4 < 2:
            log.feedback(turn_id, (1, -1)[i % 4])


FILTERS = [
    StatsFilter(),
    StatsFilter(since=datetime(2026, 11, 10, 5, 17, tzinfo=UTC), until=datetime(2026, 11, 19, 3, 2, tzinfo=UTC)),
    StatsFilter(mode="hybrid", source="web"),
    StatsFilter(since=datetime(2026, 11, 14, tzinfo=UTC), source="api"),
]


@pytest.mark.parametrize("flt", FILTERS, ids=["all", "partial-days", "mode-source", "since-source"])
def test_analytics_give_the_same_numbers_on_both_backends(tmp_path, pg_dsn, flt):
    sqlite_log = TurnLog(tmp_path / "turns.sqlite", retention_days=0, retention_rows=0)
    pg_log = PgTurnLog(pg_dsn, retention_days=0, retention_rows=0)
    try:
        for log in (sqlite_log, pg_log):
            seeded_turns(log)
        now = datetime(2026, 11, 20, 13, tzinfo=UTC)
        entries = ["faq:a", "faq:b", "faq:c", "faq:never"]
        on_sqlite = Analytics(sqlite_log, top=10, sample=1000).compute(flt, entries, now=now).to_dict()
        on_pg = Analytics(pg_log, top=10, sample=1000).compute(flt, entries, now=now).to_dict()
        assert on_pg == on_sqlite
        assert sum(n for _, n in on_pg["per_day"]["rows"]) > 0 and on_pg["trending"]["rows"]  # not two empty pages
    finally:
        sqlite_log.close()
        pg_log.close()
