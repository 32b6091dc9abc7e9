"""Restore in the page: an admin who overwrote a knowledge file lists its kept versions and brings one
back, as ``python -m bot knowledge restore`` does. The replaced version is kept too, so a restore can be undone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from bot.editing.editor import KnowledgeEditor
from bot.errors import BotError
from bot.texts import NONE_KEPT
from bot.ui.events import PRIVATE


class RestoreHandlers:
    """Callbacks of the restore section: list a file's kept versions, restore one."""

    def __init__(self, editor: KnowledgeEditor, result_html: Callable[[Any], str], error_html: Callable[[Any], str]):
        self.editor = editor
        self.result_html = result_html
        self.error_html = error_html

    def versions(self, file: str | None):
        """(version choices, status): newest first, each labelled with when it was replaced and its entries."""
        try:
            kept = self.editor.history(file)
        except BotError as exc:
            return gr.update(choices=[], value=None), self.error_html(exc)
        choices = [
            (f"{v.time} · {'?' if v.entries is None else v.entries} entries · {v.size} bytes", v.version) for v in kept
        ]
        return gr.update(choices=choices, value=choices[0][1] if choices else None), "" if choices else NONE_KEPT

    def restore(self, file: str | None, version: str | None):
        """(status, version choices): the file back at ``version``; the list then holds the version replaced."""
        try:
            result = self.editor.restore(file, version)
        except BotError as exc:
            return self.error_html(exc), gr.skip()
        return self.result_html(result), self.versions(file)[0]


def restore_section(
    editor: KnowledgeEditor,
    file: Any,
    status: Any,
    guard: Callable[..., Any],
    result_html: Callable[[Any], str],
    error_html: Callable[[Any], str],
) -> Any:
    """Lay out the restore controls (inside the knowledge tab) for the ``file`` dropdown; returns the restore event,
    for the caller to refresh its table after."""
    h = RestoreHandlers(editor, result_html, error_html)
    with gr.Accordion("历史版本与恢复 / Earlier versions and restore", open=False):
        with gr.Row():
            listed = gr.Button("列出所选文件的历史版本 / List the chosen file's versions", elem_id="kb-k-history")
            # custom values: a version id typed or sent through the API (the store checks it exists)
            version = gr.Dropdown([], label="历史版本 / Kept version", allow_custom_value=True, elem_id="kb-k-version")
        restore = gr.Button(
            "恢复到此版本（当前版本会保留）/ Restore this version (the current one is kept)",
            variant="stop",
            elem_id="kb-k-restore",
        )
    listed.click(h.versions, [file], [version, status], api_name="file_versions")
    file.change(lambda: gr.update(choices=[], value=None), None, [version], **PRIVATE)
    return restore.click(guard(h.restore, 8), [file, version], [status, version], api_name="restore_version")
