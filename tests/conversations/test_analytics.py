"""The analytics tiles against counts made independently (by hand, or from the seeded turns in plain Python), the
filters, the schema migration, ``python -m bot log stats --json``, concurrent writers, and the admin-only tab."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.chat.recorder import row_of
from bot.config.settings import load_settings
from bot.conversations.analytics import Analytics
from bot.conversations.log_store import ConversationLog
from bot.conversations.tiles import StatsFilter
from bot.conversations.turn_log import SCHEMA_VERSION, TurnLog, turn_log_from_settings
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from tests.support.knowledge import ROOT, config_dict
from tests.support.serving import call_event as call
from tests.support.serving import login

pytestmark = pytest.mark.e2e

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
ENTRIES = ["faq:a", "faq:b", "faq:c", "faq:never"]
STRATS = ["direct", "verbatim", "rewrite", "hyde", "last_resort", "direct", "refused"]


@dataclass(frozen=True)
class Seed:
    """One seeded turn, as the independent counts read it."""

    time: datetime
    question: str
    source: str
    mode: str
    strategy: str
    rating: int | None
    relevance: float | None
    used: str | None
    retrieve: float
    total: float


def seeds() -> list[Seed]:
    """60 turns over 20 days (some in the last 7, some in the 7 before), varied in every column the tiles read."""
    out = []
    for i in range(60):
        strategy = STRATS[i % len(STRATS)]
        rel = None if strategy == "refused" else round((i % 20) / 20 + 0.01, 2)
        used = ENTRIES[i % 3] if strategy in ("direct", "verbatim", "rewrite") else None
        out.append(
            Seed(
                time=NOW - timedelta(days=i // 3, hours=i % 5, minutes=7 * i),
                question="怎么添加知识" if i % 4 == 0 else f"问题{i % 6}",
                source=("web", "api", "cli")[i % 3],
                mode=("sparse", "hybrid")[i % 2],
                strategy=strategy,
                rating=(1, -1, None, None)[i % 4],
                relevance=rel,
                used=used,
                retrieve=float(i % 10 + 1),
                total=float(100 + i),
            )
        )
    # "热门问题" rises: 3 times in the last 7 days, once in the 7 before.
    for days in (1, 2, 3, 9):
        out.append(Seed(NOW - timedelta(days=days), "热门问题", "web", "sparse", "direct", None, 0.9, "faq:a", 1, 50))
    return out


def answer_of(seed: Seed) -> Answer:
    hits = []
    if seed.relevance is not None:
        entry = Entry(id=seed.used or "faq:b", query=seed.question, document="d")
        hits = [Hit(entry=entry, relevance=seed.relevance, score=1.0, searcher="sparse")]
    return Answer(
        question=seed.question,
        text="答",
        strategy=Strategy(seed.strategy),
        mode=seed.mode,
        hits=hits if seed.used else [],
        candidates=[] if seed.used else hits,
        thresholds=Cutoffs("sparse", 0.5, 0.9),
        timings={"retrieve": seed.retrieve, "total": seed.total},
    )


def record(turn_log: ConversationLog, seed: Seed) -> None:
    turn_id = turn_log.record(row_of(answer_of(seed)), "s", source=seed.source, now=seed.time)
    if seed.rating is not None:
        turn_log.feedback(turn_id, seed.rating)


@pytest.fixture
def seeded(tmp_path) -> Iterator[TurnLog]:
    turn_log = TurnLog(tmp_path / "log.sqlite", retention_days=0, retention_rows=0, clock=lambda: NOW)
    for seed in seeds():
        record(turn_log, seed)
    yield turn_log
    turn_log.close()


def expected(flt: StatsFilter, turns: list[Seed]) -> dict:
    """Every tile's rows, counted in plain Python from the seeds (not through any SQL of the module)."""
    sel = [
        s
        for s in turns
        if (flt.since is None or s.time >= flt.since)
        and (flt.until is None or s.time < flt.until)
        and (flt.mode is None or s.mode == flt.mode)
        and (flt.source is None or s.source == flt.source)
    ]
    day = lambda s: s.time.strftime("%Y-%m-%d")
    days = sorted({day(s) for s in sel})
    per_day = {d: sum(day(s) == d for s in sel) for d in days}
    answered = {d: sum(day(s) == d and s.strategy not in ("hyde", "last_resort") for s in sel) for d in days}
    up, down = sum(s.rating == 1 for s in sel), sum(s.rating == -1 for s in sel)
    bins = [0] * 20
    for s in sel:
        if s.relevance is not None:
            bins[min(int(s.relevance * 20), 19)] += 1
    hit_days: dict[tuple[str, str], int] = {}
    for s in sel:
        if s.used:
            hit_days[day(s), s.used] = hit_days.get((day(s), s.used), 0) + 1
    return {
        "per_day": [(d, per_day[d]) for d in days],
        "answer_rate": [(d, per_day[d], answered[d], round(answered[d] / per_day[d], 4)) for d in days],
        "per_hour": [(h, sum(s.time.hour == h for s in sel)) for h in range(24)],
        "decisions": {st: sum(s.strategy == st for s in sel) for st in {s.strategy for s in sel}},
        "feedback": (len(sel), up + down, up, down),
        "relevance": bins,
        "entry_hits": sorted((d, e, n) for (d, e), n in hit_days.items()),
        "never_hit": sorted(set(ENTRIES) - {s.used for s in sel if s.used}),
        "turn_p50": sorted(s.total for s in sel)[(len(sel) + 1) // 2 - 1] if sel else None,
    }


FILTERS = [
    StatsFilter(),
    StatsFilter(mode="hybrid"),
    StatsFilter(source="cli"),
    StatsFilter(since=NOW - timedelta(days=5, minutes=17), until=NOW - timedelta(days=1, minutes=41)),
    StatsFilter(since=NOW - timedelta(days=12), mode="sparse", source="web"),
    StatsFilter(since=NOW - timedelta(hours=3, minutes=10), until=NOW - timedelta(minutes=20)),  # within one day
]


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: f"{f.mode}-{f.source}-{bool(f.since)}-{bool(f.until)}")
def test_every_tile_equals_the_count_made_from_the_seeds(seeded, flt):
    stats = Analytics(seeded, top=50, sample=1000).compute(flt, ENTRIES)
    want = expected(flt, seeds())
    assert list(stats.tile("per_day").rows) == want["per_day"]
    assert list(stats.tile("answer_rate").rows) == want["answer_rate"]
    assert list(stats.tile("per_hour").rows) == want["per_hour"]
    assert {r[0]: r[1] for r in stats.tile("decisions").rows} == want["decisions"]
    assert stats.tile("feedback").rows[0][:4] == want["feedback"]
    assert [r[2] for r in stats.tile("relevance").rows] == want["relevance"]
    assert list(stats.tile("entry_hits").rows) == want["entry_hits"]
    assert [r[0] for r in stats.tile("never_hit").rows] == want["never_hit"]
    turn = [r for r in stats.tile("latency").rows if r[0] == "turn"]
    assert (turn[0][2] if turn else None) == want["turn_p50"]


