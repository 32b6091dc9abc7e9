"""Requests go first while the index is written: index workers run at a lower CPU priority (per thread), the GIL
switch interval is short while any runs, and large state files are dumped item by item (BENCHMARKS.md "Write while
serving")."""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

from bot.search import background
from bot.search.background import Worker
from bot.search.faiss_searcher import json_by_item


def test_switch_interval_is_short_while_a_worker_runs_and_restored_after():
    before = sys.getswitchinterval()
    seen: list[float] = []
    w = Worker("t")
    w.submit("a", lambda: seen.append(sys.getswitchinterval())).result(5)
    assert w.wait_idle(5)
    assert seen == [pytest.approx(min(before, background.SWITCH_INTERVAL))]
    for _ in range(100):  # the thread restores it on its way out, just after the job's future is done
        if sys.getswitchinterval() == before:
            break
        threading.Event().wait(0.01)
    assert sys.getswitchinterval() == before


def test_two_workers_restore_the_interval_only_when_both_are_done():
    before = sys.getswitchinterval()
    release = threading.Event()
    a, b = Worker("a"), Worker("b")
    fa = a.submit("x", lambda: release.wait(5))
    fb = b.submit("x", lambda: sys.getswitchinterval())
    assert fb.result(5) == pytest.approx(min(before, background.SWITCH_INTERVAL))
    assert b.wait_idle(5)
    assert sys.getswitchinterval() == pytest.approx(min(before, background.SWITCH_INTERVAL))  # a still runs
    release.set()
    fa.result(5)
    assert a.wait_idle(5)
    for _ in range(100):
        if sys.getswitchinterval() == before:
            break
        threading.Event().wait(0.01)
    assert sys.getswitchinterval() == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_a_worker_thread_runs_at_a_lower_priority_and_the_caller_keeps_its_own():
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    process = os.getpriority(os.PRIO_PROCESS, os.getpid())
    nice = Worker("n").submit("x", lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result(5)
    assert nice == min(19, process + background.NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


@pytest.mark.parametrize("data", [
    {"signature": "2:ab", "n": None, "units": {"faq:1": [[0, "question"], [1, "document"]], "é": []},
     "entries": {"faq:1": {"id": "faq:1", "query": "怎么添加知识？", "metadata": ["知识"]}}, "empty": {}, "list": [1]},
    {}, {"ints": {1: "a"}}, [{"a": 1}], "text", {"a": {"b": {"c": {"d": 1}}}},
])
def test_json_by_item_writes_the_same_text_as_json_dumps(data):
    assert json_by_item(data) == json.dumps(data, ensure_ascii=False)
