"""The knowledge tab: add, edit, delete entries and upload files through the core's KnowledgeEditor."""

from __future__ import annotations

import html
from pathlib import Path

import gradio as gr

from bot.chat.bot import Bot
from bot.chat.knowledge_edit import EditResult, KnowledgeEditor
from bot.errors import BotError, KnowledgeError
from bot.knowledge.store import KnowledgeStore
from bot.ui.render import knowledge_error_html

e = html.escape


def _error_html(exc: BotError) -> str:
    if isinstance(exc, KnowledgeError):
        items = "".join(f"<li>{e(str(p))}</li>" for p in exc.problems)
        return f"<div class='kb-notice'>❌ 未保存，请修正 / Not saved, please fix:<ul>{items}</ul></div>"
    return f"<div class='kb-notice'>❌ {e(str(exc))}</div>"


def result_html(result: EditResult) -> str:
    """What an edit did; when another file's errors kept the index from updating, those errors in full."""
    if result.knowledge_error:
        return (f"<div class='kb-notice'>✅ {e(result.done)}<br>⚠️ 但其他知识文件有错误，索引未更新 / but another "
                f"knowledge file has errors, the index was not updated:<pre>{e(result.knowledge_error)}</pre></div>")
    return (f"<div class='kb-ok'>✅ {e(result.done)} · 索引已更新 / index updated "
            f"({result.entries} entries)</div>")


class KnowledgeHandlers:
    """Callbacks of the knowledge tab: they translate form values to KnowledgeEditor calls and results to HTML."""

    def __init__(self, editor: KnowledgeEditor):
        self.editor = editor

    def keys(self, file: str | None):
        """Key choices for the chosen file (empty for a new file)."""
        return gr.update(choices=self.editor.keys(file), value=None)

    def entry(self, file: str | None, key: str | None):
        """(query, document, metadata) of an existing entry, to edit it in the form."""
        fields = self.editor.entry(file, key)
        if fields is None:
            return gr.skip(), gr.skip(), gr.skip()
        return fields.query, fields.document, fields.metadata

    def save(self, file: str | None, key: str | None, query: str, document: str, metadata: str):
        """Add or edit one entry; returns (status html, file choices, key choices)."""
        try:
            result = self.editor.save(file, key, query, document, metadata)
        except BotError as exc:
            return _error_html(exc), gr.skip(), gr.skip()
        return (result_html(result), gr.update(choices=self.editor.files(), value=result.file),
                gr.update(choices=self.editor.keys(result.file), value=result.key))

    def delete(self, file: str | None, key: str | None):
        """Delete one entry; returns (status html, key choices)."""
        try:
            result = self.editor.delete(file, key)
        except BotError as exc:
            return _error_html(exc), gr.skip()
        return result_html(result), gr.update(choices=self.editor.keys(result.file), value=None)

    def upload(self, path: str | None, overwrite: bool):
        """Import an uploaded JSON file; returns (status html, file choices)."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>", gr.skip()
        try:
            result = self.editor.import_file(Path(path).name, Path(path).read_text(encoding="utf-8"), bool(overwrite))
        except UnicodeDecodeError:
            return "<div class='kb-notice'>❌ 文件不是 UTF-8 文本 / The file is not UTF-8 text</div>", gr.skip()
        except BotError as exc:
            return _error_html(exc), gr.skip()
        return result_html(result), gr.update(choices=self.editor.files())


def knowledge_tab(bot: Bot, store: KnowledgeStore) -> None:
    """Lay out and wire the knowledge tab inside the current Blocks context."""
    k = KnowledgeHandlers(bot.editor(store))
    gr.Markdown("在这里增删改知识条目，保存后立即生效（与直接编辑 knowledge/ 中的文件效果相同）。"
                "/ Add, edit or delete entries here; changes apply at once (same as editing files in knowledge/).")
    # Rendered at each page load from the status (no side effects): the detail of a broken file, for admins.
    gr.HTML(lambda: knowledge_error_html(bot.status().knowledge_error), elem_id="kb-k-health")
    with gr.Row():
        file = gr.Dropdown(k.editor.files(), label="文件（可输入新文件名）/ File (type a new name to create one)",
                           allow_custom_value=True, elem_id="kb-k-file")
        key = gr.Dropdown([], label="条目键（留空自动编号）/ Entry key (empty = next number)",
                          allow_custom_value=True, elem_id="kb-k-key")
    query = gr.Textbox(label="问题/标题 query", elem_id="kb-k-query")
    document = gr.Textbox(label="内容 document", lines=4, elem_id="kb-k-document")
    metadata = gr.Textbox(label="关键词 metadata（逗号分隔 / comma-separated）", elem_id="kb-k-metadata")
    with gr.Row():
        save = gr.Button("保存 / Save", variant="primary", elem_id="kb-k-save")
        delete = gr.Button("删除 / Delete", variant="stop", elem_id="kb-k-delete")
    with gr.Accordion("上传 JSON 文件 / Upload a JSON file", open=False):
        upload = gr.File(file_types=[".json"], type="filepath", label="知识文件 / Knowledge file", elem_id="kb-k-upload")
        overwrite = gr.Checkbox(False, label="覆盖同名文件 / Overwrite a file with the same name")
        do_upload = gr.Button("导入 / Import", elem_id="kb-k-import")
    status = gr.HTML(elem_id="kb-k-status")

    file.change(k.keys, [file], [key], api_name=False)
    key.change(k.entry, [file, key], [query, document, metadata], api_name="entry")
    save.click(k.save, [file, key, query, document, metadata], [status, file, key], api_name="save_entry")
    delete.click(k.delete, [file, key], [status, key], api_name="delete_entry")
    do_upload.click(k.upload, [upload, overwrite], [status, file], api_name="upload_file")