def test_the_seeded_counts_by_hand_and_by_plain_sql(seeded):
    stats = Analytics(seeded, top=5, sample=1000).compute(StatsFilter(), ENTRIES)
    assert stats.tile("feedback").rows == ((64, 30, 15, 15, 0.5, 0.5),)  # 60 seeded + 4 trending; i % 4 in (0, 1)
    conn = sqlite3.connect(seeded.path)
    by_sql = dict(conn.execute("SELECT strategy, COUNT(*) FROM turns GROUP BY strategy").fetchall())
    assert {r[0]: r[1] for r in stats.tile("decisions").rows} == by_sql
    assert by_sql["refused"] == 8 and by_sql["direct"] == 17 + 4  # i % 7 in (0, 5) of 60, and the 4 trending
    top = conn.execute("SELECT norm, COUNT(*) FROM turns GROUP BY norm ORDER BY 2 DESC, 1 LIMIT 5").fetchall()
    assert list(stats.tile("top").rows) == top and top[0][1] == 15  # 怎么添加知识: every 4th of 60
    assert ("热门问题", 3, 1, 2) in stats.tile("trending").rows
    assert stats.tile("trending").rows[0][3] >= 2  # ranked by rise
    unanswered = Analytics(seeded, top=50, sample=1000).compute().tile("unanswered").rows  # every group
    assert (
        sum(r[1] for r in unanswered)
        == conn.execute(
            "SELECT COUNT(*) FROM turns WHERE strategy IN ('hyde', 'last_resort') OR rating = -1"
        ).fetchone()[0]
    )
    retrieve = sorted(r[0] for r in conn.execute("SELECT json_extract(timings, '$.retrieve') FROM turns"))
    stage = next(r for r in stats.tile("latency").rows if r[0] == "retrieve")
    assert stage[1:] == (64, retrieve[31], retrieve[60])  # nearest rank: 32nd and 61st of 64
    assert stats.tile("relevance").rows[10][3] == "answer" and stats.tile("relevance").rows[18][3] == "direct"


