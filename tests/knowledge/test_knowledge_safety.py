"""Nothing lost: one writer per folder, history of every write, stale edits refused (real files and processes)."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.process
import multiprocessing.queues
import multiprocessing.synchronize
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bot.errors import KnowledgeError
from bot.knowledge.entries import load_entries
from bot.knowledge.store import (
    ABSENT,
    KnowledgeStore,
    KnowledgeWriteError,
    StaleEditError,
)
from tests.support.fault_injection import save_same_id
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.e2e

CTX = (
    multiprocessing.get_context("fork")
    if "fork" in multiprocessing.get_all_start_methods()
    else multiprocessing.get_context("spawn")
)
LIST = [{"query": f"q{i}", "document": f"d{i}"} for i in range(4)]


@pytest.fixture
def store(kb_dir: Path, tmp_path: Path) -> KnowledgeStore:
    """A store over the tiny knowledge base; locks and history in the temp state folder."""
    return KnowledgeStore(kb_dir, tmp_path / "state" / "locks")


def read(path: Path):
    """The decoded JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", ["processes", "threads"])
def test_same_id_into_two_files_at_once_exactly_one_wins(tmp_path, kind):
    for attempt in range(20):
        folder = tmp_path / f"kb{attempt}"
        write_knowledge(folder / "sub", {"other": {"query": "q", "document": "d"}}, "dup.json")
        args = (str(folder), str(tmp_path / "locks"))
        barrier: threading.Barrier | multiprocessing.synchronize.Barrier
        results: queue.Queue[tuple[str, str]] | multiprocessing.queues.Queue[tuple[str, str]]
        workers: Sequence[threading.Thread | multiprocessing.process.BaseProcess]
        if kind == "processes":
            barrier, results = CTX.Barrier(2), CTX.Queue()
            workers = [
                CTX.Process(target=save_same_id, args=(*args, f, barrier, results))
                for f in ("dup.json", "sub/dup.json")
            ]
        else:
            barrier, results = threading.Barrier(2), queue.Queue()
            workers = [
                threading.Thread(target=save_same_id, args=(*args, f, barrier, results))
                for f in ("dup.json", "sub/dup.json")
            ]
        for w in workers:
            w.start()
        outcome = dict(results.get(timeout=30) for _ in workers)
        for w in workers:
            w.join(30)
        assert sorted(v == "ok" for v in outcome.values()) == [False, True], outcome
        loser = next(v for v in outcome.values() if v != "ok")
        assert "duplicate id" in loser
        assert [e.id for e in load_entries(folder)].count("dup:x") == 1  # the folder still loads


def test_every_kind_of_write_keeps_the_previous_version(store, kb_dir):
    path = kb_dir / "faq.json"
    seen: list[bytes] = []

    def wrote(action: Callable[[], object]) -> None:
        before = path.read_bytes()
        action()
        versions = store.history("faq.json")
        assert len(versions) == len(seen) + 1
        assert store._history.content("faq.json", versions[0].version) == before
        seen.append(before)

    wrote(lambda: store.upsert_entry("faq.json", "add", "q", "d", ""))  # edit
    wrote(lambda: store.upsert_entry("faq.json", None, "new q", "new d", ""))  # add
    wrote(lambda: store.delete_entry("faq.json", "mode"))
    wrote(lambda: store.import_file("faq.json", '{"b": {"query": "q", "document": "d"}}', merge=True))
    wrote(lambda: store.import_file("faq.json", '[{"query": "only", "document": "one"}]', overwrite=True))
    oldest = store.history("faq.json")[-1]
    assert oldest.entries == len(TINY) and oldest.size == len(seen[0])
    wrote(lambda: store.restore("faq.json", oldest.version))
    assert path.read_bytes() == seen[0] and read(path) == TINY  # the 6 entries are back, byte for byte
    assert [e.id for e in load_entries(kb_dir)] == [f"faq:{k}" for k in TINY]


def test_a_new_file_has_no_history_and_a_failed_write_keeps_none(store, kb_dir):
    store.upsert_entry("fresh.json", None, "q", "d", "")
    assert store.history("fresh.json") == []
    with pytest.raises(KnowledgeError):
        store.upsert_entry("faq.json", "add", "", "d", "")
    assert store.history("faq.json") == []


def test_history_is_bounded_to_the_newest_versions(kb_dir, tmp_path):
    store = KnowledgeStore(kb_dir, tmp_path / "locks", history_versions=3)
    for i in range(6):
        store.upsert_entry("faq.json", "add", f"q{i}", "d", "")
    versions = store.history("faq.json")
    assert len(versions) == 3 and len(list((tmp_path / "history" / "faq.json").glob("*.json"))) == 3
    kept = [read_version(store, v.version)["add"]["query"] for v in versions]
    assert kept == ["q4", "q3", "q2"]  # newest first; the first versions were dropped
    off = KnowledgeStore(kb_dir, tmp_path / "locks", history_dir=tmp_path / "h0", history_versions=0)
    off.upsert_entry("faq.json", "add", "again", "d", "")
    assert off.history("faq.json") == []


def read_version(store: KnowledgeStore, version: str):
    """One kept version of faq.json, decoded."""
    content = store._history.content("faq.json", version)
    assert content is not None, f"no kept version {version}"
    return json.loads(content)


def test_restore_refuses_unknown_versions(store):
    store.upsert_entry("faq.json", "add", "q", "d", "")
    for bad in ("nope", "../../faq", "20240101T000000000000Z-000000000000"):
        with pytest.raises(KnowledgeWriteError, match="no kept version"):
            store.restore("faq.json", bad)


