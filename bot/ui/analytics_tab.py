"""The admin "统计 / Analytics" tab: charts and tables of the conversation log, filters, and a CSV of every tile.

The numbers come from the core (bot/conversations/analytics.py); this module only draws them. Charts are Gradio's own
gr.LinePlot / gr.BarPlot over pandas DataFrames: no extra dependency (pandas ships with Gradio), they render in the
page without loading anything from another origin (the CSP allows it), and they update like any other output.
Every component starts empty; the tab's select (an admin event) fills it, so nothing leaks through a load event.
"""

from __future__ import annotations

import atexit
import html
import shutil
import tempfile
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from bot.config.settings import MODES
from bot.conversations.analytics import Analytics
from bot.conversations.log_store import ConversationLog
from bot.conversations.outcomes import Judge
from bot.conversations.tiles import Stats, StatsFilter, Tile, parse_time
from bot.conversations.topics import TopicFinder, with_topics
from bot.handoff.desk import Desk
from bot.handoff.stats import with_handoffs
from bot.knowledge_base import KnowledgeBase
from bot.search.index import KnowledgeIndex
from bot.texts import LOG_OFF
from bot.ui.events import PRIVATE

ALL = ("全部 / All", "")
SOURCES = [
    ALL,
    ("浏览器 / Browser", "web"),
    ("API", "api"),
    ("聊天窗口 / Widget", "widget"),
    ("企业微信 / WeCom", "wecom"),
    ("飞书 / Feishu", "feishu"),
    ("命令行 / CLI", "cli"),
]
ZERO: list[float | None] = [0, None]  # bars and counts start at zero, so heights compare honestly
DAYS: dict[str, Any] = {"x_label_angle": -45}  # dates side by side overlap
TABLES = (
    "failing_entries",
    "topics",
    "down_reasons",
    "top",
    "trending",
    "unanswered",
    "never_hit",
    "latency",
    "feedback",
    "handoff_tickets",
    "handoff_first_reply",
    "handoff_per_day",
)


ONE_DAY = (
    "只有一天的数据，折线图从第二天起显示；当天回答率 {rate} / One day of data so far: the line charts start on the second "
    "day; the answer rate that day is {rate}"
)


def _rate(rate: pd.DataFrame) -> str:
    """The one day's answer rate of an answer_rate frame, as text."""
    return f"{float(rate['rate'].iloc[0]):.0%}" if len(rate) else "—"


OUTCOMES = {  # tile -> the line's name on the outcomes chart
    "resolution_rate": "解决率 / resolved",
    "answered_rate": "作答率 / answered",
    "handoff_rate": "转人工率 / handed off",
    "solved_yes_rate": "“解决了”/ solved yes",
}


def outcome_frame(stats: Stats) -> pd.DataFrame:
    """The outcome rates per day in long form (day, outcome, rate): one line per outcome."""
    rows = [(row[0], label, row[-1]) for name, label in OUTCOMES.items() for row in stats.tile(name).rows]
    return pd.DataFrame(rows, columns=["day", "outcome", "rate"])


def outcome_line(stats: Stats) -> str:
    """The period's outcome rates as one line (escaped)."""
    parts = []
    for name, label in OUTCOMES.items():
        total = stats.tile(name).total
        if total is not None and total[1]:
            parts.append(f"{label} {float(total[-1]):.0%}")
    handed = stats.tile("handoff_rate").total
    if handed is not None and handed[1]:
        parts.append(f"独立接待率 / deflected {1 - float(handed[-1]):.0%}")
    line = f"<br><b>{html.escape(' · '.join(parts))}</b>" if parts else ""
    notes = "".join(f"<br><small>{html.escape(t.title)}: {html.escape(t.note)}</small>" for t in stats.tiles if t.note)
    return line + notes


def frame(tile: Tile) -> pd.DataFrame:
    """A tile's rows as a DataFrame with its columns."""
    return pd.DataFrame(list(tile.rows), columns=list(tile.columns))


