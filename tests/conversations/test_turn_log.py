"""The conversation log: turns stored and read back, feedback, the unanswered inbox, hit counts, retention, load."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from bot.chat.answer import Strategy
from bot.chat.recorder import row_of
from bot.config.variants import replace
from bot.conversations.inbox import group_turns, normalise, similar_pairs
from bot.conversations.turn_log import TurnLog, TurnLogError, turn_log_from_settings
from bot.ui.inbox_tab import groups_html
from tests.support.answers import CANTEEN, LIBRARY, answered, hit, missed

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def turn_log(tmp_path):
    tl = TurnLog(tmp_path / "log" / "turns.sqlite", retention_days=90, retention_rows=100_000, clock=lambda: T0)
    yield tl
    tl.close()


def test_a_turn_is_stored_with_every_field(turn_log):
    answer = answered(rewritten="图书馆几点开门", hypothetical=None, notices=("note",))
    turn_id = turn_log.record(row_of(answer), "sess-1", "kbbot-sparse", source="api")
    t = turn_log.get(turn_id)
    assert t["id"] == turn_id and t["time"] == "2025-03-01T08:00:00.000000+00:00"
    assert (t["session"], t["client"], t["source"]) == ("sess-1", "kbbot-sparse", "api")
    assert (t["question"], t["rewritten"], t["strategy"], t["mode"]) == (
        "图书馆几点开门？",
        "图书馆几点开门",
        "direct",
        "sparse",
    )
    assert t["hits"] == [
        {
            "id": "faq:library",
            "query": "图书馆开放时间",
            "relevance": 0.8,
            "score": 8.0,
            "searcher": "tantivy",
            "passed": True,
            "used": True,
        },
        {
            "id": "faq:canteen",
            "query": "食堂在哪里？",
            "relevance": 0.3,
            "score": 3.0,
            "searcher": "tantivy",
            "passed": False,
            "used": False,
        },
    ]
    assert t["thresholds"] == {
        "system": "sparse",
        "answer": 0.5,
        "direct": 0.9,
        "clarify": None,
        "confirm": None,
        "unsure": None,
        "stand_in": None,
        "settle": None,
        "settle_dense": None,
        "translated": 0.0,
        "contrast": False,
        "together": None,
    }
    assert t["timings"] == {"retrieve": 3.5, "llm": 120.0, "total": 130.25} and t["latency_ms"] == 130.25
    assert (t["llm"], t["llm_used"], t["answer"], t["notices"], t["finished"]) == (
        "local-test",
        True,
        "八点到十点。",
        ["note"],
        True,
    )
    assert t["rating"] is None and t["reason"] is None
    assert turn_log.recent() == [t]


def test_nothing_secret_is_in_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-should-not-leak")
    tl = TurnLog(tmp_path / "t.sqlite")
    tl.record(row_of(answered()), "opaque")
    tl.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"sk-secret" not in blob


def test_recent_pages_and_filters(turn_log):
    ids = [
        turn_log.record(row_of(answered(f"问题{i}")), f"s{i % 2}", source="web", now=T0 + timedelta(minutes=i))
        for i in range(6)
    ]
    assert [t["id"] for t in turn_log.recent(limit=2)] == ids[:-3:-1]
    assert [t["id"] for t in turn_log.recent(limit=2, offset=2)] == [ids[3], ids[2]]
    assert [t["id"] for t in turn_log.recent(filters={"session": "s1"})] == [ids[5], ids[3], ids[1]]
    assert [t["id"] for t in turn_log.recent(filters={"since": T0 + timedelta(minutes=4), "text": "问题"})] == [
        ids[5],
        ids[4],
    ]
    assert turn_log.recent(filters={"source": "api"}) == []
    with pytest.raises(ValueError, match="unknown filter"):
        turn_log.recent(filters={"password": "x"})


def test_feedback_latest_wins_and_a_thumbs_down_is_unanswered(turn_log):
    turn_id = turn_log.record(row_of(answered("食堂几点关门")), "s")
    assert turn_log.unanswered() == []
    turn_log.feedback(turn_id, +1)
    turn_log.feedback(turn_id, -1, "  时间不对  ")
    t = turn_log.get(turn_id)
    assert (t["rating"], t["reason"]) == (-1, "时间不对") and t["rated_at"]
    [group] = turn_log.unanswered()
    assert (group.question, group.count, group.thumbs_down, group.reasons) == ("食堂几点关门", 1, 1, ("时间不对",))
    assert [c["id"] for c in group.candidates] == ["faq:canteen"]  # the hit below the threshold
    with pytest.raises(TurnLogError, match="no turn 999"):
        turn_log.feedback(999, -1)
    with pytest.raises(ValueError):
        turn_log.feedback(turn_id, 5)


def test_a_thumbs_down_names_only_the_entry_that_answered_not_the_others_listed(turn_log):
    listed = [hit(LIBRARY, 0.8), hit(CANTEEN, 0.7)]  # the second shown under "other related entries"
    turn_id = turn_log.record(row_of(answered("图书馆周末开吗", hits=listed, candidates=listed)), "s")
    turn_log.feedback(turn_id, -1)
    [group] = turn_log.unanswered()
    assert [a["id"] for a in group.answered] == ["faq:library"]
    shown = groups_html([group])  # the inbox row: one entry marked answered, the other not named at all
    assert shown.count("(答的 / answered)") == 1 and "faq:canteen" not in shown


def test_near_duplicates_are_one_group_with_the_candidates_that_almost_passed(turn_log):
    for i, q in enumerate(
        ["图书馆几点开门？", "图书馆几点开门", "图书馆 几点开门!", "图书馆几点开门呀", "ＷＨＥＲＥ is the canteen?"]
    ):
        turn_log.record(row_of(missed(q, near=0.40 + i / 100)), f"s{i}", now=T0 + timedelta(minutes=i))
    turn_log.record(
        row_of(answered(strategy=Strategy.HYDE, question="食堂有清真窗口吗")),
        "s9",
        now=T0 + timedelta(minutes=9),
    )
    groups = turn_log.unanswered()
    assert [g.count for g in groups] == [1, 1, 4]  # newest first
    library = groups[-1]
    assert library.key == "图书馆几点开门" and library.question == "图书馆 几点开门!"
    assert library.strategies == {"last_resort": 4}
    best = library.candidates[0]
    assert (best["id"], best["relevance"], best["threshold"], best["seen"]) == ("faq:library", 0.43, 0.5, 4)
    assert groups[1].key == "whereisthecanteen"
    assert [g.count for g in turn_log.unanswered(sort="count")] == [4, 1, 1]
    assert library.to_dict()["count"] == 4


def test_normalise_and_the_similarity_join():
    assert normalise("图书馆 几点开门！") == normalise("图书馆几点开门?") == "图书馆几点开门"
    assert normalise("ＡＢＣ，def") == "abcdef" and normalise("？？") == "??"
    assert normalise("圖書館幾點開門？") == "图书馆几点开门"  # one group whichever script the visitor types
    norms = ["图书馆几点开门", "图书馆几点开门呀", "食堂几点开门", "a", "a"]
    assert sorted(similar_pairs(norms)) == [(0, 1), (3, 4)]
    # Same result as comparing every pair, on a few thousand generated questions.
    import random

    from bot.conversations.inbox import bigrams, jaccard

    rng = random.Random(7)
    words = "图书馆食堂几点开门在哪里怎么去宿舍教室考试成绩报名"
    qs = list({"".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(600)})
    brute = {
        (i, j) for i in range(len(qs)) for j in range(i + 1, len(qs)) if jaccard(bigrams(qs[i]), bigrams(qs[j])) >= 0.8
    }
    assert {tuple(sorted(p)) for p in similar_pairs(qs)} == brute
    t = time.perf_counter()
    many = [f"问题{i}号怎么办理" for i in range(5000)]
    group_turns([])
    similar_pairs(many)
    assert time.perf_counter() - t < 5


def test_dismissal_hides_a_group_until_it_is_asked_again(turn_log):
    for i, q in enumerate(["图书馆几点开门？", "图书馆几点开门呀"]):
        turn_log.record(row_of(missed(q)), "s", now=T0 + timedelta(minutes=i))
    turn_log.record(row_of(missed("怎么报名考试")), "s", now=T0 + timedelta(minutes=2))
    [_, library] = turn_log.unanswered()
    assert turn_log.dismiss(library.key, now=T0 + timedelta(minutes=5)) == 2
    assert [g.key for g in turn_log.unanswered()] == ["怎么报名考试"]
    turn_log.record(row_of(missed("图书馆几点开门呀！")), "s", now=T0 + timedelta(minutes=6))
    [again, _] = turn_log.unanswered()
    assert (again.key, again.count) == ("图书馆几点开门呀", 1)  # only the asks since the dismissal


def test_hit_counts_count_only_entries_the_answer_used(turn_log):
    turn_log.record(row_of(answered()), "s", now=T0)
    turn_log.record(row_of(answered()), "s", now=T0 + timedelta(hours=1))
    turn_log.record(row_of(missed("什么都没有")), "s", now=T0 + timedelta(hours=2))
    assert turn_log.hit_counts() == {"faq:library": (2, "2025-03-01T09:00:00.000000+00:00")}


def test_retention_by_rows(tmp_path):
    tl = TurnLog(tmp_path / "t.sqlite", retention_days=0, retention_rows=5, prune_every=3, clock=lambda: T0)
    ids = [tl.record(row_of(answered()), "s") for _ in range(12)]
    assert tl.count() <= 5 + 3 and tl.prune() >= 0 and tl.count() == 5
    assert [t["id"] for t in tl.recent()] == ids[:-6:-1]
    assert tl.hit_counts()["faq:library"][0] == 5  # the used-entry rows went with their turns
    with pytest.raises(TurnLogError):
        tl.feedback(ids[0], 1)
    tl.close()


def test_retention_by_days_on_open_and_on_prune(tmp_path):
    path = tmp_path / "t.sqlite"
    tl = TurnLog(path, retention_days=30, retention_rows=0, clock=lambda: T0)
    old = tl.record(row_of(answered()), "s", now=T0 - timedelta(days=31))
    kept = tl.record(row_of(answered()), "s", now=T0 - timedelta(days=29))
    assert tl.prune() == 1 and [t["id"] for t in tl.recent()] == [kept]
    tl.record(row_of(answered()), "s", now=T0 - timedelta(days=40))
    tl.close()
    reopened = TurnLog(path, retention_days=30, retention_rows=0, clock=lambda: T0)
    assert [t["id"] for t in reopened.recent()] == [kept]
    with pytest.raises(TurnLogError):
        reopened.get(old)
    later = TurnLog(path, retention_days=30, retention_rows=0, clock=lambda: T0 + timedelta(days=2))
    assert later.count() == 0
    reopened.close()
    later.close()


def test_purged_questions_leave_no_trace_in_the_file_its_wal_dismissals_or_rejections(tmp_path):
    path = tmp_path / "t.sqlite"
    tl = TurnLog(path, retention_days=30, retention_rows=0, clock=lambda: T0)
    secret = "紫色大象住在哪栋宿舍"
    tl.record(row_of(missed(secret + "？")), "s", now=T0 - timedelta(days=31))
    tl.record(row_of(missed("图书馆几点开门？")), "s", now=T0)
    assert tl.dismiss(secret) == 1
    tl.reject_suggestion(normalise(secret), "faq:library")
    assert secret.encode() in path.read_bytes() + path.with_name("t.sqlite-wal").read_bytes()
    assert tl.prune() == 1
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("t.sqlite"))
    assert secret.encode() not in on_disk and "紫色".encode() not in on_disk
    assert tl.rejected_suggestions() == set() and tl.count() == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM dismissals").fetchone() == (0,)
    tl.close()


def test_a_file_that_is_not_sqlite_is_moved_aside(tmp_path, caplog):
    path = tmp_path / "log" / "turns.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database, just some text " * 100)
    with caplog.at_level("WARNING"):
        tl = TurnLog(path)
    assert tl.moved_aside is not None and tl.moved_aside.read_bytes().startswith(b"this is not a database")
    assert "moved it to" in caplog.text
    assert tl.get(tl.record(row_of(answered()), "s"))["question"] == "图书馆几点开门？"
    tl.close()


def test_a_path_that_cannot_be_a_database_is_a_clear_error(tmp_path):
    (tmp_path / "turns.sqlite").mkdir()
    with pytest.raises(TurnLogError, match="cannot open conversation log"):
        TurnLog(tmp_path / "turns.sqlite")


def test_a_newer_schema_is_a_clear_error(tmp_path):
    path = tmp_path / "t.sqlite"
    TurnLog(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(TurnLogError, match="schema version 99"):
        TurnLog(path)


def test_built_from_settings_under_state_dir(settings):
    tl = turn_log_from_settings(settings)
    assert isinstance(tl, TurnLog)
    assert tl.path == settings.resolve(settings.state_dir) / "log" / "turns.sqlite" and tl.path.exists()
    assert (tl.retention_days, tl.retention_rows) == (90, 100_000)
    tl.close()
    settings = replace(settings, "log.enabled", False)
    assert turn_log_from_settings(settings) is None


def hammer(logs: list[TurnLog], threads: int, seconds: float) -> tuple[list[int], list[Exception]]:
    """``threads`` writers recording (and now and then rating) turns for ``seconds``; the ids and the errors."""
    ids: list[int] = []
    errors: list[Exception] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def writer(n: int) -> None:
        turn_log, i = logs[n % len(logs)], 0
        while time.monotonic() < stop:
            try:
                turn_id = turn_log.record(row_of(answered(f"线程{n}问题{i}")), f"session-{n}", source="web")
                if i % 10 == 0:
                    turn_log.feedback(turn_id, -1, "load")
                with lock:
                    ids.append(turn_id)
            except Exception as exc:
                with lock:
                    errors.append(exc)
            i += 1

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return ids, errors


def check_load(tmp_path, seconds: float) -> None:
    """20 threads over two TurnLogs on one file (two instances contend through SQLite's locks, like two processes)."""
    logs = [TurnLog(tmp_path / "load.sqlite", retention_days=0, retention_rows=0) for _ in range(2)]
    ids, errors = hammer(logs, 20, seconds)
    assert not errors, errors[:3]
    assert len(ids) == len(set(ids)) > 20
    other = TurnLog(tmp_path / "load.sqlite", retention_days=0, retention_rows=0)  # as another process would
    assert other.count() == len(ids)
    assert {t["id"] for t in other.recent(limit=len(ids))} == set(ids)
    for tl in [*logs, other]:
        tl.close()


def test_concurrent_writers_lose_nothing(tmp_path):
    check_load(tmp_path, 3.0)


@pytest.mark.slow
@pytest.mark.skipif(
    "KBBOT_LOG_LOAD_SECONDS" not in os.environ,
    reason="set KBBOT_LOG_LOAD_SECONDS=60 to soak the log's writers for a minute (the default run's is 3 s, above)",
)
def test_concurrent_writers_lose_nothing_for_a_minute(tmp_path):
    check_load(tmp_path, float(os.environ["KBBOT_LOG_LOAD_SECONDS"]))
