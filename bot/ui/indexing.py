"""Indexing progress in the knowledge tab: after a save answered before the index caught up, a timer
polls the index every two seconds and shows how far the background indexing got, until it is done."""

from __future__ import annotations

from typing import Any

import gradio as gr

from bot.search.index import KnowledgeIndex
from bot.ui.events import PRIVATE

POLL_SECONDS = 2.0


class IndexingProgress:
    """The progress line and whether to keep polling, read from the index (no side effects)."""

    def __init__(self, index: KnowledgeIndex):
        self.index = index

    def start(self):
        """After a write: poll only while the index is still busy (timer update, progress html)."""
        busy = not self.index.wait_idle(0)
        return gr.Timer(active=busy), self.line() if busy else ""

    def line(self) -> str:
        """'indexing: tantivy 1200 entries so far' while busy, else 'index up to date (N entries)'."""
        running = self.index.indexing()
        if self.index.wait_idle(0):
            return f"<div class='kb-ok'>✅ 索引已更新 / index up to date ({len(self.index.entries)} entries)</div>"
        done = ", ".join(f"{name} {n}" for name, n in sorted(running.items())) or "—"
        return (
            f"<div class='kb-mode'>⏳ 索引更新中 / indexing in the background · 已索引 / indexed so far: {done}</div>"
        )

    def poll(self):
        """A timer tick: (progress html, timer update) — the timer stops once the index is idle."""
        return self.line(), gr.Timer(active=not self.index.wait_idle(0))


def indexing_progress(index: KnowledgeIndex, writes: list[Any]) -> None:
    """Lay out the progress line and its timer (inside the knowledge tab) and start it after each of ``writes``."""
    progress = IndexingProgress(index)
    line = gr.HTML(elem_id="kb-k-indexing")
    timer = gr.Timer(POLL_SECONDS, active=False)  # inactive on every page until an admin's write starts it
    for write in writes:
        write.then(progress.start, None, [timer, line], **PRIVATE)
    timer.tick(progress.poll, None, [line, timer], **PRIVATE)
