"""The knowledge tab: browse, add, edit, delete entries, import and export files, through the core's KnowledgeEditor.

A new entry and an edit are distinct: the form edits an entry only after it was loaded (from the key list or the
table), and the save then carries the version loaded, so a change made meanwhile is refused, never overwritten. A
new entry is saved with ``expected_version=ABSENT`` (refused when the key exists) and the form is cleared for the
next one. Delete asks for confirmation and carries the loaded version too.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from bot.editing.editor import EditResult, KnowledgeEditor, file_name
from bot.editing.entry_table import HitCounts
from bot.errors import BotError, KnowledgeError
from bot.knowledge_base import KnowledgeBase
from bot.texts import NEW_MODE, NOT_LOADED
from bot.ui.admin import fill_for_admins
from bot.ui.downloads import export_file, template_file
from bot.ui.entry_browser import EntryBrowser, entry_browser
from bot.ui.events import PRIVATE
from bot.ui.guard import ClientLimits, write_guard
from bot.ui.indexing import indexing_progress
from bot.ui.render import health_html
from bot.ui.restore import restore_section

e = html.escape
MAX_KEY_CHOICES = 500  # a huge file's keys are found through the table instead


def _error_html(exc: BotError) -> str:
    if isinstance(exc, KnowledgeError):
        items = "".join(f"<li>{e(str(p))}</li>" for p in exc.problems)
        return f"<div class='kb-notice'>❌ 未保存，请修正 / Not saved, please fix:<ul>{items}</ul></div>"
    return f"<div class='kb-notice'>❌ {e(str(exc))}</div>"


def result_html(result: EditResult) -> str:
    """What an edit did; when another file's errors kept the index from updating, those errors in full."""
    if result.knowledge_error:
        return (
            f"<div class='kb-notice'>✅ {e(result.done)}<br>⚠️ 但其他知识文件有错误，索引未更新 / but another "
            f"knowledge file has errors, the index was not updated:<pre>{e(result.knowledge_error)}</pre></div>"
        )
    if result.pending:
        done = ", ".join(f"{e(name)} {n}" for name, n in result.progress) or "—"
        return (
            f"<div class='kb-ok'>✅ {e(result.done)} · 已写入磁盘 / saved to disk<br>⏳ 索引正在后台更新，稍后生效 / the "
            f"index is updating in the background; the chat answers from it in a moment (已索引 / indexed so far: "
            f"{done})</div>"
        )
    return f"<div class='kb-ok'>✅ {e(result.done)} · 索引已更新 / index updated ({result.entries} entries)</div>"


def mode_html(loaded: dict | None) -> str:
    """Whether the form adds a new entry or edits a loaded one (and which)."""
    if not loaded:
        return NEW_MODE
    return (
        f"<div class='kb-mode'>✏️ 编辑 / Editing {e(loaded['file'])} · {e(loaded['key'])} "
        f"<small>(版本 / version {e(loaded['version'])})</small></div>"
    )


def _editing(loaded: dict | None, file: str | None, key: str | None) -> bool:
    return bool(loaded and loaded["file"] == file_name(file) and loaded["key"] == (key or "").strip())


def phrasings_text(questions: tuple[str, ...] | list[str]) -> str:
    """An entry's other phrasings as the form shows them: one per line."""
    return "\n".join(questions)


