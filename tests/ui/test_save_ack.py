"""A save is acknowledged once it is on disk, not after another admin's indexing: the knowledge tab
says the index is still updating, and how far it got; the edit serves once the indexing is done."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bot.factory import build_bot, build_knowledge_base
from bot.ui.indexing import IndexingProgress
from bot.ui.knowledge_tab import KnowledgeHandlers
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit


def test_a_save_behind_a_long_indexing_is_acknowledged_when_on_disk(settings, kb_dir):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings, watch_config=True, keep_last_good=True)  # as app.py: a background index
    assert bot.index.wait_ready("sparse", 60) and bot.index.wait_idle(60)
    editor = build_knowledge_base(settings, bot).editor
    editor.ack_seconds = 0.5
    leaf = bot.index.searcher("sparse").leaves()[0]
    busy, release = threading.Event(), threading.Event()

    def bulk_indexing():  # another admin's 3,000-entry import holds the index for a long time
        with bot.index.writer.lock(leaf):
            busy.set()
            release.wait(30)

    holder = threading.Thread(target=bulk_indexing)
    holder.start()
    busy.wait(10)
    try:
        started = time.monotonic()
        status = KnowledgeHandlers(editor).save("faq.json", "", "停车场怎么收费？", "五元一小时。", "停车")[0]
        took = time.monotonic() - started
        on_disk = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
        started_timer = IndexingProgress(bot.index).start()[0]
        line = IndexingProgress(bot.index).poll()  # the knowledge tab's timer tick while the indexing runs
    finally:
        release.set()
        holder.join(10)
    assert took < 3, took  # main: the save waited for the whole indexing (here 30 s)
    assert "indexing in the background" in line[0] and line[1].active is True
    assert "saved to disk" in status and "updating in the background" in status and "indexed so far" in status
    assert any(v["query"] == "停车场怎么收费？" for v in on_disk.values())
    assert bot.index.wait_idle(30)
    assert bot.answer("停车场怎么收费？").hits[0].entry.query == "停车场怎么收费？"  # served once indexed
    assert started_timer.active is True
    done, timer = IndexingProgress(bot.index).poll()
    assert "index up to date (7 entries)" in done and timer.active is False  # the polling stops


def test_a_save_with_an_idle_index_still_says_index_updated(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings, watch_config=True, keep_last_good=True)
    kb = build_knowledge_base(settings, bot)
    assert bot.index.wait_ready("sparse", 60) and bot.index.wait_idle(60)
    status = KnowledgeHandlers(kb.editor).save("faq.json", "", "新问题？", "新答案。", "")[0]
    assert "index updated (7 entries)" in status
