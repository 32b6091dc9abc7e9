"""The admin tabs over the conversation log: the unanswered inbox (new entry, add as a phrasing, dismiss) and the log.

Both only translate: the groups and turns come from the core's ConversationLog (``kb.log``), knowledge edits go
through the core's KnowledgeEditor, so the index serves a new entry at the next message. Every text is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr

from bot.chat.answer import Strategy
from bot.config.settings import LogSettings
from bot.conversations.inbox import Group
from bot.conversations.log_store import ConversationLog
from bot.conversations.outcomes import Judge
from bot.conversations.topics import TopicFinder, joined
from bot.editing.editor import KnowledgeEditor
from bot.errors import BotError, KnowledgeError
from bot.handoff.desk import Desk
from bot.handoff.tickets import Problem, Ticket
from bot.knowledge_base import KnowledgeBase
from bot.texts import DUPLICATE_QUESTION, LOG_OFF
from bot.ui.admin import fill_for_admins
from bot.ui.analytics_tab import analytics_page
from bot.ui.events import PRIVATE
from bot.ui.knowledge_tab import result_html
from bot.ui.records_tab import link_records, records_page
from bot.ui.render import minute
from bot.ui.suggestions_tab import suggestions_section

e = html.escape
HANDOFFS = "handoffs"  # the inbox's filter that lists the hand-off tickets instead of unanswered questions
SORTS = [("最新 / Newest", "latest"), ("最常问 / Most asked", "count"), ("转人工 / Hand-offs", HANDOFFS)]
STRATEGIES = [("全部 / All", ""), *((s.value.replace("_", " "), s.value) for s in Strategy)]
RATINGS = [("全部 / All", ""), ("👎", "-1"), ("👍", "1")]


def groups_html(groups: list[Group]) -> str:
    """The inbox as a table: question (and other phrasings), count, latest, strategies, thumbs down, near misses."""
    if not groups:
        return "<p id='kb-inbox-empty'>没有未解决的问题 🎉 / No unanswered questions.</p>"
    rows = []
    for g in groups:
        others = "".join(f"<br><small>· {e(q)}</small>" for q in g.questions if q != g.question)
        reasons = "".join(f"<br><small>“{e(r)}”</small>" for r in g.reasons)
        answered = [f"👎 {e(a['id'])} {e(a['query'])} <small>(答的 / answered)</small>" for a in g.answered]
        near = (
            "<br>".join(
                answered
                + [
                    f"{e(c['id'])} {e(c['query'])} <small>{c['relevance']:.3f}"
                    f"{' / ' + format(c['threshold'], '.3g') if c.get('threshold') is not None else ''}</small>"
                    for c in g.candidates
                ]
            )
            or "—"
        )
        strategies = ", ".join(f"{e(k)} ×{v}" for k, v in sorted(g.strategies.items()))
        rows.append(
            f"<tr><td>{e(g.question)}{others}</td><td>{g.count}</td><td>{e(minute(g.latest))}</td>"
            f"<td>{strategies}</td><td>{g.thumbs_down or ''}{reasons}</td><td>{near}</td></tr>"
        )
    return (
        "<table class='kb-hits kb-inbox'><tr><th>问题 / Question</th><th>次数 / Count</th><th>最近 / Latest</th>"
        "<th>策略 / Strategies</th><th>👎</th><th>答过的或差点通过的条目 / Answered (👎) or almost passed "
        "(relevance / threshold)</th></tr>" + "".join(rows) + "</table>"
    )


def turns_html(turns: Sequence[Mapping[str, Any]]) -> str:
    """Recent turns as a table: time, source, strategy, mode, question, answer excerpt, feedback, latency."""
    if not turns:
        return "<p>没有记录 / No turns.</p>"
    rows = []
    for t in turns:
        rating = {1: "👍", -1: "👎"}.get(t.get("rating", 0), "")  # 0, None: not rated
        reason = f" {e(t['reason'])}" if t.get("reason") else ""
        answer = (t.get("answer") or "").replace("\n", " ")
        answer = answer[:120] + ("…" if len(answer) > 120 else "")
        latency = f"{t['latency_ms']:.0f}" if t.get("latency_ms") is not None else ""
        rows.append(
            f"<tr><td>{t['id']}</td><td>{e(minute(t['time']))}</td><td>{e(t.get('source') or '')}</td>"
            f"<td class='kb-strategy'>{e(t['strategy'])}</td><td>{e(t.get('mode') or '')}</td>"
            f"<td>{e(t['question'])}</td><td><small>{e(answer)}</small></td><td>{rating}{reason}</td>"
            f"<td>{latency}</td></tr>"
        )
    return (
        "<table class='kb-hits kb-log'><tr><th>#</th><th>时间 / Time (UTC)</th><th>来源 / Source</th>"
        "<th>策略 / Strategy</th><th>模式 / Mode</th><th>问题 / Question</th><th>回答 / Answer</th>"
        "<th>评价 / Feedback</th><th>ms</th></tr>" + "".join(rows) + "</table>"
    )


def retention_html(turn_log: ConversationLog) -> str:
    """What the log keeps and for how long, when retention last ran, and whether personal data is masked."""
    days = f"{turn_log.retention_days} 天 / days" if turn_log.retention_days else "不限天数 / no age limit"
    rows = f"{turn_log.retention_rows:,} 条 / turns" if turn_log.retention_rows else "不限条数 / no row limit"
    purge = turn_log.last_purge()
    last = (
        f"{e(minute(purge.time))} UTC，删除 {purge.removed:,} 条 / removed {purge.removed:,}"
        if purge
        else "尚未运行 / not yet"
    )
    masked = "已遮盖 / masked" if turn_log.masking else "未遮盖 / NOT masked (privacy.mask: false)"
    return (
        f"<p class='kb-retention'>保留 / Retention: {days}, {rows} · 上次清理 / Last purge: {last} · "
        f"个人信息 / Personal data: {masked}</p>"
    )


def error_html(exc: BotError) -> str:
    """A refused edit, naming every problem."""
    problems = getattr(exc, "problems", None) if isinstance(exc, KnowledgeError) else None
    detail = "<ul>" + "".join(f"<li>{e(str(p))}</li>" for p in problems) + "</ul>" if problems else e(str(exc))
    return f"<div class='kb-notice'>❌ 未保存，请修正 / Not saved, please fix: {detail}</div>"


def tickets_html(tickets: Sequence[Ticket], problems: Sequence[Problem]) -> str:
    """The hand-off tickets as a table (id, opened, status, why, front end, question, agent), and notices that
    have not gone through yet."""
    failing = "".join(
        f"<p class='kb-notice'>⚠️ 通知未送达，稍后重试 / Notice not delivered yet: {e(p.channel)} #{p.ticket} "
        f"×{p.attempts}: {e(p.error)}</p>"
        for p in problems
    )
    if not tickets:
        return failing + "<p id='kb-inbox-empty'>没有转人工的工单 / No hand-off tickets.</p>"
    rows = "".join(
        f"<tr><td>#{t.id}</td><td>{e(minute(t.created))}</td><td class='kb-ticket-status'>{e(t.status.value)}</td>"
        f"<td>{e(t.reason.value)}</td><td>{e(t.channel)}</td><td>{e(t.question)}</td><td>{e(t.agent or '')}</td></tr>"
        for t in tickets
    )
    return (
        failing + "<table class='kb-hits kb-tickets'><tr><th>#</th><th>时间 / Opened (UTC)</th><th>状态 / Status</th>"
        "<th>原因 / Reason</th><th>来源 / Source</th><th>问题 / Question</th><th>坐席 / Agent</th></tr>"
        f"{rows}</table><p><a href='agent' target='_blank'>坐席控制台 / Agent console →</a></p>"
    )


class InboxHandlers:
    """Callbacks of the inbox and log tabs (admins only: registered inside AdminBlocks.admin_only)."""

    def __init__(
        self,
        turn_log: ConversationLog | None,
        editor: KnowledgeEditor,
        desk: Desk | None = None,
        topics: TopicFinder | None = None,
    ):
        self.log = turn_log
        self.editor = editor
        self.desk = desk
        self.topics = topics  # joins near-duplicate groups that mean the same (the analytics page's topics)

    def _topics(self, sort: str | None) -> list[list[Group]]:
        """The inbox's groups, those of one topic together, the first of each the one shown."""
        if sort == HANDOFFS or self.log is None:
            return []
        groups = self.log.unanswered(limit=100, sort=sort or "latest")
        return self.topics.merge(groups) if self.topics is not None else [[g] for g in groups]

    def _groups(self, sort: str | None) -> list[Group]:
        return [joined(members) for members in self._topics(sort)]

    def refresh(self, sort: str | None, status: str = ""):
        """(table html, group choices, status html) for the chosen sort order, or the hand-off tickets."""
        if self.log is None:
            return LOG_OFF, gr.update(choices=[], value=None), status
        if sort == HANDOFFS:
            try:
                tickets = self.desk.queue(None) if self.desk is not None else []
                listed = tickets_html(tickets, self.desk.problems() if self.desk is not None else [])
            except BotError as exc:
                listed = f"<div class='kb-notice'>❌ {e(str(exc))}</div>"
            return listed, gr.update(choices=[], value=None), status
        groups = self._groups(sort)
        choices = [(f"{g.question} (×{g.count})", g.key) for g in groups]
        return groups_html(groups), gr.update(choices=choices, value=choices[0][1] if choices else None), status

    def pick(self, key: str | None, sort: str | None):
        """Start both forms afresh for a group: (new entry file, query, other phrasings, document, metadata,
        phrasing, entry choices).

        Nothing of the previous group's entry stays (document and keywords are cleared). The new entry's other
        phrasings are the group's other questions, and its file the one written in the question's language. The
        entries offered for the phrasing are those that answered its thumbs-down turns (a wrong answer: the
        question was theirs but worded otherwise), then the near misses.
        """
        group = next((g for g in self._groups(sort) if g.key == key), None)
        if group is None:
            return gr.skip(), "", "", "", "", "", gr.update(choices=[], value=None)
        choices = [(f"👎 {a['id']} · {a['query']}", a["id"]) for a in group.answered]
        seen = {a["id"] for a in group.answered}
        choices += [(f"{c['id']} · {c['query']}", c["id"]) for c in group.candidates if c["id"] not in seen]
        entry = gr.update(choices=choices, value=choices[0][1] if choices else None)
        others = "\n".join(q for q in group.questions if q != group.question)
        file = self.editor.file_for(group.question)
        return gr.update(value=file) if file else gr.skip(), group.question, others, "", "", group.question, entry

    def _done(self, key: str | None, sort: str | None, status: str):
        if key and self.log is not None:  # handled: it leaves the inbox until asked (and missed) again
            members = next((m for m in self._topics(sort) if joined(m).key == key), None)
            for g in members or []:
                self.log.dismiss(g.key)
            if members is None:
                self.log.dismiss(key)
        return self.refresh(sort, status)

    def new_entry(
        self,
        key: str | None,
        file: str | None,
        query: str,
        phrasings: str | None,
        document: str,
        metadata: str,
        sort: str | None,
    ):
        """Add an entry for the group's question (through the KnowledgeEditor: indexed at once), then file the group;
        refused, with the entry named, when an entry already asks one of its questions."""
        questions = [q.strip() for q in (phrasings or "").splitlines() if q.strip()]
        for question in (query, *questions):
            existing = self.editor.asking(question)
            if existing is not None:
                notice = DUPLICATE_QUESTION.format(question=e(question), entry=e(existing.id))
                return gr.skip(), gr.skip(), f"<div class='kb-notice'>⚠️ {notice}</div>"
        try:
            result = self.editor.add(file, None, query, document, metadata, questions=questions)
        except BotError as exc:
            return gr.skip(), gr.skip(), error_html(exc)
        return self._done(key, sort, result_html(result))

    def add_phrasing(self, key: str | None, entry_id: str | None, question: str, sort: str | None):
        """Add the question to an entry as another phrasing (its ``questions`` list), and file the group."""
        try:
            result = self.editor.add_phrasing(entry_id or "", question)
        except BotError as exc:
            return gr.skip(), gr.skip(), error_html(exc)
        return self._done(key, sort, result_html(result))

    def dismiss(self, key: str | None, sort: str | None):
        """Hide the group until one of its questions is asked (and missed) again."""
        if not key or self.log is None:
            return gr.skip(), gr.skip(), "<div class='kb-notice'>❌ 请先选择问题 / Choose a question first</div>"
        hidden = self.log.dismiss(key)
        return self.refresh(sort, f"<div class='kb-ok'>✅ 已忽略 / Dismissed ({hidden} turns)</div>")

    def turns(self, strategy: str | None, rating: str | None, text: str | None):
        """The newest 100 turns matching the filters, as a table under the log's retention and privacy line."""
        if self.log is None:
            return LOG_OFF
        return retention_html(self.log) + self._turns(strategy, rating, text)

    def _turns(self, strategy: str | None, rating: str | None, text: str | None):
        assert self.log is not None  # checked by turns()
        filters: dict[str, Any] = {
            "strategy": strategy or None,
            "rating": int(rating) if rating else None,
            "text": (text or "").strip() or None,
        }
        return turns_html(self.log.recent(100, filters=filters))


