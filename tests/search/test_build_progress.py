"""Waiting for an index is not blind: while a sync runs, the status (and the page header) shows
texts done / total and the time left; `python -m bot index` counts the same texts in its bar; a mode standing in for
another says so in the sources panel."""

from __future__ import annotations

import re
import threading
import time

import pytest
import yaml

from bot.chat.answer import Answer, Cutoffs, Strategy
from bot.factory import build_bot
from bot.search.progress import BuildProgress
from bot.search.tantivy_searcher import TantivySearcher
from bot.ui.render import header_markdown, sources_html
from tests.support.cli import run
from tests.support.knowledge import TINY, config_dict, with_cutoffs, write_knowledge

pytestmark = pytest.mark.e2e

LONG = "。".join(f"第{i}段讲的是图书馆的第{i}条规定，读者需要遵守这条规定" for i in range(40)) + "。"


def test_progress_counts_done_of_total_and_estimates_the_time_left():
    now = [100.0]
    relayed: list[int] = []
    progress = BuildProgress("faiss", relay=relayed.append, clock=lambda: now[0])
    assert progress.snapshot().total == 0  # nothing announced yet: nothing to show
    progress.start(200)
    now[0] += 10
    progress(50)
    snap = progress.snapshot()
    assert (snap.done, snap.total, snap.seconds_left) == (50, 200, 30.0)
    assert snap.describe() == "faiss 50/200 (25%), about 30 s left"
    assert relayed == [50]


def test_the_index_command_counts_texts_against_the_texts_it_writes(tmp_path, kb_dir):
    write_knowledge(kb_dir, {**TINY, "rules": {"query": "图书馆规定", "document": LONG, "metadata": "规定"}})
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    done = run(config, "index")
    assert done.returncode == 0, done.stderr
    header = re.search(r"indexing sparse \((\d+) entries, (\d+) texts\)", done.stderr)
    assert header and header.group(1) == "7" and int(header.group(2)) > 7  # the long entry is several passages
    last = re.findall(r"(\d+)/(\d+)", done.stderr)[-1]  # the bar's final state
    assert last[0] == last[1] == header.group(2), done.stderr[-500:]


def test_a_running_build_shows_in_the_status_and_header_then_leaves(settings, kb_dir, monkeypatch):
    write_knowledge(kb_dir, {f"e{i}": {"query": f"问题{i}", "document": f"答案{i}", "metadata": ""} for i in range(30)})
    settings = with_cutoffs(settings, "sparse", 0.5)
    release = threading.Event()
    original = TantivySearcher.upsert

    def slow(self, entries, progress=None):  # a build that waits for the test after its first ten texts
        if progress is not None and len(entries) == 30:
            progress(10)
            release.wait(30)
            progress(len(entries) - 10)
            progress = None
        original(self, entries, progress)

    monkeypatch.setattr(TantivySearcher, "upsert", slow)
    # As app.py builds it (background syncs), without its wait for the sparse index: the test holds that build.
    bot = build_bot(settings, load=False, watch_config=True, keep_last_good=True)
    bot.index.load()
    bot.index.searcher("sparse")
    deadline = time.monotonic() + 30
    while not bot.status().building and time.monotonic() < deadline:
        time.sleep(0.02)
    status = bot.status()
    [snap] = status.building
    assert (snap.name, snap.done, snap.total) == ("tantivy", 10, 30) and snap.seconds_left is not None
    header = header_markdown("kb", status, "retrieval only")
    assert "Building: tantivy 10/30 (33%), about" in header
    release.set()
    assert bot.index.wait_ready("sparse", 30)
    bot.index.wait_idle(30)
    assert bot.status().building == () and "Building" not in header_markdown("kb", bot.status(), "r")


@pytest.mark.parametrize("system, shown", [("dense-e5", "dense"), ("sparse", "sparse standing in")])
def test_the_sources_panel_says_when_another_mode_answers(system, shown):
    answer = Answer(question="q", text="t", strategy=Strategy.DIRECT, mode="dense", thresholds=Cutoffs(system, 0.34))
    head = sources_html(answer).split("</p>")[0]
    if shown == "dense":
        assert "Mode:</b> dense · " in head
    else:
        assert "building; sparse answers meanwhile" in head and "Threshold:</b> sparse ≥ 0.34" in head
