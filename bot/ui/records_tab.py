"""The admin "条目记录 / Entry records" tab: every entry's record, sortable, filtered and exported.

Records come from bot/conversations/entry_records.py, filtered by a text (an entry id or words of its question),
exported as CSV or Excel.

The data come from the core; this module draws them. Every component starts empty: the tab's select (an admin
event) fills it. Exports go to one private folder, overwritten each time and removed at exit, as the analytics
tab's do.
"""

from __future__ import annotations

import atexit
import html
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from bot.conversations.entry_records import (
    PAGE_COLUMNS,
    EntryRecord,
    entry_records,
    page_row,
    records_csv,
    records_xlsx,
    sort_records,
)
from bot.conversations.log_store import ConversationLog
from bot.conversations.outcomes import Judge, read_turns
from bot.conversations.tiles import StatsFilter, parse_time
from bot.knowledge.edits import last_edits
from bot.knowledge.store import KnowledgeStore
from bot.knowledge_base import KnowledgeBase
from bot.search.index import KnowledgeIndex
from bot.texts import LOG_OFF
from bot.ui.events import PRIVATE

SORT_CHOICES = [
    ("失败最多 / Most failures", "failures"),
    ("命中最多 / Most hits", "hits"),
    ("解决率最低 / Lowest resolution rate", "resolution_rate:asc"),
    ("点踩最多 / Most thumbs down", "down"),
    ("重复提问最多 / Most re-asks", "reasked"),
    ("转人工最多 / Most hand-offs", "handoffs_after"),
    ("上升最快 / Rising fastest", "trend"),
    ("最近编辑 / Last edited", "last_edit"),
]


class RecordHandlers:
    """Callbacks of the records tab (admins only)."""

    def __init__(
        self,
        log: ConversationLog | None,
        index: KnowledgeIndex,
        store: KnowledgeStore,
        judge: Judge | None = None,
        export_dir: Path | None = None,
    ):
        self.log, self.index, self.store, self.judge = log, index, store, judge or Judge()
        self.export_dir = export_dir

    def records(self, since: str, text: str, sort: str) -> list[EntryRecord]:
        """The records over turns since ``since`` whose id or question contains ``text``, sorted by ``sort``.

        ``since`` is ISO (empty: the whole log), ``sort`` "name" or "name:asc"; ValueError for a bad date or sort.
        """
        log = self.log
        assert log is not None
        flt = StatsFilter(since=parse_time(since))
        turns = read_turns(log, flt)
        known = [(e.id, e.query) for e in self.index.entries]
        records = entry_records(
            turns, self.judge.answers(turns), known, now=log.clock(), last_edits=last_edits(self.store)
        )
        words = (text or "").casefold().split()
        records = [r for r in records if all(w in f"{r.id} {r.query}".casefold() for w in words)]
        by, _, order = (sort or "failures").partition(":")
        return sort_records(records, by, ascending=order == "asc")

    def show(self, since: str, text: str, sort: str):
        """(status html, table) for the tab's filter."""
        if self.log is None:
            return LOG_OFF, None
        try:
            records = self.records(since, text, sort)
        except ValueError as exc:
            return f"<div class='kb-notice'>{html.escape(str(exc))}</div>", None
        frame = pd.DataFrame([page_row(r) for r in records], columns=list(PAGE_COLUMNS))
        return f"<div class='kb-status'>{len(records)} 条 / entries</div>", frame

    def export(self, since: str, text: str, sort: str) -> Any:
        """The shown records as CSV and Excel files (their paths, for the download box)."""
        if self.log is None:
            return gr.update(visible=False)
        try:
            records = self.records(since, text, sort)
        except ValueError:
            return gr.update(visible=False)
        if self.export_dir is None:
            self.export_dir = Path(tempfile.mkdtemp(prefix="kbbot-records-"))
            atexit.register(shutil.rmtree, self.export_dir, ignore_errors=True)
        stamp = datetime.now(UTC).strftime("%Y%m%d")
        csv_path = self.export_dir / f"entry-records-{stamp}.csv"
        csv_path.write_text(records_csv(records), encoding="utf-8-sig")
        xlsx_path = self.export_dir / f"entry-records-{stamp}.xlsx"
        xlsx_path.write_bytes(records_xlsx(records))
        return gr.update(value=[str(csv_path), str(xlsx_path)], visible=True)


def records_page(kb: KnowledgeBase, judge: Judge | None = None) -> tuple[gr.Tab, gr.Textbox]:
    """The records tab, hidden until an admin's page loads and filled by its select (an admin event).

    Returns (tab, the filter box the knowledge tab fills with an entry's id).
    """
    h = RecordHandlers(kb.log, kb.index, kb.store, judge)
    with gr.Tab("条目记录 / Entry records", id="records", visible=False) as tab:
        with gr.Row():
            since = gr.Textbox(label="开始（ISO，UTC）/ Since", placeholder="2026-11-01", elem_id="kb-rec-since")
            text = gr.Textbox(label="条目 / Entry (id or words)", elem_id="kb-rec-text")
            sort = gr.Dropdown(SORT_CHOICES, value="failures", label="排序 / Sort", elem_id="kb-rec-sort")
            show = gr.Button("显示 / Show", variant="primary", elem_id="kb-rec-show")
            export = gr.Button("导出 CSV 和 Excel / Export CSV and Excel", elem_id="kb-rec-export")
        status = gr.HTML(elem_id="kb-rec-status")
        files = gr.File(
            label="导出 / Export", file_count="multiple", interactive=False, visible=False, elem_id="kb-rec-files"
        )
        table = gr.Dataframe(interactive=False, elem_id="kb-rec-table", max_height=520, wrap=True)
    inputs = [since, text, sort]
    show.click(h.show, inputs, [status, table], api_name="entry_records")
    text.submit(h.show, inputs, [status, table], **PRIVATE)
    sort.change(h.show, inputs, [status, table], **PRIVATE)
    export.click(h.export, inputs, [files], api_name="entry_records_export")
    tab.select(h.show, inputs, [status, table], **PRIVATE)
    return tab, text


# The knowledge tab's "this entry's record" opens the records tab: a click on its tab button (its select then
# shows the records filtered by the entry's id, which the click put in the filter first).
OPEN_RECORDS = """() => {
  const tab = [...document.querySelectorAll('button[role="tab"]')].find((b) => b.textContent.includes('条目记录'));
  if (tab) tab.click();
}"""


def link_records(button: gr.Button, loaded: gr.State, text: gr.Textbox) -> None:
    """Wire the knowledge tab's ``button``: the loaded entry's id into the records filter, then its tab opens."""
    button.click(
        lambda item: f"{Path(item['file']).stem}:{item['key']}" if item else "", [loaded], [text], **PRIVATE
    ).then(None, js=OPEN_RECORDS, **PRIVATE)
