"""The knowledge tab: add, edit, delete entries and upload files, validated like files on disk."""

from __future__ import annotations

import html
from pathlib import Path

import gradio as gr

from bot.chat.bot import Bot
from bot.errors import BotError, KnowledgeError
from bot.knowledge.store import KnowledgeStore

e = html.escape


def _error_html(exc: BotError) -> str:
    if isinstance(exc, KnowledgeError):
        items = "".join(f"<li>{e(str(p))}</li>" for p in exc.problems)
        return f"<div class='kb-notice'>❌ 未保存，请修正 / Not saved, please fix:<ul>{items}</ul></div>"
    return f"<div class='kb-notice'>❌ {e(str(exc))}</div>"


def _file_name(file: str | None) -> str:
    file = (file or "").strip()
    return file if not file or file.endswith(".json") else f"{file}.json"


class KnowledgeHandlers:
    """Callbacks of the knowledge tab; every write refreshes the index at once (incrementally)."""

    def __init__(self, bot: Bot, store: KnowledgeStore):
        self.bot = bot
        self.store = store

    def _refreshed(self, done: str) -> str:
        self.bot.index.refresh(force=True)
        if self.bot.index.error:
            return (f"<div class='kb-notice'>✅ {e(done)}<br>⚠️ 但其他知识文件有错误，索引未更新 / but another knowledge file has errors, "
                    f"the index was not updated:<pre>{e(str(self.bot.index.error))}</pre></div>")
        return f"<div class='kb-ok'>✅ {e(done)} · 索引已更新 / index updated ({len(self.bot.index.entries)} entries)</div>"

    def keys(self, file: str | None):
        """Key choices for the chosen file (empty for a new file)."""
        file = _file_name(file)
        try:
            keys = [k for k, _ in self.store.entries(file)] if file in self.store.files() else []
        except BotError:
            keys = []
        return gr.update(choices=keys, value=None)

    def entry(self, file: str | None, key: str | None):
        """(query, document, metadata) of an existing entry, to edit it in the form."""
        file = _file_name(file)
        for k, raw in (self.store.entries(file) if file in self.store.files() and key else []):
            if k == key and isinstance(raw, dict):
                meta = raw.get("metadata") or ""
                return raw.get("query", ""), raw.get("document", ""), ",".join(meta) if isinstance(meta, list) else meta
        return gr.skip(), gr.skip(), gr.skip()

    def save(self, file: str | None, key: str | None, query: str, document: str, metadata: str):
        """Add or edit one entry; returns (status html, file choices, key choices)."""
        file = _file_name(file)
        if not file:
            return "<div class='kb-notice'>❌ 请选择或输入文件名 / Choose or type a file name</div>", gr.skip(), gr.skip()
        try:
            entry_id = self.store.upsert_entry(file, (key or "").strip() or None, query or "", document or "", metadata or "")
        except BotError as exc:
            return _error_html(exc), gr.skip(), gr.skip()
        new_key = entry_id.split(":", 1)[1]
        keys = [k for k, _ in self.store.entries(file)]
        return (self._refreshed(f"已保存 / Saved {entry_id}"), gr.update(choices=self.store.files(), value=file),
                gr.update(choices=keys, value=new_key))

    def delete(self, file: str | None, key: str | None):
        """Delete one entry; returns (status html, key choices)."""
        file = _file_name(file)
        if not file or not key:
            return "<div class='kb-notice'>❌ 请选择文件和条目 / Choose a file and an entry</div>", gr.skip()
        try:
            self.store.delete_entry(file, key)
        except BotError as exc:
            return _error_html(exc), gr.skip()
        keys = [k for k, _ in self.store.entries(file)]
        return self._refreshed(f"已删除 / Deleted {Path(file).stem}:{key}"), gr.update(choices=keys, value=None)

    def upload(self, path: str | None, overwrite: bool):
        """Import an uploaded JSON file; returns (status html, file choices)."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>", gr.skip()
        try:
            text = Path(path).read_text(encoding="utf-8")
            ids = self.store.import_file(Path(path).name, text, overwrite=bool(overwrite))
        except UnicodeDecodeError:
            return "<div class='kb-notice'>❌ 文件不是 UTF-8 文本 / The file is not UTF-8 text</div>", gr.skip()
        except BotError as exc:
            return _error_html(exc), gr.skip()
        return self._refreshed(f"已导入 / Imported {Path(path).name}: {len(ids)} entries"), gr.update(choices=self.store.files())


def knowledge_tab(bot: Bot, store: KnowledgeStore) -> None:
    """Lay out and wire the knowledge tab inside the current Blocks context."""
    k = KnowledgeHandlers(bot, store)
    gr.Markdown("在这里增删改知识条目，保存后立即生效（与直接编辑 knowledge/ 中的文件效果相同）。"
                "/ Add, edit or delete entries here; changes apply at once (same as editing files in knowledge/).")
    with gr.Row():
        file = gr.Dropdown(store.files(), label="文件（可输入新文件名）/ File (type a new name to create one)",
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