def test_filters_change_the_counts(seeded):
    a = Analytics(seeded, top=5, sample=1000)
    total = lambda flt: a.compute(flt).tile("feedback").rows[0][0]
    assert total(StatsFilter()) == 64
    assert total(StatsFilter(source="web")) == 20 + 4 and total(StatsFilter(source="cli")) == 20
    assert total(StatsFilter(mode="hybrid")) == 30
    assert total(StatsFilter(since=NOW - timedelta(days=7))) < 64
    assert total(StatsFilter(until=NOW - timedelta(days=30))) == 0


def test_feedback_changes_and_a_purge_keep_the_totals_in_step(seeded):
    a = Analytics(seeded, top=5, sample=1000)
    newest = seeded.recent(1)[0]["id"]
    seeded.feedback(newest, -1)
    seeded.feedback(newest, 1)  # the latest rating wins: counted once
    seeded.retention_days = 10
    removed = seeded.prune(NOW)
    assert removed > 0
    stats = a.compute(StatsFilter(), ENTRIES)
    conn = sqlite3.connect(seeded.path)
    n, up, down = conn.execute("SELECT COUNT(*), SUM(rating = 1), SUM(rating = -1) FROM turns").fetchone()
    assert stats.tile("feedback").rows[0][:4] == (n, up + down, up, down)
    per_day = conn.execute("SELECT substr(time, 1, 10), COUNT(*) FROM turns GROUP BY 1 ORDER BY 1").fetchall()
    assert list(stats.tile("per_day").rows) == per_day
    hits = conn.execute("SELECT COUNT(*) FROM used").fetchone()[0]
    assert sum(r[2] for r in stats.tile("entry_hits").rows) == hits


def test_a_schema_1_log_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.sqlite"
    turn_log = TurnLog(path, retention_days=0, retention_rows=0)
    for seed in seeds():
        record(turn_log, seed)
    before = Analytics(turn_log, 50, 1000).compute(StatsFilter(), ENTRIES, now=NOW)
    turn_log.close()
    conn = sqlite3.connect(path, isolation_level=None)  # back to what version 1 wrote
    for name in ("turns_stats", "turns_norm", "used_mode", "used_source"):
        conn.execute(f"DROP INDEX {name}")
    for table in ("hourly", "daily_relevance", "daily_hits"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("ALTER TABLE turns DROP COLUMN top_relevance")
    conn.execute("ALTER TABLE used DROP COLUMN source")
    conn.execute("ALTER TABLE used DROP COLUMN mode")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    migrated = TurnLog(path, retention_days=0, retention_rows=0)
    after = Analytics(migrated, 50, 1000).compute(StatsFilter(), ENTRIES, now=NOW)
    assert after == before
    assert migrated.get(1)["top_relevance"] is not None
    version = sqlite3.connect(path).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == SCHEMA_VERSION == 2
    migrated.close()


def test_no_turn_is_missing_under_concurrent_writers(tmp_path):
    turn_log = TurnLog(tmp_path / "log.sqlite", retention_days=0, retention_rows=0)
    a = Analytics(turn_log, 5, 1000)
    per_thread, threads = 40, 4
    seed = seeds()[0]

    def write(n: int) -> None:
        for i in range(per_thread):
            record(turn_log, Seed(**{**seed.__dict__, "time": NOW - timedelta(minutes=i), "source": "api"}))

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    seen = []
    while any(w.is_alive() for w in workers):
        stats = a.compute(StatsFilter())  # each read is one consistent snapshot: never more than recorded
        seen.append(stats.tile("feedback").rows[0][0])
    for w in workers:
        w.join()
    final = a.compute(StatsFilter(source="api"))
    assert final.tile("feedback").rows[0][0] == per_thread * threads == turn_log.count()
    assert sum(r[1] for r in final.tile("per_day").rows) == per_thread * threads
    assert seen == sorted(seen)  # counts only grow while writers run
    turn_log.close()


def test_log_stats_json_equals_the_core(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "faq.json").write_text(
        json.dumps({"a": {"query": "q", "document": "d"}, "never": {"query": "n", "document": "d"}}),
        encoding="utf-8",
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_dict(tmp_path, tmp_path / "kb"), allow_unicode=True), encoding="utf-8")
    settings = load_settings(config)
    turn_log = turn_log_from_settings(settings)
    assert turn_log is not None
    shift = datetime.now(UTC) - NOW  # the seeds moved to end today: within retention, so opening the log keeps them
    for seed in seeds():
        record(turn_log, Seed(**{**seed.__dict__, "time": seed.time + shift}))
    since = (NOW + shift - timedelta(days=6)).isoformat()
    flt = StatsFilter(since=datetime.fromisoformat(since), mode="sparse", source="web")
    core = Analytics(turn_log, settings.log.analytics_top, settings.log.analytics_sample).compute(
        flt, ["faq:a", "faq:never"], titles={"faq:a": "q", "faq:never": "n"}
    )
    turn_log.close()

    def cli(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "bot", "--config", str(config), "log", "stats", *args]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)

    done = cli("--json", "--since", since, "--mode", "sparse", "--source", "web")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    trending = out.pop("trending")  # its weeks end at the CLI's "now", a moment later than the core's
    topics = out.pop("topics")  # added by the CLI beside the core's tiles (bot/conversations/topics.py)
    assert topics["rows"] == [] and "Too few questions" in topics["note"]
    handoffs = [out.pop(n) for n in ("handoff_tickets", "handoff_first_reply", "handoff_per_day")]  # the desk's
    assert handoffs[0]["rows"][0][2] == 0 and handoffs[2]["rows"] == []  # no tickets in this log
    want = core.to_dict()
    want.pop("trending")
    assert out == json.loads(json.dumps(want, ensure_ascii=False))
    assert trending["columns"] == ["question", "last_7_days", "previous_7_days", "rise"]
    assert out["feedback"]["rows"][0][0] > 0 and out["never_hit"]["rows"] == [["faq:never"]]
    text = cli("--source", "cli")
    assert text.returncode == 0 and "Share of each decision" in text.stdout and "Entries never hit" in text.stdout
    bad = cli("--since", "yesterday")
    assert bad.returncode == 2 and "ISO" in bad.stderr


