"""KnowledgeStore: locked, validated, atomic edits of real knowledge files."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from bot.errors import KnowledgeError
from bot.knowledge.entries import load_entries
from bot.knowledge.store import KnowledgeStore, KnowledgeWriteError
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.e2e


@pytest.fixture
def store(kb_dir: Path, tmp_path: Path) -> KnowledgeStore:
    """A store over the tiny knowledge base, with its locks outside the knowledge folder."""
    return KnowledgeStore(kb_dir, tmp_path / "locks")


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_add_to_new_file_creates_object_form(store, kb_dir):
    entry_id = store.upsert_entry("new.json", None, " 新问题 ", "新答案", "甲, 乙，丙")
    assert entry_id == "new:1"
    text = (kb_dir / "new.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and "新问题" in text  # ensure_ascii=False, trailing newline
    assert read(kb_dir / "new.json") == {"1": {"query": "新问题", "document": "新答案", "metadata": "甲,乙,丙"}}
    assert store.upsert_entry("new.json", None, "q2", "d2", "") == "new:2"
    assert "new:2" in {e.id for e in load_entries(kb_dir)}
    assert store.files() == ["faq.json", "new.json"]


def test_add_to_existing_object_file_keeps_order_and_others(store, kb_dir):
    assert store.upsert_entry("faq.json", "zeta", "Q", "D", "k1,k2") == "faq:zeta"
    data = read(kb_dir / "faq.json")
    assert list(data) == [*TINY, "zeta"]
    assert {k: v for k, v in data.items() if k != "zeta"} == TINY
    assert [k for k, _ in store.entries("faq.json")] == [*TINY, "zeta"]


def test_edit_keeps_extra_fields_position_and_list_metadata(store, kb_dir):
    write_knowledge(
        kb_dir, {"a": {"query": "q", "document": "d", "metadata": ["x"], "owner": "ann"}, "b": TINY["add"]}, "more.json"
    )
    store.upsert_entry("more.json", "a", "q2", "d2", "x, y")
    data = read(kb_dir / "more.json")
    assert list(data) == ["a", "b"]
    assert data["a"] == {"query": "q2", "document": "d2", "metadata": ["x", "y"], "owner": "ann"}
    assert data["b"] == TINY["add"]


def test_list_form_add_edit_delete(store, kb_dir):
    write_knowledge(kb_dir, [{"query": "q0", "document": "d0"}, {"query": "q1", "document": "d1"}], "items.json")
    assert store.upsert_entry("items.json", None, "q2", "d2", "m") == "items:2"
    assert store.upsert_entry("items.json", "0", "q0b", "d0b", "") == "items:0"
    assert [v["query"] for _, v in store.entries("items.json")] == ["q0b", "q1", "q2"]
    store.delete_entry("items.json", "1")
    assert store.entries("items.json") == [
        ("0", {"query": "q0b", "document": "d0b", "metadata": ""}),
        ("1", {"query": "q2", "document": "d2", "metadata": "m"}),  # the old index 2 moved up
    ]
    with pytest.raises(KnowledgeWriteError, match="no entry '5'"):
        store.upsert_entry("items.json", "5", "q", "d", "")


def test_delete_object_entry(store, kb_dir):
    store.delete_entry("faq.json", "mode")
    assert list(read(kb_dir / "faq.json")) == [k for k in TINY if k != "mode"]
    with pytest.raises(KnowledgeWriteError, match="no entry 'mode'"):
        store.delete_entry("faq.json", "mode")


def test_invalid_entry_is_refused_and_file_unchanged(store, kb_dir):
    before = (kb_dir / "faq.json").read_bytes()
    with pytest.raises(KnowledgeError) as err:
        store.upsert_entry("faq.json", "add", "   ", "doc", "")
    assert "faq.json entry 'add'" in str(err.value) and "'query' is empty" in str(err.value)
    assert (kb_dir / "faq.json").read_bytes() == before
    with pytest.raises(KnowledgeError):
        store.upsert_entry("brand-new.json", None, "", "doc", "")
    assert not (kb_dir / "brand-new.json").exists()


def test_duplicate_id_with_another_file_is_refused(store, kb_dir):
    write_knowledge(kb_dir / "sub", {"x": {"query": "q", "document": "d"}}, "faq.json")
    before = (kb_dir / "faq.json").read_bytes()
    with pytest.raises(KnowledgeError, match="duplicate id.*sub/faq.json"):
        store.upsert_entry("faq.json", "x", "q", "d", "")
    assert (kb_dir / "faq.json").read_bytes() == before
    assert store.upsert_entry("sub/faq.json", "y", "q", "d", "") == "faq:y"


def test_import_file(store, kb_dir):
    ids = store.import_file("upload.json", '\ufeff{"a": {"query": "q", "document": "d"}}')
    assert ids == ["upload:a"]
    assert read(kb_dir / "upload.json") == {"a": {"query": "q", "document": "d"}}
    with pytest.raises(KnowledgeWriteError, match="already exists"):
        store.import_file("upload.json", '{"b": {"query": "q", "document": "d"}}')
    assert store.import_file("upload.json", '[{"query": "q", "document": "d"}]', overwrite=True) == ["upload:0"]


def test_import_bad_json_reports_line_and_column(store, kb_dir):
    with pytest.raises(KnowledgeError, match="line 2 column 1"):
        store.import_file("bad.json", '{"a": {"query": "q", "document": "d"},\n}')
    assert not (kb_dir / "bad.json").exists()


@pytest.mark.parametrize("name", ["../x.json", ".hidden.json", "a/b.json", "a\\b.json", "notes.txt", "/etc/x.json", ""])
def test_import_refuses_unsafe_names(store, tmp_path, name):
    with pytest.raises(KnowledgeWriteError, match="refused"):
        store.import_file(name, '{"a": {"query": "q", "document": "d"}}')
    assert not (tmp_path / "x.json").exists()


def test_lock_dir_inside_knowledge_folder_is_refused(kb_dir):
    with pytest.raises(KnowledgeWriteError, match="inside the knowledge folder"):
        KnowledgeStore(kb_dir, kb_dir / ".locks")


def test_busy_lock_gives_a_clear_error(kb_dir, tmp_path):
    holder = KnowledgeStore(kb_dir, tmp_path / "locks")
    waiter = KnowledgeStore(kb_dir, tmp_path / "locks", timeout=0.1)
    with holder._locked("faq.json"), pytest.raises(KnowledgeWriteError, match="another edit"):
        waiter.delete_entry("faq.json", "add")
    assert "add" in read(kb_dir / "faq.json")


def test_leftover_temp_file_does_not_break_loading(store, kb_dir):
    (kb_dir / ".faq.json.12345.tmp").write_text('{"half": ', encoding="utf-8")
    (kb_dir / ".faq.json.tmp.json").write_text('{"half": ', encoding="utf-8")
    store.upsert_entry("faq.json", "extra", "q", "d", "")
    assert len(load_entries(kb_dir)) == len(TINY) + 1
    assert store.files() == ["faq.json"]


def _upsert_many(folder: str, lock_dir: str, prefix: str, count: int) -> None:
    store = KnowledgeStore(Path(folder), Path(lock_dir))
    for i in range(count):
        store.upsert_entry("shared.json", f"{prefix}{i}", f"question {prefix}{i}", "answer", "")


def test_concurrent_processes_lose_no_entry(kb_dir, tmp_path):
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork") if "fork" in methods else multiprocessing.get_context("spawn")
    args = [(str(kb_dir), str(tmp_path / "locks"), prefix, 25) for prefix in ("p", "q")]
    procs = [ctx.Process(target=_upsert_many, args=a) for a in args]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    keys = set(read(kb_dir / "shared.json"))
    assert keys == {f"{p}{i}" for p in "pq" for i in range(25)}


def test_concurrent_threads_lose_no_entry(kb_dir, tmp_path):
    threads = [
        threading.Thread(target=_upsert_many, args=(str(kb_dir), str(tmp_path / "locks"), f"t{n}_", 10))
        for n in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(read(kb_dir / "shared.json")) == 40