def test_history_folder_inside_knowledge_is_refused(kb_dir, tmp_path):
    with pytest.raises(KnowledgeWriteError, match="history folder"):
        KnowledgeStore(kb_dir, tmp_path / "locks", history_dir=kb_dir / "h")


def test_stale_edit_of_an_object_entry_is_refused(store, kb_dir):
    loaded = store.version("faq.json", "add")
    store.upsert_entry("faq.json", "add", "someone else", "d", "")
    before = (kb_dir / "faq.json").read_bytes()
    for write in (
        lambda: store.upsert_entry("faq.json", "add", "mine", "d", "", expected_version=loaded),
        lambda: store.delete_entry("faq.json", "add", expected_version=loaded),
    ):
        with pytest.raises(StaleEditError) as err:
            write()
        assert str(err.value).startswith("该条目已被他人修改") and "The entry changed since you loaded it" in str(
            err.value
        )
    assert (kb_dir / "faq.json").read_bytes() == before
    current = store.version("faq.json", "add")
    store.upsert_entry("faq.json", "add", "mine", "d", "", expected_version=current)  # up to date: fine
    store.delete_entry("faq.json", "add", expected_version=store.version("faq.json", "add"))
    with pytest.raises(StaleEditError, match="deleted"):
        store.upsert_entry("faq.json", "add", "mine", "d", "", expected_version=current)
    with pytest.raises(StaleEditError, match="already has an entry 'mode'"):
        store.upsert_entry("faq.json", "mode", "q", "d", "", expected_version=ABSENT)
    assert store.upsert_entry("faq.json", "brand_new", "q", "d", "", expected_version=ABSENT) == "faq:brand_new"


def test_stale_edit_of_a_list_entry_never_hits_the_wrong_entry(store, kb_dir):
    write_knowledge(kb_dir, LIST, "lst.json")
    loaded = store.version("lst.json", "2")  # an editor loads lst:2 ...
    store.delete_entry("lst.json", "1")  # ... someone deletes lst:1, so q3 moves to position 2
    with pytest.raises(StaleEditError, match="now at key '1'"):
        store.upsert_entry("lst.json", "2", "edited q2", "d2", "", expected_version=loaded)
    with pytest.raises(StaleEditError):
        store.delete_entry("lst.json", "2", expected_version=loaded)
    assert [v["query"] for _, v in store.entries("lst.json")] == ["q0", "q2", "q3"]  # nothing overwritten
    assert store.upsert_entry("lst.json", "1", "edited q2", "d2", "", expected_version=loaded) == "lst:1"
    assert [v["query"] for _, v in store.entries("lst.json")] == ["q0", "edited q2", "q3"]
    gone = store.version("lst.json", "2")
    store.delete_entry("lst.json", "2")
    with pytest.raises(StaleEditError, match="deleted"):
        store.upsert_entry("lst.json", "2", "q", "d", "", expected_version=gone)


def test_import_merge(store, kb_dir):
    assert (
        store.import_file(
            "faq.json", '{"add": {"query": "q", "document": "d"}, "z": {"query": "z", "document": "z"}}', merge=True
        )[-1]
        == "faq:z"
    )
    data = read(kb_dir / "faq.json")
    assert list(data) == [*TINY, "z"] and data["add"] == {"query": "q", "document": "d"}
    store.import_file("faq.json", '[{"query": "l", "document": "l"}]', merge=True)
    assert read(kb_dir / "faq.json")["1"] == {"query": "l", "document": "l"}
    write_knowledge(kb_dir, LIST, "lst.json")
    assert len(store.import_file("lst.json", '[{"query": "l", "document": "l"}]', merge=True)) == 5
    with pytest.raises(KnowledgeWriteError, match="cannot be merged"):
        store.import_file("lst.json", '{"k": {"query": "q", "document": "d"}}', merge=True)
    assert store.import_file("brand.json", '{"k": {"query": "q", "document": "d"}}', merge=True) == ["brand:k"]


EXTERNAL = r"""
import fcntl, json, os, sys, time
folder, lock_path, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(os.path.dirname(lock_path), exist_ok=True)
with open(lock_path, "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("locked", flush=True)
    path = os.path.join(folder, "faq.json")
    data = json.load(open(path, encoding="utf-8"))
    time.sleep(hold)  # a slow editor: a writer that ignored the lock would lose this edit or the other one
    data["external"] = {"query": "from a script", "document": "held the lock"}
    tmp = os.path.join(folder, ".faq.json.script.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False)
    os.replace(tmp, path)
print("released", flush=True)
"""


def test_an_external_script_taking_the_documented_lock_serialises_with_the_store(store, kb_dir, tmp_path):
    script = tmp_path / "edit.py"
    script.write_text(EXTERNAL, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(kb_dir), str(store.lock_path), "1.0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    impatient = KnowledgeStore(kb_dir, store.lock_dir, timeout=0.2)
    with pytest.raises(KnowledgeWriteError, match="another edit"):
        impatient.upsert_entry("faq.json", "mine", "q", "d", "")
    started = time.monotonic()
    store.upsert_entry("faq.json", "mine", "from the store", "waited", "")  # waits for the script
    assert time.monotonic() - started > 0.3
    assert proc.wait(10) == 0
    data = read(kb_dir / "faq.json")
    assert {"external", "mine"} <= set(data) and set(TINY) <= set(data)
    assert store.lock_path == store.lock_dir / "knowledge.lock" and store.lock_path.exists()