class AnalyticsHandlers:
    """Callbacks of the analytics tab (admins only: registered inside AdminBlocks.admin_only)."""

    def __init__(
        self,
        turn_log: ConversationLog | None,
        index: KnowledgeIndex,
        top: int,
        sample: int,
        export_dir: Path | None = None,
        desk: Desk | None = None,
        topics: TopicFinder | None = None,
        judge: Judge | None = None,
    ):
        self.analytics = Analytics(turn_log, top=top, sample=sample, judge=judge) if turn_log is not None else None
        self.index = index
        self.desk = desk  # the hand-off's tickets, for its tiles (None: hand-off off)
        self.topics = topics  # the questions grouped by meaning (None: no topics tile)
        # One private folder (0700, made on the first export) overwritten by every export and removed at exit: no
        # growth of /tmp per click, and no other local user reads the log's questions. Gradio's copies in its
        # cache go with delete_cache (bot/ui/app.py).
        self.export_dir = export_dir

    def stats(self, since: str, until: str, mode: str | None, source: str | None) -> Stats:
        """Every tile for the filter the page shows (ValueError for a bad date)."""
        assert self.analytics is not None
        flt = StatsFilter(parse_time(since), parse_time(until), mode or None, source or None)
        titles = {e.id: e.query for e in self.index.entries}
        stats = self.analytics.compute(flt, list(titles), titles=titles)
        stats = with_topics(stats, self.topics, self.analytics.log, self.analytics.top)
        return with_handoffs(stats, self.desk.store if self.desk is not None else None, self.analytics.log)

    def show(self, since: str, until: str, mode: str | None, source: str | None) -> tuple:
        """Status line, then each chart and table, in the order of :func:`analytics_tab`'s outputs."""
        empty = (None,) * 7 + (None,) * len(TABLES)
        if self.analytics is None:
            return (LOG_OFF, *empty)
        try:
            stats = self.stats(since, until, mode, source)
        except ValueError as exc:
            note = f"日期格式应为 ISO，如 2026-11-01 / Dates must be ISO, like 2026-11-01: {exc}"
            return (f"<div class='kb-notice'>{html.escape(note)}</div>", *empty)
        turns = stats.tile("feedback").rows[0][0]
        rate, hits = frame(stats.tile("answer_rate")), frame(stats.tile("entry_hits"))
        # A line needs two days: over one, Gradio's line charts draw nothing at all. They wait, and say why.
        lines = rate["day"].nunique() >= 2
        note = "" if lines or not turns else f"<br>{ONE_DAY.format(rate=_rate(rate))}"
        status = f"<div class='kb-status'>{turns} 轮对话 / turns (UTC){note}{outcome_line(stats)}</div>"
        shown = {t.name for t in stats.tiles}  # the hand-off's tiles only when hand-off is on
        return (
            status,
            gr.update(value=rate, visible=lines),
            frame(stats.tile("decisions")),
            frame(stats.tile("per_day")),
            frame(stats.tile("per_hour")),
            gr.update(value=hits, visible=lines),
            frame(stats.tile("relevance")).assign(bin=lambda d: d["from"].map(lambda v: f"{v:.2f}")),
            gr.update(value=outcome_frame(stats), visible=lines),
            *(frame(stats.tile(name)) if name in shown else None for name in TABLES),
        )

    def export_box(self, since: str, until: str, mode: str | None, source: str | None):
        """The CSV box with :meth:`export`'s files, shown only once there are some."""
        paths = self.export(since, until, mode, source)
        return gr.update(value=paths, visible=bool(paths))

    def export(self, since: str, until: str, mode: str | None, source: str | None) -> list[str] | None:
        """One CSV per tile in the export folder (overwritten each time); their paths."""
        if self.analytics is None:
            return None
        try:
            stats = self.stats(since, until, mode, source)
        except ValueError:
            return None
        if self.export_dir is None:
            self.export_dir = Path(tempfile.mkdtemp(prefix="kbbot-analytics-"))
            atexit.register(shutil.rmtree, self.export_dir, ignore_errors=True)
        paths = []
        for tile in stats.tiles:
            path = self.export_dir / f"analytics-{tile.name}.csv"
            path.write_text(tile.csv(), encoding="utf-8-sig")  # the BOM lets Excel read the Chinese text
            paths.append(str(path))
        return paths


