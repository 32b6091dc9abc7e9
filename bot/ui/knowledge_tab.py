"""The knowledge tab: browse, add, edit, delete entries, import and export files, through the core's KnowledgeEditor.

A new entry and an edit are distinct: the form edits an entry only after it was loaded (from the key list or the
table), and the save then carries the version loaded, so a change made meanwhile is refused, never overwritten. A
new entry is saved with ``expected_version=ABSENT`` (refused when the key exists) and the form is cleared for the
next one. Delete asks for confirmation and carries the loaded version too.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import gradio as gr

from bot.editing.editor import EditResult, KnowledgeEditor, file_name
from bot.editing.entry_table import HitCounts
from bot.errors import BotError, KnowledgeError
from bot.knowledge import csv_io
from bot.knowledge.assets import AssetStore
from bot.knowledge.store import ABSENT, KnowledgeStore
from bot.knowledge.validity import Publication
from bot.knowledge_base import KnowledgeBase
from bot.texts import NEW_MODE, NOT_LOADED
from bot.ui.admin import fill_for_admins
from bot.ui.asset_upload import asset_section, markup_html
from bot.ui.downloads import export_file, template_file
from bot.ui.entry_browser import EntryBrowser, entry_browser
from bot.ui.events import PRIVATE
from bot.ui.guard import ClientLimits, write_guard
from bot.ui.indexing import indexing_progress
from bot.ui.render import health_html
from bot.ui.restore import restore_section
from bot.ui.review import NEEDS_PUBLISHER, EditReview, replay_html

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


def imported(store: KnowledgeStore, name: str, data: str | bytes, overwrite: bool) -> list[str]:
    """Import an upload into ``store`` as the tab would (CSV and Excel rows merge by file and key); the ids."""
    default = PurePosixPath(name).stem + ".json"
    if isinstance(data, bytes):
        return csv_io.import_xlsx(store, data, default, name)
    if name.lower().endswith(".csv"):
        return csv_io.import_csv(store, data, default, name)
    return store.import_file(name, data, overwrite=overwrite)


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

    def __init__(self, editor: KnowledgeEditor, review: EditReview | None = None, assets: AssetStore | None = None):
        self.editor = editor
        self.review = review or EditReview(None)
        self.assets = assets  # the saved document's markup is checked against them (None: not checked)

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
            return (gr.skip(),) * 6 + (None, NEW_MODE, gr.update(visible=False)) + (gr.skip(),) * 3
        loaded = {"file": file_name(file), "key": key, "version": fields.version, "draft": fields.publication.draft}
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
            fields.publication.draft,
            fields.publication.valid_from or "",
            fields.publication.valid_until or "",
        )

    def choose(self, file: str | None, key: str | None, loaded: dict | None):
        """A key was picked or typed: load that entry when it exists, else the form adds a new one (same outputs
        as :meth:`load`). One event does both, so a second handler cannot overwrite the mode line afterwards."""
        if _editing(loaded, file, key) or self.editor.entry(file, key) is None:
            return (gr.skip(),) * 7 + (self.mode(file, key, loaded), gr.skip()) + (gr.skip(),) * 3
        return self.load(file, key)

    def pick(self, evt: gr.SelectData):
        """A table row was clicked: load its entry (same outputs as :meth:`load`)."""
        row = evt.row_value or []
        return self.load(row[0], row[1]) if len(row) > 1 else self.load(None, None)

    def new(self, file: str | None):
        """Clear the form (phrasings too) for a new entry in the same file."""
        return self.key_choices(file), "", "", "", "", None, NEW_MODE, "", gr.update(visible=False), False, "", ""

    def save(
        self,
        file: str | None,
        key: str | None,
        query: str,
        document: str,
        metadata: str,
        loaded: dict | None = None,
        phrasings: str | None = None,
        draft: bool | None = None,
        valid_from: str | None = None,
        valid_until: str | None = None,
        confirmed: bool = False,
        request: Any = None,
    ):
        """Edit the loaded entry (with its version) or add a new one (never overwriting); returns
        (status, file, key, query, document, metadata, phrasings, loaded state, mode html, confirm row).

        A change that publishes is replayed first; when answers would be lost or change entry it is not saved: the
        diff shows, and the confirm row saves it anyway. With approval required only a publisher publishes."""
        editing = _editing(loaded, file, key)
        questions = parse_phrasings(phrasings)
        publication = None if draft is None else Publication(bool(draft), valid_from, valid_until)
        hide = gr.update(visible=False)
        problems = publication.problems() if publication is not None else []
        if problems:
            return (f"<div class='kb-notice'>❌ {e('; '.join(problems))}</div>",) + (gr.skip(),) * 8 + (hide,)
        drafting = publication is not None and publication.draft and (not editing or bool((loaded or {}).get("draft")))
        if not drafting and not self.review.may_publish(request):
            return (f"<div class='kb-notice'>❌ {e(NEEDS_PUBLISHER)}</div>",) + (gr.skip(),) * 8 + (hide,)
        expected = loaded["version"] if editing and loaded else ABSENT
        diff = ""
        if not drafting:
            held, diff = self.review.hold(
                lambda s: [
                    s.upsert_entry(
                        file_name(file),
                        (key or "").strip() or None,
                        query or "",
                        document or "",
                        metadata or "",
                        expected_version=expected,
                        questions=questions,
                        publication=publication,
                    )
                ],
                confirmed,
            )
            if held is not None:
                return (held,) + (gr.skip(),) * 8 + (gr.update(visible=True),)
        try:
            if editing:
                assert loaded is not None  # _editing is true only for a loaded entry
                result = self.editor.save(
                    file,
                    key,
                    query,
                    document,
                    metadata,
                    expected_version=loaded["version"],
                    questions=questions,
                    publication=publication,
                )
            else:
                result = self.editor.add(
                    file, key, query, document, metadata, questions=questions, publication=publication
                )
        except BotError as exc:
            return (_error_html(exc),) + (gr.skip(),) * 8 + (hide,)
        files = gr.update(choices=self.editor.files(), value=result.file)
        diff += markup_html(document, self.assets) if self.assets is not None else ""
        if editing:
            assert loaded is not None  # _editing is true only for a loaded entry
            fields = self.editor.entry(result.file, result.key)
            loaded = {**loaded, "version": fields.version, "draft": fields.publication.draft} if fields else None
            return (
                result_html(result) + diff,
                files,
                self.key_choices(result.file, result.key),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                gr.skip(),
                loaded,
                mode_html(loaded),
                hide,
            )
        return result_html(result) + diff, files, self.key_choices(result.file), "", "", "", "", None, NEW_MODE, hide

    @staticmethod
    def mode(file: str | None, key: str | None, loaded: dict | None) -> str:
        """The mode line after the key was typed: editing only while file and key are the loaded entry's."""
        return mode_html(loaded) if _editing(loaded, file, key) else NEW_MODE

    def ask_delete(self, loaded: dict | None):
        """First click on Delete: name the loaded entry, show what the deletion would change for real questions
        (the replay), and the confirm button (status, confirm row, text)."""
        if not loaded:
            return NOT_LOADED, gr.update(visible=False), ""
        what = f"{loaded['file']} · {loaded['key']}"

        def deleting(scratch: KnowledgeStore) -> list[str]:
            scratch.delete_entry(loaded["file"], loaded["key"])
            return []

        replay = self.review.replay(deleting)
        diff = replay_html(replay, replay.needs_confirmation) if replay is not None else ""
        return "", gr.update(visible=True), f"<b>确定删除 {e(what)}？/ Delete {e(what)}?</b>{diff}"

    def delete(self, loaded: dict | None, request: Any = None):
        """Confirmed: delete the loaded entry if unchanged since loading; returns
        (status, key, query, document, metadata, phrasings, loaded state, mode html, confirm row)."""
        hide = gr.update(visible=False)
        if not loaded:
            return ("<div class='kb-notice'>❌ 没有载入的条目 / No entry is loaded</div>",) + (gr.skip(),) * 7 + (hide,)
        if not loaded.get("draft") and not self.review.may_publish(request):
            return (f"<div class='kb-notice'>❌ {e(NEEDS_PUBLISHER)}</div>",) + (gr.skip(),) * 7 + (hide,)
        try:
            result = self.editor.delete(loaded["file"], loaded["key"], expected_version=loaded["version"])
        except BotError as exc:
            return (_error_html(exc),) + (gr.skip(),) * 7 + (hide,)
        return result_html(result), self.key_choices(result.file), "", "", "", "", None, NEW_MODE, hide

    def upload(self, path: str | None, overwrite: bool, accept: bool = False, request: Any = None):
        """Import an uploaded JSON file, or merge a CSV's or an Excel sheet's rows; returns (status html, file choices).

        The import is replayed first: when answers would be lost or change entry, nothing is imported until
        ``accept`` (the "import anyway" box) is ticked. With approval required only a publisher imports."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>", gr.skip()
        if not self.review.may_publish(request):
            return f"<div class='kb-notice'>❌ {e(NEEDS_PUBLISHER)}</div>", gr.skip()
        try:
            suffix, name = Path(path).suffix.lower(), Path(path).name
            data: str | bytes = Path(path).read_bytes() if suffix == ".xlsx" else read_upload(Path(path))
            held, diff = self.review.hold(lambda s: imported(s, name, data, bool(overwrite)), bool(accept))
            if held is not None:
                return held, gr.skip()
            if isinstance(data, bytes) or suffix == ".csv":
                result = self.editor.import_csv(name, data)
            else:
                result = self.editor.import_file(name, data, bool(overwrite))
        except UnicodeDecodeError:
            return "<div class='kb-notice'>❌ 文件不是 UTF-8 文本 / The file is not UTF-8 text</div>", gr.skip()
        except BotError as exc:
            return _error_html(exc), gr.skip()
        return result_html(result) + diff, gr.update(choices=self.editor.files())

    def publish(self, loaded: dict | None, confirmed: bool = False, request: Any = None):
        """Publish the loaded draft (replayed first, as a save is); (status, loaded state, mode html, draft box,
        publish confirm row)."""
        hide = gr.update(visible=False)
        if not loaded or not loaded.get("draft"):
            return (
                "<div class='kb-notice'>❌ 请先载入一个草稿 / Load a draft first</div>",
                gr.skip(),
                gr.skip(),
                gr.skip(),
                hide,
            )
        if not self.review.may_publish(request):
            return f"<div class='kb-notice'>❌ {e(NEEDS_PUBLISHER)}</div>", gr.skip(), gr.skip(), gr.skip(), hide
        item: dict = loaded
        fields = self.editor.entry(item["file"], item["key"])
        if fields is None:
            return NOT_LOADED, gr.skip(), gr.skip(), gr.skip(), hide
        live = Publication(False, fields.publication.valid_from, fields.publication.valid_until)

        def publishing(store: KnowledgeStore) -> list[str]:
            return [
                store.upsert_entry(
                    item["file"],
                    item["key"],
                    fields.query,
                    fields.document,
                    fields.metadata,
                    expected_version=item["version"],
                    publication=live,
                )
            ]

        held, diff = self.review.hold(publishing, confirmed)
        if held is not None:
            return held, gr.skip(), gr.skip(), gr.skip(), gr.update(visible=True)
        try:
            result = self.editor.save(
                loaded["file"],
                loaded["key"],
                fields.query,
                fields.document,
                fields.metadata,
                expected_version=loaded["version"],
                publication=live,
            )
        except BotError as exc:
            return _error_html(exc), gr.skip(), gr.skip(), gr.skip(), hide
        now = self.editor.entry(loaded["file"], loaded["key"])
        loaded = {**loaded, "version": now.version if now else None, "draft": False}
        return result_html(result) + diff, loaded, mode_html(loaded), False, hide

    def export(self) -> str:
        """Write every entry the index serves now to a CSV file; returns its path (the page offers it to download)."""
        return export_file(self.editor.export_csv())


def import_section() -> tuple:
    """Lay out the import and export accordion; (upload, overwrite, accept, import, status, export, template,
    exported file)."""
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
        accept = gr.Checkbox(
            False,
            label="已看过影响，仍然导入 / I have seen what it changes: import anyway",
            elem_id="kb-k-import-accept",
        )
        do_upload = gr.Button("导入 / Import", elem_id="kb-k-import")
        imported_box = gr.HTML(elem_id="kb-k-import-status")  # right under the button, not at the form far above
        with gr.Row():
            export = gr.Button("导出全部为 CSV / Export all as CSV", elem_id="kb-k-export")
            template = gr.DownloadButton("下载 CSV 模板 / Download the CSV template", elem_id="kb-k-template")
        exported = gr.File(label="导出文件 / Export", interactive=False, elem_id="kb-k-export-file")
    return upload, overwrite, accept, do_upload, imported_box, export, template, exported


def publication_row() -> tuple[gr.Checkbox, gr.Textbox, gr.Textbox]:
    """Lay out the draft box and the validity dates of the form."""
    with gr.Row():
        draft = gr.Checkbox(
            False, label="草稿（发布前不回答访客）/ Draft (answers nobody until published)", elem_id="kb-k-draft"
        )
        valid_from = gr.Textbox("", label="生效日 / Valid from (YYYY-MM-DD)", elem_id="kb-k-valid-from")
        valid_until = gr.Textbox("", label="截止日 / Valid until (YYYY-MM-DD)", elem_id="kb-k-valid-until")
    return draft, valid_from, valid_until


def confirm_changes_row() -> tuple[gr.Row, gr.Button, gr.Row, gr.Button]:
    """Lay out the hidden rows that confirm a save or a publication the replay found answers lost or changed by."""
    with gr.Row(visible=False, elem_id="kb-k-save-confirm-row") as save_row:
        save_anyway = gr.Button("确认保存 / Save anyway", variant="stop", elem_id="kb-k-save-confirm")
    with gr.Row(visible=False, elem_id="kb-k-publish-confirm-row") as publish_row:
        publish_anyway = gr.Button("确认发布 / Publish anyway", variant="stop", elem_id="kb-k-publish-confirm")
    return save_row, save_anyway, publish_row, publish_anyway


def publishing_events(
    k: KnowledgeHandlers,
    guard: Callable[..., Callable[..., Any]],
    buttons: tuple[gr.Button, gr.Button, gr.Button, gr.Button],
    saving: list,
    saved_out: list,
    draft: gr.Checkbox,
    publish_row: gr.Row,
) -> list:
    """Wire Save, Save anyway, Publish and Publish anyway (``saving[5]`` is the loaded state; ``publish_row`` holds
    Publish anyway); the events that write."""
    save, save_anyway, publish, publish_anyway = buttons
    loaded, mode, status = saving[5], saved_out[8], saved_out[0]
    confirmed = gr.State(True)
    published_out = [status, loaded, mode, draft, publish_row]
    return [
        save.click(guard(k.save, 10), saving, saved_out, api_name="save_entry"),
        save_anyway.click(guard(k.save, 10), [*saving, confirmed], saved_out, **PRIVATE),
        publish.click(guard(k.publish, 5), [loaded], published_out, api_name="publish_entry"),
        publish_anyway.click(guard(k.publish, 5), [loaded, confirmed], published_out, **PRIVATE),
    ]


def knowledge_tab(
    kb: KnowledgeBase,
    hit_counts: Callable[[], HitCounts] | None = None,
    limits: ClientLimits | None = None,
    review: EditReview | None = None,
) -> tuple[gr.Button, gr.State]:
    """Lay out and wire the knowledge tab inside the current Blocks context; (the "this entry's record" button, the
    loaded entry's state) for the records tab to answer.

    ``hit_counts`` (e.g. TurnLog.hit_counts) fills the table's hit columns; by default the hit counts of the
    knowledge base's conversation log (``kb.log``) when it records, else they show "—".
    """
    k = KnowledgeHandlers(kb.editor, review, kb.assets)
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
    draft, valid_from, valid_until = publication_row()
    with gr.Row():
        new = gr.Button("新建条目 / New entry", elem_id="kb-k-new")
        save = gr.Button("保存 / Save", variant="primary", elem_id="kb-k-save")
        publish = gr.Button("发布草稿 / Publish the draft", elem_id="kb-k-publish")
        delete = gr.Button("删除… / Delete…", variant="stop", elem_id="kb-k-delete")
        record = gr.Button("📈 此条目的记录 / This entry's record", elem_id="kb-k-record")
    save_confirm_row, save_anyway, publish_confirm_row, publish_anyway = confirm_changes_row()
    with gr.Row(visible=False, elem_id="kb-k-confirm-row") as confirm_row:
        confirm_text = gr.HTML(elem_id="kb-k-confirm-text")
        confirm = gr.Button("确认删除 / Yes, delete", variant="stop", elem_id="kb-k-delete-confirm")
        cancel = gr.Button("取消 / Cancel", elem_id="kb-k-delete-cancel")
    status = gr.HTML(elem_id="kb-k-status")
    upload, overwrite, accept, do_upload, imported_box, export, template, exported = import_section()

    guard = write_guard(limits)  # saves, deletes, imports and assets: limited per client address; uploads deleted
    asset_section(kb.assets, guard)
    table_out = [table, info, page]

    def admin_page():
        rows, page_line, _ = browser.show("", 1)
        return health_html(kb.bot.status()), rows, page_line, *k.first_file(), template_file()

    fill_for_admins(admin_page, [health, table, info, file, key, template])
    form = [query, document, metadata, questions, file, key, loaded, mode, confirm_row, draft, valid_from, valid_until]
    file.input(k.keys, [file], [key, loaded, mode], **PRIVATE)
    key.input(k.choose, [file, key, loaded], form, **PRIVATE)
    table.select(k.pick, None, form, **PRIVATE)
    new.click(
        k.new,
        [file],
        [key, query, document, metadata, questions, loaded, mode, status, confirm_row, draft, valid_from, valid_until],
        **PRIVATE,
    )
    # API: /entry loads (file, key) for editing in this session; /save_entry then edits it, else adds a new one.
    load_btn = gr.Button(visible=False, elem_id="kb-k-load")
    load_btn.click(k.load, [file, key], form, api_name="entry")
    writes = publishing_events(
        k,
        guard,
        (save, save_anyway, publish, publish_anyway),
        [file, key, query, document, metadata, loaded, questions, draft, valid_from, valid_until],
        [status, file, key, query, document, metadata, questions, loaded, mode, save_confirm_row],
        draft,
        publish_confirm_row,
    )
    for done in writes:
        done.then(browser.show, [search, page], table_out, **PRIVATE)
    delete.click(k.ask_delete, [loaded], [status, confirm_row, confirm_text], **PRIVATE)
    cancel.click(lambda: gr.update(visible=False), None, [confirm_row], **PRIVATE)
    deleted = confirm.click(
        guard(k.delete, 9),
        [loaded],
        [status, key, query, document, metadata, questions, loaded, mode, confirm_row],
        api_name="delete_entry",
    ).then(browser.show, [search, page], table_out, **PRIVATE)
    uploaded = do_upload.click(
        guard(k.upload, 2, discard_upload=True),
        [upload, overwrite, accept],
        [imported_box, file],
        api_name="upload_file",
    )
    uploaded.then(browser.show, [search, page], table_out, **PRIVATE)
    export.click(k.export, None, [exported], api_name="export_csv")
    restored = restore_section(k.editor, file, status, guard, result_html, _error_html, k.review)
    for event in restored:
        event.then(browser.show, [search, page], table_out, **PRIVATE)
    indexing_progress(kb.index, [*writes, deleted, uploaded, *restored])
    return record, loaded
