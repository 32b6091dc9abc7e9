"""The knowledge tab's pictures and files: an upload stored under ``knowledge/assets/`` (checked by
bot/knowledge/assets.py), and what an entry's document holds that is not shown as written."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from bot.knowledge.assets import ACCEPTED, AssetError, AssetStore
from bot.knowledge.markup import markup_problems

e = html.escape


def markup_html(document: str | None, assets: AssetStore) -> str:
    """The knowledge tab's note on a saved document's markup (a missing asset, raw HTML, an unsafe link ...), or
    nothing when it shows as written."""
    problems = markup_problems(document or "", assets.exists)
    if not problems:
        return ""
    items = "".join(f"<li>{e(p)}</li>" for p in problems)
    return (
        "<div class='kb-notice kb-markup'>⚠️ 已保存，但内容中有部分不会照原样显示 / Saved, but parts of the document "
        f"are not shown as written:<ul>{items}</ul></div>"
    )


class AssetUploads:
    """Stores an admin's upload as an asset and says how a document shows it."""

    def __init__(self, assets: AssetStore):
        self.assets = assets

    def upload(self, path: str | None) -> str:
        """Store the uploaded file under assets/ (its name, spaces as -); the status line."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>"
        name = Path(path).name.replace(" ", "-")
        try:
            reference = self.assets.save(Path(path), name)
        except AssetError as exc:
            return f"<div class='kb-notice kb-asset-refused'>❌ 未保存 / Not saved: {e(str(exc))}</div>"
        except OSError as exc:
            return f"<div class='kb-notice'>❌ 未保存 / Not saved: {e(exc.strerror or str(exc))}</div>"
        return (
            f"<div class='kb-ok kb-asset-saved'>✅ 已保存为 / Saved as <code>{e(reference)}</code>。在内容中写 / In a "
            f"document write <code>![说明 / caption]({e(reference)})</code> (图片 / a picture) 或 / or "
            f"<code>[文件名 / name]({e(reference)})</code> (下载链接 / a link)</div>"
        )


def asset_section(assets: AssetStore, guard: Callable[..., Callable[..., Any]]) -> None:
    """Lay out and wire the pictures-and-files accordion (its events are admin-only inside the knowledge tab)."""
    uploads = AssetUploads(assets)
    with gr.Accordion("图片与文件 / Pictures and files", open=False):
        gr.Markdown(
            "上传到 knowledge/assets/，在内容中以 `![说明](assets/文件名)` 显示图片、`[名称](assets/文件名)` 链接文件。"
            f"/ Uploads go to knowledge/assets/; a document shows them as `![caption](assets/name)` or links them "
            f"as `[name](assets/name)`. 接受 / Accepted: {ACCEPTED} (SVG 不接受 / no SVG)."
        )
        upload = gr.File(type="filepath", label="图片或文件 / Picture or file", elem_id="kb-k-asset-upload")
        store = gr.Button("上传 / Upload", elem_id="kb-k-asset-store")
        status = gr.HTML(elem_id="kb-k-asset-status")
    store.click(guard(uploads.upload, 1, discard_upload=True), [upload], [status], api_name="upload_asset")