def test_the_analytics_tab_refuses_requests_without_the_admin_cookie(served):
    url, _ = served
    call(url, "chat", ["怎么添加知识？", [], "follow"])
    for api_name, data in (("analytics", ["", "", "", ""]), ("analytics_export", ["", "", "", ""])):
        event, payload = call(url, api_name, data)
        assert event == "error" and "Admin login required" in json.dumps(payload, ensure_ascii=False)
        event, payload = call(url, api_name, data, login(url))
        assert event == "complete", payload
        if api_name == "analytics":
            assert "1 轮对话" in payload[0]
        else:
            assert payload[0]["visible"] is True  # the CSV box appears with its files
            names = sorted(Path(f["path"]).name for f in payload[0]["value"])
            assert "analytics-decisions.csv" in names and len(names) == 22  # 19, and the hand-off's 3


def test_benchmark_smoke_on_2k_turns(tmp_path):
    from benchmarks.analytics import END, build

    path = tmp_path / "bench.sqlite"
    entries = build(path, 2000)
    turn_log = TurnLog(path, retention_days=0, retention_rows=0)
    stats = Analytics(turn_log, 20, 20_000).compute(StatsFilter(), entries, now=END)
    assert stats.tile("feedback").rows[0][0] == 2000 == turn_log.count()
    assert sum(r[1] for r in stats.tile("per_hour").rows) == 2000
    turn_log.close()


@pytest.mark.browser
@pytest.mark.slow
def test_an_admin_sees_the_analytics_tab_in_chromium(browser, app_config):
    from tests.support.browser import ADMIN_ENV, App, offline_env, open_knowledge_tab, open_tab, shot

    settings = load_settings(app_config)
    turn_log = turn_log_from_settings(settings)
    assert turn_log is not None
    shift = datetime.now(UTC) - NOW  # inside retention: the app's open keeps them
    for seed in seeds():
        record(turn_log, Seed(**{**seed.__dict__, "time": seed.time + shift}))
    turn_log.close()
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)  # logged in as admin
        open_tab(page, "统计 / Analytics")
        page.locator("#kb-stats-status").get_by_text("64 轮对话").wait_for(timeout=30000)
        page.wait_for_function(
            "() => document.querySelector('#kb-stats-top').textContent.includes('怎么添加知识')", timeout=30000
        )
        page.locator("#kb-stats-decisions canvas, #kb-stats-decisions svg").first.wait_for(timeout=30000)
        page.wait_for_timeout(1000)  # the charts' first paint
        path = shot(page, "analytics")
        assert path.stat().st_size > 10_000
        assert "热门问题" in page.locator("#kb-stats-trending").text_content()
    finally:
        app.stop()