def analytics_tab(
    kb: KnowledgeBase, top: int, sample: int, topics: TopicFinder | None = None, judge: Judge | None = None
) -> tuple[AnalyticsHandlers, list, list]:
    """Lay out and wire the analytics tab inside the current Blocks context; (handlers, filter inputs, outputs)."""
    h = AnalyticsHandlers(kb.log, kb.index, top, sample, desk=kb.desk, topics=topics, judge=judge)
    with gr.Row():
        since = gr.Textbox(label="开始（ISO，UTC）/ Since", placeholder="2026-11-01", elem_id="kb-stats-since")
        until = gr.Textbox(label="结束（不含）/ Until (exclusive)", placeholder="2026-12-01", elem_id="kb-stats-until")
        mode = gr.Dropdown([ALL, *((m, m) for m in MODES)], value="", label="模式 / Mode", elem_id="kb-stats-mode")
        source = gr.Dropdown(SOURCES, value="", label="前端 / Front end", elem_id="kb-stats-source")
        show = gr.Button("显示 / Show", variant="primary", elem_id="kb-stats-show")
        export = gr.Button("导出 CSV / Export CSV", elem_id="kb-stats-export")
    status = gr.HTML(elem_id="kb-stats-status")
    files = gr.File(label="CSV", file_count="multiple", interactive=False, visible=False, elem_id="kb-stats-files")
    with gr.Row():
        rate = gr.LinePlot(
            x="day", y="rate", title="每日回答率 / Answer rate per day", elem_id="kb-stats-rate", y_lim=[0, 1], **DAYS
        )
        decisions = gr.BarPlot(
            x="decision", y="turns", title="各决策 / Decisions", elem_id="kb-stats-decisions", sort="-y", y_lim=ZERO
        )
    with gr.Row():
        per_day = gr.BarPlot(
            x="day", y="turns", title="每日问题数 / Questions per day", elem_id="kb-stats-day", y_lim=ZERO, **DAYS
        )
        per_hour = gr.BarPlot(
            x="hour", y="turns", title="各小时（UTC）/ Per hour of day", elem_id="kb-stats-hour", y_lim=ZERO
        )
    with gr.Row():
        hits = gr.LinePlot(
            x="day",
            y="hits",
            color="entry",
            title="条目命中 / Hits per entry",
            elem_id="kb-stats-hits",
            y_lim=ZERO,
            **DAYS,
        )
        relevance = gr.BarPlot(
            x="bin",
            y="turns",
            color="zone",
            title="最高相关度（按当前阈值着色）/ Top-hit relevance, coloured by the current thresholds",
            elem_id="kb-stats-relevance",
            y_lim=ZERO,
        )
    outcomes = gr.LinePlot(
        x="day",
        y="rate",
        color="outcome",
        title="结果（每个对话）/ Outcomes per conversation",
        elem_id="kb-stats-outcomes",
        y_lim=[0, 1],
        **DAYS,
    )
    tables = []
    labels = {
        "failing_entries": "最让访客失望的条目 / Entries that fail visitors most",
        "topics": "问题主题 / Topics (questions grouped by meaning)",
        "down_reasons": "点踩原因 / Thumbs-down reasons",
        "top": "最常问 / Top questions",
        "trending": "上升（近 7 天对比前 7 天）/ Trending (last 7 days vs the 7 before)",
        "unanswered": "回答不了的问题组 / Top unanswered groups",
        "never_hit": "从未命中的条目 / Entries never hit",
        "latency": "延迟 p50/p95（毫秒）/ Latency p50/p95 (ms)",
        "feedback": "点赞/点踩 / Thumbs up / down",
        "handoff_tickets": "转人工工单 / Hand-off tickets",
        "handoff_first_reply": "人工首次回复用时 / Time to a person's first reply",
        "handoff_per_day": "每日转人工工单 / Hand-off tickets per day",
    }
    for name in TABLES:
        tables.append(gr.Dataframe(label=labels[name], interactive=False, elem_id=f"kb-stats-{name}", max_height=320))
    inputs = [since, until, mode, source]
    outputs = [status, rate, decisions, per_day, per_hour, hits, relevance, outcomes, *tables]
    show.click(h.show, inputs, outputs, api_name="analytics")
    for f in (mode, source):
        f.change(h.show, inputs, outputs, **PRIVATE)
    export.click(h.export_box, inputs, [files], api_name="analytics_export")
    return h, inputs, outputs


def analytics_page(
    demo: Any, kb: KnowledgeBase, top: int, sample: int, topics: TopicFinder | None = None, judge: Judge | None = None
) -> gr.Tab:
    """The analytics tab, hidden until an admin's page loads; filled by its select (an admin event)."""
    with gr.Tab("统计 / Analytics", id="analytics", visible=False) as tab:
        h, inputs, outputs = analytics_tab(kb, top, sample, topics, judge)
    tab.select(h.show, inputs, outputs, **PRIVATE)
    return tab