def inbox_tab(kb: KnowledgeBase, topics: TopicFinder | None = None) -> tuple[InboxHandlers, Any, list]:
    """Lay out and wire the unanswered inbox inside the current Blocks context; (handlers, sort, refresh outputs)."""
    h = InboxHandlers(kb.log, kb.editor, kb.desk, topics)
    gr.Markdown(
        "回答不了（HyDE、兜底回复）或被点踩的问题，相近的问法归为一组；“转人工”列出转人工的工单。/ Questions that fell "
        "back (HyDE, last resort) or got a thumbs down, near-duplicates grouped; “Hand-offs” lists the hand-off tickets."
    )
    with gr.Row():
        sort = gr.Radio(SORTS, value="latest", label="排序 / Sort", elem_id="kb-inbox-sort")
        refresh = gr.Button("刷新 / Refresh", elem_id="kb-inbox-refresh")
    table = gr.HTML(elem_id="kb-inbox-table")
    pick = gr.Dropdown([], label="选择问题 / Choose a question", allow_custom_value=True, elem_id="kb-inbox-pick")
    with gr.Accordion("新建条目 / New entry", open=True):
        file = gr.Dropdown(
            [],
            allow_custom_value=True,
            label="文件 / File",
            elem_id="kb-inbox-file",
        )
        query = gr.Textbox(label="问题/标题 query", elem_id="kb-inbox-query")
        phrasings = gr.Textbox(
            label="其他问法 questions（每行一个 / one per line）", lines=2, elem_id="kb-inbox-phrasings"
        )
        document = gr.Textbox(label="内容 document", lines=3, elem_id="kb-inbox-document")
        metadata = gr.Textbox(label="关键词 metadata（逗号分隔 / comma-separated）", elem_id="kb-inbox-metadata")
        create = gr.Button("新建条目 / New entry", variant="primary", elem_id="kb-inbox-new")
    with gr.Accordion("添加为已有条目的问法 / Add as a phrasing of an entry", open=False):
        entry = gr.Dropdown(
            [],
            allow_custom_value=True,
            label="条目（答错的、差点通过的，或输入 文件名:键）/ Entry (answered wrongly, almost passed, or stem:key)",
            elem_id="kb-inbox-entry",
        )
        phrasing = gr.Textbox(label="问法 / Phrasing", elem_id="kb-inbox-phrasing")
        add = gr.Button("添加为该条目的问法 / Add as its phrasing", elem_id="kb-inbox-add")
    dismiss = gr.Button("忽略 / Dismiss", variant="stop", elem_id="kb-inbox-dismiss")
    status = gr.HTML(elem_id="kb-inbox-status")

    listed = [table, pick, status]

    def files():  # at an admin's page load: file names are admin data, never in /config
        names = h.editor.files()
        return gr.update(choices=names, value=names[0] if names else None)

    fill_for_admins(files, [file])
    refresh.click(h.refresh, [sort], listed, api_name="inbox")
    sort.change(h.refresh, [sort], listed, **PRIVATE)
    pick.change(h.pick, [pick, sort], [file, query, phrasings, document, metadata, phrasing, entry], **PRIVATE)
    create.click(
        h.new_entry, [pick, file, query, phrasings, document, metadata, sort], listed, api_name="inbox_new_entry"
    )
    add.click(h.add_phrasing, [pick, entry, phrasing, sort], listed, api_name="inbox_add_phrasing")
    dismiss.click(h.dismiss, [pick, sort], listed, api_name="inbox_dismiss")
    return h, sort, listed


