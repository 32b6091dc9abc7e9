"""The knowledge tab's entry browser: a searchable table of every entry, one page at a time from the server."""

from __future__ import annotations

import html
from collections.abc import Callable

import gradio as gr

from bot.editing.editor import KnowledgeEditor
from bot.editing.entry_table import EntryPage, HitCounts, safe_hit_counts
from bot.ui.events import PRIVATE
from bot.ui.render import minute

HEADERS = [
    "文件 file",
    "键 key",
    "问题 query",
    "内容 document",
    "关键词 keywords",
    "其他问法 phrasings",
    "命中 hits",
    "最近命中 last hit (UTC)",
]
NONE = "—"


def table_rows(page: EntryPage) -> list[list[str]]:
    """The page's rows as table cells (text: the table shows it as text, never as HTML)."""
    return [
        [
            r.file,
            r.key,
            r.query,
            r.document,
            r.keywords,
            " | ".join(r.questions) or NONE,
            NONE if r.hits is None else str(r.hits),
            minute(r.last_hit) or NONE,
        ]
        for r in page.rows
    ]


def page_info(page: EntryPage, text: str) -> str:
    """'page 2 of 7, 342 entries' in both languages, as escaped HTML."""
    found = f"匹配“{html.escape(text.strip())}”的 / matching" if text and text.strip() else "全部 / all"
    return f"第 {page.page}/{page.pages} 页 · {found} {page.total} 条 / page {page.page} of {page.pages}, {page.total} entries"


class EntryBrowser:
    """Callbacks of the entry table: search and page on the server, so a 20k-entry folder sends only one page."""

    def __init__(self, editor: KnowledgeEditor, hit_counts: Callable[[], HitCounts] | None = None):
        self.editor = editor
        self.hit_counts = hit_counts

    def show(self, text: str | None, page: float | None):
        """(table rows, page info, page number) for the search ``text`` and page ``page``."""
        result = self.editor.page(text or "", int(page or 1), safe_hit_counts(self.hit_counts))
        return table_rows(result), page_info(result, text or ""), result.page

    def search(self, text: str | None):
        """The first page of a new search."""
        return self.show(text, 1)

    def previous(self, text: str | None, page: float | None):
        """The page before."""
        return self.show(text, int(page or 1) - 1)

    def next(self, text: str | None, page: float | None):
        """The page after."""
        return self.show(text, int(page or 1) + 1)


def entry_browser(browser: EntryBrowser):
    """Lay out the table inside the current Blocks context; returns (search box, page number, table, info)."""
    with gr.Row():
        search = gr.Textbox(
            placeholder="搜索问题、内容、关键词、问法、键（回车）/ Search every field (Enter)",
            show_label=False,
            scale=4,
            elem_id="kb-eb-search",
        )
        go = gr.Button("搜索 / Search", scale=1, elem_id="kb-eb-go")
    # Empty until an admin's page loads (the knowledge tab fills it): a value here would be in /config.
    table = gr.Dataframe(
        headers=HEADERS,
        datatype="str",
        interactive=False,
        wrap=True,
        max_height=420,
        column_widths=["9%", "6%", "17%", "30%", "11%", "12%", "6%", "9%"],
        label="条目（点击一行载入编辑）/ Entries (click a row to edit it)",
        elem_id="kb-eb-table",
    )
    with gr.Row():
        prev = gr.Button("上一页 / Previous", size="sm", elem_id="kb-eb-prev")
        page = gr.Number(1, precision=0, minimum=1, label="页 / Page", scale=0, min_width=90, elem_id="kb-eb-page")
        nxt = gr.Button("下一页 / Next", size="sm", elem_id="kb-eb-next")
        info = gr.HTML(elem_id="kb-eb-info")
    out = [table, info, page]
    search.submit(browser.search, [search], out, api_name="entry_table")
    go.click(browser.search, [search], out, **PRIVATE)
    prev.click(browser.previous, [search, page], out, **PRIVATE)
    nxt.click(browser.next, [search, page], out, **PRIVATE)
    page.submit(browser.show, [search, page], out, **PRIVATE)
    return search, page, table, info
