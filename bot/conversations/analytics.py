"""The analytics page's numbers: every tile an SQL aggregate over the conversation log, filtered by time, mode, source.

Whole hours and days are summed from the log's rollup tables (bot/conversations/rollup.py), the partial ones at the edges of
a time filter counted from the turns, so filters stay exact; top and trending questions use covering indexes; only
the latency percentiles read per-turn JSON, from the newest ``sample`` turns in range. A million turns take under a
second (BENCHMARKS.md). Times are UTC. Decisions are whatever values the log's decision column holds
(``rollup.DECISION``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.config.settings import Settings
from bot.conversations.entry_records import entry_records, failing_tile
from bot.conversations.inbox import strategy_name
from bot.conversations.log_store import ConversationLog, utc_iso
from bot.conversations.outcomes import Judge, outcome_tiles, read_turns
from bot.conversations.rollup import BINS, DECISION, DOWN, UP, bin_sql
from bot.conversations.tiles import Stats, StatsFilter, Tile

# Strategies that mean the knowledge had no answer (the inbox's fallbacks, and the ladder's hand-off to a person).
UNANSWERED_STRATEGIES = ("hyde", "last_resort", "handoff", "held")
WEEK, DAY, HOUR = timedelta(days=7), timedelta(days=1), timedelta(hours=1)


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    rank = max(1, -(-len(values) * q // 100))  # ceil(n * q / 100)
    return round(values[int(rank) - 1], 1)


def _floor(moment: datetime, unit: timedelta) -> datetime:
    moment = moment.astimezone(UTC)
    start = moment.replace(minute=0, second=0, microsecond=0)
    return start if unit == HOUR else start.replace(hour=0)


def _split(flt: StatsFilter, unit: timedelta) -> tuple[tuple[str, str] | None, list[StatsFilter]]:
    """The whole hours (days) of the range as rollup keys [from, to), and the partial edges to count from turns."""
    since, until = flt.since, flt.until
    start = None if since is None else _floor(since, unit) + (unit if _floor(since, unit) < since else timedelta(0))
    end = None if until is None else _floor(until, unit)
    if start is not None and end is not None and start >= end:
        return None, [flt]
    edges = []
    if since is not None and start is not None and since < start:
        edges.append(StatsFilter(since, start, flt.mode, flt.source))
    if until is not None and end is not None and end < until:
        edges.append(StatsFilter(end, until, flt.mode, flt.source))
    width = 13 if unit == HOUR else 10
    keys = (utc_iso(start)[:width] if start else "", utc_iso(end)[:width] if end else "~")
    return keys, edges


class Analytics:
    """Computes the tiles from one conversation log (either backend: the SQL here runs on both); ``entry_ids`` of the loaded knowledge find the entries never hit.

    ``top`` rows per table and the latency ``sample`` come from settings (log.analytics_top, log.analytics_sample),
    ``judge`` the outcome definitions (log.outcomes).
    """

    def __init__(self, turn_log: ConversationLog, top: int, sample: int, judge: Judge | None = None):
        self.log, self.top, self.sample = turn_log, top, sample
        self.judge = judge or Judge()

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        return self.log.query(sql, list(args))

    def compute(
        self,
        flt: StatsFilter | None = None,
        entry_ids: Iterable[str] = (),
        now: datetime | None = None,
        titles: Mapping[str, str] | None = None,
    ) -> Stats:
        """Every tile for ``flt``; ``now`` (default: the clock) ends the trending weeks when ``until`` is open;
        ``titles`` (entry id -> question) name the entries that fail visitors most."""
        flt = flt or StatsFilter()
        entry_ids = list(entry_ids)
        # The per-hour cube the first five tiles are sums of: whole hours from the rollup, the edges from turns.
        cube = self._split_rows(
            flt,
            HOUR,
            "SELECT hour, strategy, SUM(turns), SUM(up), SUM(down) FROM hourly WHERE {keys} GROUP BY 1, 2",
            f"SELECT substr(time, 1, 13), {DECISION}, COUNT(*), SUM({UP}), SUM({DOWN}) FROM turns "
            "WHERE {where} GROUP BY 1, 2",
            "hour",
        )
        tiles = [*self._from_cube(cube), self._top(flt), self._trending(flt, now), self._unanswered(flt)]
        tiles += [self._entry_hits(flt), self._never_hit(flt, entry_ids), self._latency(flt), self._relevance(flt)]
        # Outcomes are judged per conversation from the turns themselves (no rollup: they depend on what followed).
        turns = read_turns(self.log, flt)
        answers = self.judge.answers(turns)
        tiles += outcome_tiles(turns, self.judge, answers)
        end = flt.until or now or self.log.clock()
        known = [(i, (titles or {}).get(i, "")) for i in entry_ids]
        tiles.append(failing_tile(entry_records(turns, answers, known, now=end), self.top))
        return Stats(filter=flt, tiles=tuple(tiles))

    def _split_rows(self, flt: StatsFilter, unit: timedelta, summed: str, raw: str, key: str) -> list[tuple]:
        """Rows of ``summed`` over the rollup's whole units plus rows of ``raw`` over the partial edges."""
        keys, edges = _split(flt, unit)
        rows: list[tuple] = []
        if keys is not None:
            cond, args = f"{key} >= ? AND {key} < ?", [*keys]
            for column, value in (("mode", flt.mode), ("source", flt.source)):
                if value is not None:
                    cond += f" AND {column} = ?"
                    args.append(value)
            rows += self._rows(summed.format(keys=cond), args)
        for edge in edges:
            where, args = edge.where()
            rows += self._rows(raw.format(where=where), args)
        return rows

    def _from_cube(self, cube: list[tuple]) -> list[Tile]:
        days: dict[str, list[int]] = {}
        hours = [0] * 24
        decisions: dict[str, int] = {}
        up = down = 0
        for hour, stored, n, ups, downs in cube:
            strategy = strategy_name(stored)
            day = days.setdefault(hour[:10], [0, 0])
            day[0] += n
            day[1] += n if strategy not in UNANSWERED_STRATEGIES else 0
            hours[int(hour[11:13])] += n
            decisions[strategy] = decisions.get(strategy, 0) + n
            up, down = up + (ups or 0), down + (downs or 0)
        total = sum(decisions.values())
        rated = up + down
        return [
            Tile(
                "answer_rate",
                "每日回答率 / Answer rate per day (UTC)",
                ("day", "turns", "answered", "rate"),
                tuple((d, n, a, _rate(a, n)) for d, (n, a) in sorted(days.items())),
            ),
            Tile(
                "decisions",
                "各决策占比 / Share of each decision",
                ("decision", "turns", "share"),
                tuple((s, n, _rate(n, total)) for s, n in sorted(decisions.items(), key=lambda kv: (-kv[1], kv[0]))),
            ),
            Tile(
                "per_day",
                "每日问题数 / Questions per day (UTC)",
                ("day", "turns"),
                tuple((d, n) for d, (n, _) in sorted(days.items())),
            ),
            Tile(
                "per_hour",
                "各小时问题数 / Questions per hour of day (UTC)",
                ("hour", "turns"),
                tuple((h, n) for h, n in enumerate(hours)),
            ),
            Tile(
                "feedback",
                "点赞/点踩率 / Thumbs up / down rate",
                ("turns", "rated", "up", "down", "up_rate", "down_rate"),
                ((total, rated, up, down, _rate(up, rated), _rate(down, rated)),),
            ),
        ]

    def _top(self, flt: StatsFilter) -> Tile:
        where, args = flt.where()
        rows = self._rows(
            f"SELECT norm, COUNT(*) FROM turns WHERE {where} GROUP BY norm ORDER BY 2 DESC, 1 LIMIT ?",
            [*args, self.top],
        )
        return Tile("top", "最常问的问题 / Top questions", ("question", "turns"), tuple(rows))

    def _trending(self, flt: StatsFilter, now: datetime | None) -> Tile:
        end = flt.until or now or self.log.clock()
        mid, start = end - WEEK, end - 2 * WEEK
        since = max(start, flt.since) if flt.since else start
        where, args = StatsFilter(since, end, flt.mode, flt.source).where()
        rows = self._rows(
            "SELECT norm, recent, earlier FROM (SELECT norm, SUM(CASE WHEN time >= ? THEN 1 ELSE 0 END) AS recent, "
            f"SUM(CASE WHEN time < ? THEN 1 ELSE 0 END) AS earlier FROM turns WHERE {where} GROUP BY norm) AS counts "
            "WHERE recent > earlier ORDER BY recent - earlier DESC, recent DESC, norm LIMIT ?",
            [utc_iso(mid), utc_iso(mid), *args, self.top],
        )
        return Tile(
            "trending",
            "上升的问题（近 7 天对比前 7 天）/ Trending questions (last 7 days against the 7 before)",
            ("question", "last_7_days", "previous_7_days", "rise"),
            tuple((q, r, b, r - b) for q, r, b in rows),
        )

    def _unanswered(self, flt: StatsFilter) -> Tile:
        groups = self.log.unanswered(self.top, sort="count", filters=flt.turn_filters())
        return Tile(
            "unanswered",
            "回答不了的问题组 / Top unanswered groups",
            ("question", "turns", "thumbs_down", "latest"),
            tuple((g.question, g.count, g.thumbs_down, g.latest) for g in groups),
        )

    def _hits(self, flt: StatsFilter) -> tuple[str, list[Any]]:
        """A CTE ``hits(day, entry, n)``: turns per day whose answer used the entry, and its arguments."""
        raw = "SELECT substr(time, 1, 10), entry_id, COUNT(*) FROM used WHERE {} GROUP BY 1, 2"
        if flt.mode is not None or flt.source is not None:  # the rollup is not split by mode and front end
            where, args = flt.where()
            return f"hits(day, entry, n) AS ({raw.format(where)})", args
        keys, edges = _split(flt, DAY)
        parts, args = [], []
        if keys is not None:
            parts.append("SELECT day, entry_id, hits FROM daily_hits WHERE day >= ? AND day < ?")
            args += keys
        for edge in edges:
            where, more = edge.where()
            parts.append(raw.format(where))
            args += more
        return f"hits(day, entry, n) AS ({' UNION ALL '.join(parts)})", args

    def _entry_hits(self, flt: StatsFilter) -> Tile:
        cte, args = self._hits(flt)
        rows = self._rows(
            f"WITH {cte}, top AS (SELECT entry FROM hits GROUP BY entry ORDER BY SUM(n) DESC, entry LIMIT ?) "
            "SELECT day, entry, SUM(n) FROM hits WHERE entry IN (SELECT entry FROM top) GROUP BY 1, 2 ORDER BY 1, 2",
            [*args, self.top],
        )
        return Tile("entry_hits", "条目命中（按天）/ Hits per entry per day", ("day", "entry", "hits"), tuple(rows))

    def _never_hit(self, flt: StatsFilter, entry_ids: Iterable[str]) -> Tile:
        cte, args = self._hits(flt)
        seen = {r[0] for r in self._rows(f"WITH {cte} SELECT DISTINCT entry FROM hits", args)}
        return Tile(
            "never_hit",
            "从未命中的条目 / Entries never hit",
            ("entry",),
            tuple((e,) for e in sorted(set(entry_ids) - seen)),
        )

    def _latency(self, flt: StatsFilter) -> Tile:
        where, args = flt.where()
        rows = self._rows(
            f"SELECT timings, latency_ms FROM turns WHERE {where} ORDER BY time DESC LIMIT ?", [*args, self.sample]
        )
        stages: dict[str, list[float]] = {}
        for timings, total in rows:
            for stage, ms in json.loads(timings or "{}").items():
                if stage != "total" and isinstance(ms, (int, float)):
                    stages.setdefault(stage, []).append(float(ms))
            if total is not None:
                stages.setdefault("turn", []).append(float(total))
        out = []
        for stage, values in sorted(stages.items(), key=lambda kv: (kv[0] == "turn", kv[0])):
            values.sort()
            out.append((stage, len(values), _percentile(values, 50), _percentile(values, 95)))
        return Tile(
            "latency",
            f"各阶段延迟（最新 {len(rows)} 轮）/ Latency per stage, ms (newest {len(rows)} turns)",
            ("stage", "turns", "p50_ms", "p95_ms"),
            tuple(out),
        )

    def _relevance(self, flt: StatsFilter) -> Tile:
        counts: dict[int, int] = {}
        rows = self._split_rows(
            flt,
            DAY,
            "SELECT bin, SUM(turns) FROM daily_relevance WHERE {keys} GROUP BY 1",
            f"SELECT {bin_sql(self.log.dialect)}, COUNT(*) FROM turns WHERE {{where}} AND top_relevance IS NOT NULL "
            "GROUP BY 1",
            "day",
        )
        for b, n in rows:
            counts[b] = counts.get(b, 0) + n
        where, args = flt.where()
        latest = self._rows(
            f"SELECT thresholds FROM turns WHERE {where} AND thresholds IS NOT NULL ORDER BY time DESC LIMIT 1", args
        )
        cut = json.loads(latest[0][0]) if latest else {}
        answer, direct = cut.get("answer"), cut.get("direct")
        rows = []
        for b in range(BINS):
            low, high = b / BINS, (b + 1) / BINS
            zone = "below"
            if answer is not None and low >= answer:
                zone = "answer"
            if direct is not None and low >= direct:
                zone = "direct"
            rows.append((round(low, 2), round(high, 2), counts.get(b, 0), zone))
        title = "最高相关度分布 / Relevance of the top hit"
        if cut:
            title += f" ({cut.get('system')}: answer ≥ {answer}, direct ≥ {direct})"
        return Tile("relevance", title, ("from", "to", "turns", "zone"), tuple(rows))


def analytics_from_settings(turn_log: ConversationLog, settings: Settings) -> Analytics:
    """An Analytics over ``turn_log`` sized by ``settings.log`` (analytics_top, analytics_sample, outcomes)."""
    return Analytics(
        turn_log,
        top=settings.log.analytics_top,
        sample=settings.log.analytics_sample,
        judge=judge_from_settings(settings),
    )


def judge_from_settings(settings: Settings) -> Judge:
    """The outcome definitions of ``log.outcomes``."""
    o = settings.log.outcomes
    return Judge(o.window_minutes, o.reask_similarity)