def parse_phrasings(text: str | None) -> list[str] | None:
    """The form's phrasings, one per line; None (not sent, e.g. an older API call) keeps the entry's own."""
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def read_upload(path: Path) -> str:
    """An uploaded file's text: UTF-8 (a BOM is fine), or for CSV also GB18030 (what Chinese Excel saves)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        if path.suffix.lower() != ".csv":
            raise
        return data.decode("gb18030")


class KnowledgeHandlers:
    """Callbacks of the knowledge tab: they translate form values to KnowledgeEditor calls and results to HTML."""

    def __init__(self, editor: KnowledgeEditor):
        self.editor = editor

    def key_choices(self, file: str | None, value: str | None = None):
        """The key list of ``file`` (the first MAX_KEY_CHOICES) with ``value`` chosen."""
        return gr.update(choices=self.editor.keys(file)[:MAX_KEY_CHOICES], value=value)

    def first_file(self):
        """(file selector, key selector) of a fresh page: the first file chosen, its keys one click away."""
        files = self.editor.files()
        first = files[0] if files else None
        return gr.update(choices=files, value=first), self.key_choices(first)

    def keys(self, file: str | None):
        """A file was chosen: its keys, and the form adds a new entry to it."""
        return self.key_choices(file), None, NEW_MODE

    def load(self, file: str | None, key: str | None):
        """Load an entry to edit: (query, document, metadata, phrasings, file, key, loaded state, mode html,
        confirm row)."""
        fields = self.editor.entry(file, key)
        if fields is None:
            return (gr.skip(),) * 6 + (None, NEW_MODE, gr.update(visible=False))
        loaded = {"file": file_name(file), "key": key, "version": fields.version}
        return (
            fields.query,
            fields.document,
            fields.metadata,
            phrasings_text(fields.questions),
            gr.update(value=loaded["file"]),
            self.key_choices(file, key),
            loaded,
            mode_html(loaded),
            gr.update(visible=False),
        )

    def choose(self, file: str | None, key: str | None, loaded: dict | None):
        """A key was picked or typed: load that entry when it exists, else the form adds a new one (same outputs
        as :meth:`load`). One event does both, so a second handler cannot overwrite the mode line afterwards."""
        if _editing(loaded, file, key) or self.editor.entry(file, key) is None:
            return (gr.skip(),) * 7 + (self.mode(file, key, loaded), gr.skip())
        return self.load(file, key)

    def pick(self, evt: gr.SelectData):
        """A table row was clicked: load its entry (same outputs as :meth:`load`)."""
        row = evt.row_value or []
        return self.load(row[0], row[1]) if len(row) > 1 else self.load(None, None)

    def new(self, file: str | None):
        """Clear the form (phrasings too) for a new entry in the same file."""
        return self.key_choices(file), "", "", "", "", None, NEW_MODE, "", gr.update(visible=False)

    def save(
        self,
        file: str | None,
        key: str | None,
        query: str,
        document: str,
        metadata: str,
        loaded: dict | None = None,
        phrasings: str | None = None,
    ):
        """Edit the loaded entry (with its version) or add a new one (never overwriting); returns
        (status, file, key, query, document, metadata, phrasings, loaded state, mode html)."""
        editing = _editing(loaded, file, key)
        questions = parse_phrasings(phrasings)
        try:
            if editing:
                assert loaded is not None  # _editing is true only for a loaded entry
                result = self.editor.save(
                    file, key, query, document, metadata, expected_version=loaded["version"], questions=questions
                )
            else:
                result = self.editor.add(file, key, query, document, metadata, questions=questions)
        except BotError as exc:
            return (_error_html(exc),) + (gr.skip(),) * 8
        files = gr.update(choices=self.editor.files(), value=result.file)
        if editing:
            assert loaded is not None  # _editing is true only for a loaded entry
            fields = self.editor.entry(result.file, result.key)
            loaded = {**loaded, "version": fields.version} if fields else None
            return (
                result_html(result),
                files,
                self.key_choices(result.file, result.key),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                loaded,
                mode_html(loaded),
            )
        return result_html(result), files, self.key_choices(result.file), "", "", "", "", None, NEW_MODE

    @staticmethod
    def mode(file: str | None, key: str | None, loaded: dict | None) -> str:
        """The mode line after the key was typed: editing only while file and key are the loaded entry's."""
        return mode_html(loaded) if _editing(loaded, file, key) else NEW_MODE

    def ask_delete(self, loaded: dict | None):
        """First click on Delete: name the loaded entry and show the confirm button (status, confirm row, text)."""
        if not loaded:
            return NOT_LOADED, gr.update(visible=False), ""
        what = f"{loaded['file']} · {loaded['key']}"
        return "", gr.update(visible=True), f"<b>确定删除 {e(what)}？/ Delete {e(what)}?</b>"

    def delete(self, loaded: dict | None):
        """Confirmed: delete the loaded entry if unchanged since loading; returns
        (status, key, query, document, metadata, phrasings, loaded state, mode html, confirm row)."""
        hide = gr.update(visible=False)
        if not loaded:
            return ("<div class='kb-notice'>❌ 没有载入的条目 / No entry is loaded</div>",) + (gr.skip(),) * 7 + (hide,)
        try:
            result = self.editor.delete(loaded["file"], loaded["key"], expected_version=loaded["version"])
        except BotError as exc:
            return (_error_html(exc),) + (gr.skip(),) * 7 + (hide,)
        return result_html(result), self.key_choices(result.file), "", "", "", "", None, NEW_MODE, hide

    def upload(self, path: str | None, overwrite: bool):
        """Import an uploaded JSON file, or merge a CSV's or an Excel sheet's rows; returns (status html, file choices)."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>", gr.skip()
        try:
            suffix, name = Path(path).suffix.lower(), Path(path).name
            if suffix == ".xlsx":
                result = self.editor.import_csv(name, Path(path).read_bytes())
            elif suffix == ".csv":
                result = self.editor.import_csv(name, read_upload(Path(path)))
            else:
                result = self.editor.import_file(name, read_upload(Path(path)), bool(overwrite))
        except UnicodeDecodeError:
            return "<div class='kb-notice'>❌ 文件不是 UTF-8 文本 / The file is not UTF-8 text</div>", gr.skip()
        except BotError as exc:
            return _error_html(exc), gr.skip()
        return result_html(result), gr.update(choices=self.editor.files())

    def export(self) -> str:
        """Write every entry the index serves now to a CSV file; returns its path (the page offers it to download)."""
        return export_file(self.editor.export_csv())


def knowledge_tab(
    kb: KnowledgeBase,
    hit_counts: Callable[[], HitCounts] | None = None,
    limits: ClientLimits | None = None,
) -> None:
    """Lay out and wire the knowledge tab inside the current Blocks context.

    ``hit_counts`` (e.g. TurnLog.hit_counts) fills the table's hit columns; by default the hit counts of the
    knowledge base's conversation log (``kb.log``) when it records, else they show "—".
    """
    k = KnowledgeHandlers(kb.editor)
    # the hit counts of the conversation log, when it records
    browser = EntryBrowser(k.editor, hit_counts or (kb.log.hit_counts if kb.log is not None else None))
    gr.Markdown(
        "在这里浏览、增删改知识条目，保存后立即生效（与直接编辑 knowledge/ 中的文件效果相同）。"
        "/ Browse, add, edit or delete entries here; changes apply at once (same as editing files in knowledge/)."
    )
    # Filled when an admin's page loads (fill_for_admins below): a broken file or config edit, in full.
    health = gr.HTML(elem_id="kb-k-health")
    search, page, table, info = entry_browser(browser)
    loaded = gr.State(None)
    mode = gr.HTML(NEW_MODE, elem_id="kb-k-mode")
    with gr.Row():
        file = gr.Dropdown(
            [],
            label="文件（可输入新文件名）/ File (type a new name to create one)",
            allow_custom_value=True,
            elem_id="kb-k-file",
        )
        key = gr.Dropdown(
            [],
            label="条目键（新条目留空自动编号）/ Entry key (new entry: empty = next number)",
            allow_custom_value=True,
            elem_id="kb-k-key",
        )
    query = gr.Textbox(label="问题/标题 query", elem_id="kb-k-query")
    document = gr.Textbox(label="内容 document", lines=4, elem_id="kb-k-document")
    metadata = gr.Textbox(label="关键词 metadata（逗号分隔 / comma-separated）", elem_id="kb-k-metadata")
    # value=None: an API caller that does not send phrasings keeps the entry's own (see parse_phrasings).
    questions = gr.Textbox(
        None,
        label="其他问法 questions（每行一个 / one per line）",
        lines=2,
        elem_id="kb-k-questions",
    )
    with gr.Row():
        new = gr.Button("新建条目 / New entry", elem_id="kb-k-new")
        save = gr.Button("保存 / Save", variant="primary", elem_id="kb-k-save")
        delete = gr.Button("删除… / Delete…", variant="stop", elem_id="kb-k-delete")
    with gr.Row(visible=False, elem_id="kb-k-confirm-row") as confirm_row:
        confirm_text = gr.HTML(elem_id="kb-k-confirm-text")
        confirm = gr.Button("确认删除 / Yes, delete", variant="stop", elem_id="kb-k-delete-confirm")
        cancel = gr.Button("取消 / Cancel", elem_id="kb-k-delete-cancel")
    status = gr.HTML(elem_id="kb-k-status")
    with gr.Accordion("导入与导出 / Import and export", open=False):
        gr.Markdown(
            "JSON 知识文件，或 CSV（列 / columns: file, key, query, document, metadata, questions；"
            "问法用 | 或换行分隔 / phrasings separated by | or line breaks）。CSV 按 file+key 合并 / CSV rows "
            "merge by file+key; 没有 file 的行进入与 CSV 同名的 .json / rows without a file go to the "
            "CSV's name + .json; 没有 key 的行自动编号 / rows without a key get the next number. "
            "Excel .xlsx 同样导入（第一个工作表）/ Excel .xlsx imports the same (first sheet); 也认常见表头 / "
            "common headers work too: 问题/标准问题/question, 答案/answer, 关键词/keywords, 相似问题, 分类/category."
        )
        upload = gr.File(
            file_types=[".json", ".csv", ".xlsx"],
            type="filepath",
            label="知识文件 / Knowledge file (JSON, CSV, Excel .xlsx)",
            elem_id="kb-k-upload",
        )
        overwrite = gr.Checkbox(False, label="覆盖同名 JSON 文件 / Overwrite a JSON file with the same name")
        do_upload = gr.Button("导入 / Import", elem_id="kb-k-import")
        imported = gr.HTML(elem_id="kb-k-import-status")  # right under the button, not at the form far above
        with gr.Row():
            export = gr.Button("导出全部为 CSV / Export all as CSV", elem_id="kb-k-export")
            template = gr.DownloadButton("下载 CSV 模板 / Download the CSV template", elem_id="kb-k-template")
        exported = gr.File(label="导出文件 / Export", interactive=False, elem_id="kb-k-export-file")

    table_out = [table, info, page]

    def admin_page():
        rows, page_line, _ = browser.show("", 1)
        return health_html(kb.bot.status()), rows, page_line, *k.first_file(), template_file()

    fill_for_admins(admin_page, [health, table, info, file, key, template])
    form = [query, document, metadata, questions, file, key, loaded, mode, confirm_row]
    file.input(k.keys, [file], [key, loaded, mode], **PRIVATE)
    key.input(k.choose, [file, key, loaded], form, **PRIVATE)
    table.select(k.pick, None, form, **PRIVATE)
    new.click(k.new, [file], [key, query, document, metadata, questions, loaded, mode, status, confirm_row], **PRIVATE)
    # API: /entry loads (file, key) for editing in this session; /save_entry then edits it, else adds a new one.
    load_btn = gr.Button(visible=False, elem_id="kb-k-load")
    load_btn.click(k.load, [file, key], form, api_name="entry")
    guard = write_guard(limits)  # saves, deletes and imports: limited per client address; uploads deleted after
    saved = save.click(
        guard(k.save, 9),
        [file, key, query, document, metadata, loaded, questions],
        [status, file, key, query, document, metadata, questions, loaded, mode],
        api_name="save_entry",
    ).then(browser.show, [search, page], table_out, **PRIVATE)
    delete.click(k.ask_delete, [loaded], [status, confirm_row, confirm_text], **PRIVATE)
    cancel.click(lambda: gr.update(visible=False), None, [confirm_row], **PRIVATE)
    deleted = confirm.click(
        guard(k.delete, 9),
        [loaded],
        [status, key, query, document, metadata, questions, loaded, mode, confirm_row],
        api_name="delete_entry",
    ).then(browser.show, [search, page], table_out, **PRIVATE)
    uploaded = do_upload.click(
        guard(k.upload, 2, discard_upload=True), [upload, overwrite], [imported, file], api_name="upload_file"
    )
    uploaded.then(browser.show, [search, page], table_out, **PRIVATE)
    export.click(k.export, None, [exported], api_name="export_csv")
    restored = restore_section(k.editor, file, status, guard, result_html, _error_html)
    restored.then(browser.show, [search, page], table_out, **PRIVATE)
    indexing_progress(kb.index, [saved, deleted, uploaded, restored])