def log_tab(h: InboxHandlers) -> tuple[list, Any]:
    """Lay out and wire the conversation-log view inside the current Blocks context; (filter inputs, table)."""
    with gr.Row():
        strategy = gr.Dropdown(STRATEGIES, value="", label="策略 / Strategy", elem_id="kb-log-strategy")
        rating = gr.Dropdown(RATINGS, value="", label="评价 / Feedback", elem_id="kb-log-rating")
        text = gr.Textbox(label="问题包含 / Question contains", elem_id="kb-log-text")
        show = gr.Button("显示 / Show", elem_id="kb-log-show")
    table = gr.HTML(elem_id="kb-log-table")
    show.click(h.turns, [strategy, rating, text], [table], api_name="log_turns")
    strategy.change(h.turns, [strategy, rating, text], [table], **PRIVATE)
    rating.change(h.turns, [strategy, rating, text], [table], **PRIVATE)
    return [strategy, rating, text], table


def admin_tabs(
    demo: Any,
    kb: KnowledgeBase,
    log: LogSettings | None = None,
    topics: TopicFinder | None = None,
    record_link: tuple[gr.Button, gr.State] | None = None,
) -> list[gr.Tab]:
    """The inbox, log, analytics and entry records tabs, hidden until an admin's page loads.

    Every event refuses non-admins. ``topics`` group the inbox and the analytics page by meaning; ``record_link``:
    the knowledge tab's button (and loaded entry) that opens an entry's record.
    """
    log = log or LogSettings()
    judge = Judge(log.outcomes.window_minutes, log.outcomes.reask_similarity)
    with demo.admin_only():
        with gr.Tab("待解决问题 / Unanswered", id="inbox", visible=False) as inbox:
            h, sort, listed = inbox_tab(kb)
            suggested, suggested_out = suggestions_section(h.log, h.editor)
        with gr.Tab("对话日志 / Log", id="log", visible=False) as turns:
            filters, table = log_tab(h)
        inbox.select(h.refresh, [sort], listed, **PRIVATE)
        inbox.select(suggested.refresh, None, suggested_out, **PRIVATE)
        turns.select(h.turns, filters, [table], **PRIVATE)
        stats = analytics_page(demo, kb, log.analytics_top, log.analytics_sample, topics, judge)
        records, record_filter = records_page(kb, judge)
        if record_link is not None:
            link_records(*record_link, record_filter)
    return [inbox, turns, stats, records]
