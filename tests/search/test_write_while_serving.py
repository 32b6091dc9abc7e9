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
from bot.search.faiss_files import json_by_item

pytestmark = pytest.mark.e2e


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


def test_processes_started_by_a_worker_run_at_a_lower_priority():
    assert background.child_nice() == 0  # the CLI, scripts, tests: as they are
    assert Worker("n").submit("x", background.child_nice).result(5) == background.NICE


def _report_nice(texts: list[str]) -> list[list[str]]:
    return [[str(os.nice(0))] for _ in texts]


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no nice values here")
def test_the_jieba_pool_of_a_worker_runs_at_the_lower_priority(monkeypatch):
    from bot.search import tokenizer as text
    from bot.search.tokenizer import Tokenizer

    monkeypatch.setattr(text, "PARALLEL_MIN", 10)
    monkeypatch.setattr(text, "_worker_tokenize", _report_nice)
    tok, texts, mine = Tokenizer(), ["怎么添加知识"] * 40, os.nice(0)
    from_script = {t[0] for t in tok.tokenize_many(texts, processes=2)}
    from_worker = {t[0] for t in Worker("p").submit("x", lambda: tok.tokenize_many(texts, processes=2)).result(60)}
    assert from_script == {str(mine)}
    assert from_worker == {str(min(19, mine + background.NICE))}


def test_fasttext_training_started_by_a_worker_asks_for_the_lower_priority(monkeypatch, tmp_path):
    from bot.search.encoders import fasttext_training as ft

    jobs = []

    def run(cmd, input, **kw):
        jobs.append(json.loads(input))
        return type("Done", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(ft.subprocess, "run", run)
    ft._train_skipgram(str(tmp_path / "corpus.txt"), ft.FastTextParams(), tmp_path / "m.bin")
    Worker("t").submit(
        "x", lambda: ft._train_skipgram(str(tmp_path / "c.txt"), ft.FastTextParams(), tmp_path / "m.bin")
    ).result(5)
    assert [job["nice"] for job in jobs] == [0, background.NICE]
    assert 'os.nice(job["nice"])' in ft._TRAIN_CHILD


@pytest.mark.parametrize(
    "data",
    [
        {
            "signature": "2:ab",
            "n": None,
            "units": {"faq:1": [[0, "question"], [1, "document"]], "é": []},
            "entries": {"faq:1": {"id": "faq:1", "query": "怎么添加知识？", "metadata": ["知识"]}},
            "empty": {},
            "list": [1],
        },
        {},
        {"ints": {1: "a"}},
        [{"a": 1}],
        "text",
        {"a": {"b": {"c": {"d": 1}}}},
    ],
)
def test_json_by_item_writes_the_same_text_as_json_dumps(data):
    assert json_by_item(data) == json.dumps(data, ensure_ascii=False)