def test_csv_export_overwrites_one_private_folder(seeded):
    from types import SimpleNamespace

    from bot.ui.analytics_tab import AnalyticsHandlers

    index = SimpleNamespace(entries=[Entry(id="faq:never", query="q", document="d")])
    h = AnalyticsHandlers(seeded, index, top=5, sample=1000)  # type: ignore[arg-type]
    first = h.export("", "", "", "cli")
    second = h.export("", "", "", "")
    assert first and first == second and h.export_dir is not None
    assert sorted(p.name for p in h.export_dir.iterdir()) == sorted(Path(p).name for p in first)
    assert h.export_dir.stat().st_mode & 0o077 == 0  # no other local user reads the questions
    decisions = (h.export_dir / "analytics-decisions.csv").read_text(encoding="utf-8-sig").splitlines()
    assert decisions[0] == "decision,turns,share" and decisions[1].startswith("direct,21,")
    assert (h.export_dir / "analytics-never_hit.csv").read_text(encoding="utf-8-sig").split() == ["entry", "faq:never"]
    assert h.export("not a date", "", "", "") is None


def test_one_day_of_data_hides_the_line_charts_and_says_why_and_the_csv_box_waits_for_an_export(tmp_path):
    from types import SimpleNamespace

    from bot.ui.analytics_tab import AnalyticsHandlers

    turn_log = TurnLog(tmp_path / "log.sqlite", retention_days=0, retention_rows=0, clock=lambda: NOW)
    for seed in seeds()[:2]:  # two turns on NOW's day
        record(turn_log, Seed(**{**seed.__dict__, "time": NOW - timedelta(minutes=5)}))
    index = SimpleNamespace(entries=[])
    h = AnalyticsHandlers(turn_log, index, top=5, sample=1000)  # type: ignore[arg-type]
    status, rate, _decisions, per_day, _hour, hits, *_ = h.show("", "", "", "")
    assert rate["visible"] is False and hits["visible"] is False and len(rate["value"]) == 1
    assert "One day of data so far" in status and "2 轮对话" in status and len(per_day) == 1  # bars need no second day
    record(turn_log, Seed(**{**seeds()[2].__dict__, "time": NOW - timedelta(days=1)}))
    status, rate, *_ = h.show("", "", "", "")
    assert rate["visible"] is True and "One day" not in status
    box = h.export_box("", "", "", "")
    assert box["visible"] is True and len(box["value"]) > 5
    assert h.export_box("not a date", "", "", "")["visible"] is False
    turn_log.close()


@pytest.mark.browser
@pytest.mark.slow
def test_one_day_of_data_in_chromium_shows_no_empty_chart_nor_an_empty_csv_box(browser, app_config):
    from tests.support.browser import ADMIN_ENV, App, offline_env, open_knowledge_tab, open_tab, shot

    settings = load_settings(app_config)
    turn_log = turn_log_from_settings(settings)
    assert turn_log is not None
    for seed in seeds()[:6]:
        record(turn_log, Seed(**{**seed.__dict__, "time": datetime.now(UTC) - timedelta(minutes=5)}))
    turn_log.close()
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "统计 / Analytics")
        page.locator("#kb-stats-status").get_by_text("One day of data so far").wait_for(timeout=30000)
        page.locator("#kb-stats-day canvas, #kb-stats-day svg").first.wait_for(timeout=30000)
        page.wait_for_timeout(1000)  # the charts' first paint
        assert not page.locator("#kb-stats-rate").is_visible() and not page.locator("#kb-stats-hits").is_visible()
        assert not page.locator("#kb-stats-files").is_visible()  # no empty CSV box above the charts
        shot(page, "analytics-one-day")
        page.locator("#kb-stats-export").click()  # then the box appears, with the files
        page.wait_for_function(
            "() => document.querySelector('#kb-stats-files')?.innerText.includes('analytics-decisions')", timeout=30000
        )
    finally:
        app.stop()
