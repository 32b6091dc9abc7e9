"""Restore in the page: an admin who overwrote a knowledge file lists its kept versions and brings one back.

As ``python -m bot knowledge restore`` does; the replaced version is kept too, so a restore can be undone. A restore
is replayed first (bot/ui/review.py) like any edit: one that loses or changes answers waits for "Restore anyway",
and with ``knowledge.require_approval`` only a publisher restores.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import gradio as gr

from bot.editing.editor import KnowledgeEditor
from bot.errors import BotError
from bot.texts import NONE_KEPT
from bot.ui.events import PRIVATE
from bot.ui.review import NEEDS_PUBLISHER, EditReview


class RestoreHandlers:
    """Callbacks of the restore section: list a file's kept versions, restore one."""

    def __init__(
        self,
        editor: KnowledgeEditor,
        result_html: Callable[[Any], str],
        error_html: Callable[[Any], str],
        review: EditReview | None = None,
    ):
        self.editor = editor
        self.result_html = result_html
        self.error_html = error_html
        self.review = review or EditReview(None)

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

    def restore(self, file: str | None, version: str | None, confirmed: bool = False, request: Any = None):
        """(status, version choices, confirm row): the file back at ``version``, replayed first.

        The list then holds the version replaced; a restore that loses or changes answers waits for ``confirmed``.
        """
        hide = gr.update(visible=False)
        if not self.review.may_publish(request):
            return f"<div class='kb-notice'>❌ {html.escape(NEEDS_PUBLISHER)}</div>", gr.skip(), hide
        try:
            held, diff = self.review.hold(self.editor.restore_edit(file, version), confirmed)
            if held is not None:
                return held, gr.skip(), gr.update(visible=True)
            result = self.editor.restore(file, version)
        except BotError as exc:
            return self.error_html(exc), gr.skip(), hide
        return self.result_html(result) + diff, self.versions(file)[0], hide


def restore_section(
    editor: KnowledgeEditor,
    file: Any,
    status: Any,
    guard: Callable[..., Any],
    result_html: Callable[[Any], str],
    error_html: Callable[[Any], str],
    review: EditReview | None = None,
) -> list[Any]:
    """Lay out the restore controls (inside the knowledge tab) for the ``file`` dropdown.

    Returns the restore events (restore, restore anyway), for the caller to refresh its table after.
    """
    h = RestoreHandlers(editor, result_html, error_html, review)
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
        with gr.Row(visible=False, elem_id="kb-k-restore-confirm-row") as confirm_row:
            anyway = gr.Button("确认恢复 / Restore anyway", variant="stop", elem_id="kb-k-restore-confirm")
    confirmed = gr.State(True)
    listed.click(h.versions, [file], [version, status], api_name="file_versions")
    file.change(
        lambda: (gr.update(choices=[], value=None), gr.update(visible=False)), None, [version, confirm_row], **PRIVATE
    )
    out = [status, version, confirm_row]
    return [
        restore.click(guard(h.restore, 8), [file, version], out, api_name="restore_version"),
        anyway.click(guard(h.restore, 8), [file, version, confirmed], out, **PRIVATE),
    ]
