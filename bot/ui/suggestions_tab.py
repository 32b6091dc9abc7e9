"""The suggested phrasings in the Unanswered tab: questions users resolved through clarify, confirm or "did you
mean", offered as phrasings of the entry they resolved to; an admin accepts (indexed at once) or rejects (for good)."""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from bot.conversations.log_store import ConversationLog
from bot.conversations.suggestions import Suggestion, suggestions
from bot.editing.editor import KnowledgeEditor
from bot.errors import BotError
from bot.ui.knowledge_tab import result_html

e = html.escape
VIA = {"clarify": "澄清 / clarify", "confirm": "确认 / confirm", "did-you-mean": "您是不是想问 / did you mean"}


def suggestions_html(found: list[Suggestion]) -> str:
    """The suggestions as a table (escaped): number, question, entry, times resolved, conversations, how."""
    if not found:
        return "<p>暂无建议 / No suggestions yet.</p>"
    rows = "".join(
        f"<tr><td>{n}</td><td>{e(s.question)}</td><td title='{e(s.entry_id)}'>{e(s.entry_query)}</td>"
        f"<td>{s.count}</td><td>{len(s.sessions)}</td><td>{e(' · '.join(VIA.get(v, v) for v in s.via))}</td></tr>"
        for n, s in enumerate(found, 1)
    )
    return (
        "<div style='overflow-x:auto'><table class='kb-suggestions'><tr><th>#</th><th>问题 / Question</th>"
        "<th>条目 / Entry</th><th>次数 / Times</th><th>对话 / Conversations</th><th>来自 / Via</th></tr>"
        f"{rows}</table></div>"
    )


class SuggestionHandlers:
    """Callbacks of the suggestions section (admins only)."""

    def __init__(self, turn_log: ConversationLog | None, editor: KnowledgeEditor):
        self.log = turn_log
        self.editor = editor

    def _pending(self) -> list[Suggestion]:
        return suggestions(self.log, self.editor.index.entries) if self.log is not None else []

    def refresh(self, status: str = ""):
        """(table html, choices, status html)."""
        found = self._pending()
        choices = [(f"{n}. {s.question} → {s.entry_query}", f"{s.norm}\t{s.entry_id}") for n, s in enumerate(found, 1)]
        return suggestions_html(found), gr.update(choices=choices, value=choices[0][1] if choices else None), status

    def _find(self, value: str | None) -> Suggestion | None:
        return next((s for s in self._pending() if f"{s.norm}\t{s.entry_id}" == value), None)

    def accept(self, value: str | None):
        """Add the chosen suggestion as a phrasing of its entry (locked, with history, indexed at once)."""
        found = self._find(value)
        if found is None:
            return gr.skip(), gr.skip(), "<div class='kb-notice'>❌ 请先选择一条建议 / Choose a suggestion first</div>"
        try:
            result = self.editor.add_phrasing(found.entry_id, found.question)
        except BotError as exc:
            return gr.skip(), gr.skip(), f"<div class='kb-notice'>❌ {e(str(exc))}</div>"
        return self.refresh(result_html(result))

    def reject(self, value: str | None):
        """Never suggest the chosen question for its entry again."""
        found = self._find(value)
        if found is None or self.log is None:
            return gr.skip(), gr.skip(), "<div class='kb-notice'>❌ 请先选择一条建议 / Choose a suggestion first</div>"
        self.log.reject_suggestion(found.norm, found.entry_id)
        return self.refresh(f"<div class='kb-ok'>✅ 已拒绝 / Rejected: {e(found.question)}</div>")


def suggestions_section(
    turn_log: ConversationLog | None, editor: KnowledgeEditor
) -> tuple[SuggestionHandlers, list[Any]]:
    """Lay out and wire the section inside the current (admin-only) Blocks context; (handlers, outputs)."""
    h = SuggestionHandlers(turn_log, editor)
    with gr.Accordion("建议的问法 / Suggested phrasings", open=False, elem_id="kb-suggestions"):
        gr.Markdown(
            "用户通过澄清、确认或“您是不是想问”找到了答案的问题；采纳后成为该条目的问法。/ Questions users resolved "
            "through clarify, confirm or “did you mean”; accept one to make it a phrasing of that entry."
        )
        table = gr.HTML(elem_id="kb-suggestions-table")
        pick = gr.Dropdown([], label="选择建议 / Choose a suggestion", elem_id="kb-suggestions-pick")
        with gr.Row():
            accept = gr.Button("采纳 / Accept", variant="primary", elem_id="kb-suggestions-accept")
            reject = gr.Button("拒绝 / Reject", variant="stop", elem_id="kb-suggestions-reject")
            refresh = gr.Button("刷新 / Refresh", elem_id="kb-suggestions-refresh")
        status = gr.HTML(elem_id="kb-suggestions-status")
    outputs = [table, pick, status]
    refresh.click(h.refresh, None, outputs, api_name="suggestions")
    accept.click(h.accept, [pick], outputs, api_name="suggestions_accept")
    reject.click(h.reject, [pick], outputs, api_name="suggestions_reject")
    return h, outputs
