"""Knowledge shared by replicas (``knowledge.shared: postgres``): PostgreSQL holds it, each replica's folder is a copy.

Two replicas here are two knowledge folders and state folders with their own mirror, connection and folder lock,
on one real PostgreSQL server: an edit on one is in the other's index on its next refresh, optimistic versions,
history and restore hold across them, concurrent edits lose nothing, an empty database is seeded once, and a
database that is down keeps the reads serving and refuses the edits.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import psycopg
import pytest

from bot.config.settings import Settings
from bot.config.variants import update
from bot.errors import ConfigError
from bot.factory import build_index, build_store
from bot.knowledge import shared_knowledge
from bot.knowledge.store import ABSENT, KnowledgeWriteError, StaleEditError
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.e2e

DSN_ENV = "KBBOT_TEST_KNOWLEDGE_DSN"


@pytest.fixture
def own_mirrors():
    """The process's mirrors opened by the test are closed and forgotten after it."""
    yield
    for mirror in list(shared_knowledge._mirrors.values()):
        mirror.close()
    shared_knowledge._mirrors.clear()


def replica(settings: Settings, tmp_path: Path, name: str, dsn: str, monkeypatch, knowledge=None) -> Settings:
    """A replica's settings: its own knowledge folder (``knowledge``, else TINY) and state folder, one database."""
    monkeypatch.setenv(DSN_ENV, dsn)
    folder = tmp_path / name / "knowledge"
    write_knowledge(folder, TINY if knowledge is None else knowledge)
    shutil.copytree(settings.resolve(settings.state_dir) / "jieba", tmp_path / name / "state" / "jieba")
    return update(
        settings,
        {
            "knowledge.path": str(folder),
            "state_dir": str(tmp_path / name / "state"),
            "knowledge.shared": "postgres",
            "log.postgres.dsn_env": DSN_ENV,
        },
    )


@pytest.fixture
def pair(settings, tmp_path, pg_dsn, monkeypatch, own_mirrors) -> tuple[Settings, Settings]:
    """Two replicas of the same knowledge on a fresh database."""
    return tuple(replica(settings, tmp_path, n, pg_dsn, monkeypatch) for n in ("a", "b"))  # type: ignore[return-value]


def test_an_entry_added_on_one_replica_is_in_the_others_index_on_its_next_refresh(pair):
    a, b = pair
    store_a, index_b = build_store(a), build_index(b)
    index_b.load()
    new_id = store_a.upsert_entry(
        "faq.json", None, "独角兽住在哪里？", "独角兽住在彩虹山。", "独角兽", expected_version=ABSENT
    )
    assert new_id not in {e.id for e in index_b.entries}
    index_b.check_interval = 3600.0  # the shared store's change is read at once, whatever the interval
    index_b.refresh()
    assert new_id in {e.id for e in index_b.entries}
    folder_a, folder_b = (s.resolve(s.knowledge.path) for s in pair)
    assert (folder_b / "faq.json").read_bytes() == (folder_a / "faq.json").read_bytes()


def test_history_and_restore_work_across_replicas(pair):
    a, b = pair
    store_a, store_b = build_store(a), build_store(b)
    original = store_b.version("faq.json", "add")
    store_a.upsert_entry("faq.json", "add", "怎么添加知识？", "改过的答案", "添加知识", expected_version=original)
    kept = store_b.history("faq.json")  # the version A kept is in B's history
    assert len(kept) == 1 and kept[0].entries == len(TINY)
    store_b.restore("faq.json", kept[0].version)
    assert store_a.version("faq.json", "add") == original  # B's restore is what A reads
    assert len(store_a.history("faq.json")) == 2  # A's edit, kept by B's restore, is in A's history too


def test_a_stale_edit_from_another_replica_is_refused_and_nothing_is_lost(pair):
    store_a, store_b = (build_store(s) for s in pair)
    loaded = store_b.version("faq.json", "mode")
    store_a.upsert_entry("faq.json", "mode", "怎么切换检索模式？", "A 的答案", "", expected_version=loaded)
    with pytest.raises(StaleEditError, match="changed since you loaded it"):
        store_b.upsert_entry("faq.json", "mode", "怎么切换检索模式？", "B 的答案", "", expected_version=loaded)
    for store in (store_a, store_b):
        assert dict(store.entries("faq.json"))["mode"]["document"] == "A 的答案"
    with pytest.raises(StaleEditError, match="already has an entry 'mode'"):
        store_b.upsert_entry("faq.json", "mode", "q", "d", "", expected_version=ABSENT)


def test_an_edit_that_fails_halfway_leaves_the_mirror_as_the_database_has_it(pair):
    store_a, store_b = (build_store(s) for s in pair)
    before = (store_a.folder / "faq.json").read_bytes()
    # The file's replacement fails (a folder where its temp file goes) after its old version went to the history.
    (store_a.folder / f".faq.json.{os.getpid()}.{threading.get_ident()}.tmp").mkdir()
    with pytest.raises(OSError):
        store_a.upsert_entry("faq.json", "mode", "怎么切换检索模式？", "新答案", "", expected_version=None)
    assert (store_a.folder / "faq.json").read_bytes() == before
    assert store_a.history("faq.json") == [] == store_b.history("faq.json")  # the kept version went with the edit


def test_concurrent_adds_on_two_replicas_lose_no_entry(pair):
    stores = [build_store(s) for s in pair]
    added: list[str] = []

    def add(store, who: str) -> None:
        for n in range(5):
            added.append(store.upsert_entry("faq.json", None, f"{who} 的问题 {n}", "答案", "", expected_version=ABSENT))

    threads = [threading.Thread(target=add, args=(store, who)) for store, who in zip(stores, "AB", strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(set(added)) == 10  # every add got its own key: no two replicas took the same next number
    for store in stores:
        keys = [k for k, _ in store.entries("faq.json")]
        assert len(keys) == len(TINY) + 10 and set(added) == {f"faq:{k}" for k in keys if k.isdigit()}


def test_an_empty_database_is_seeded_once_and_then_wins_over_local_files(
    settings, tmp_path, pg_dsn, monkeypatch, own_mirrors, caplog
):
    first = replica(settings, tmp_path, "a", pg_dsn, monkeypatch)
    other = replica(settings, tmp_path, "b", pg_dsn, monkeypatch, knowledge={"x": {"query": "q", "document": "d"}})
    write_knowledge(other.resolve(other.knowledge.path), {"y": {"query": "q2", "document": "d2"}}, "only-b.json")
    build_store(first)  # the first to start seeds the database from its folder
    with caplog.at_level(logging.INFO, logger="bot.knowledge.shared_knowledge"):
        store_b = build_store(other)
    assert store_b.files() == ["faq.json"]  # B's own files were replaced by the shared knowledge
    assert json.loads(store_b.folder.joinpath("faq.json").read_text(encoding="utf-8")) == TINY
    assert "2 local files replaced" in caplog.text
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT area, path FROM knowledge_files WHERE content IS NOT NULL").fetchall()
    assert rows == [("knowledge", "faq.json")]


def test_two_replicas_starting_at_once_on_an_empty_database_seed_it_once(
    settings, tmp_path, pg_dsn, monkeypatch, own_mirrors
):
    own = [{f"{name}-{n}": {"query": f"{name} 问题 {n}", "document": "答案"} for n in range(3)} for name in "ab"]
    replicas = [
        replica(settings, tmp_path, name, pg_dsn, monkeypatch, data) for name, data in zip("ab", own, strict=True)
    ]
    mirrors = [  # each its own connection (build_store would open them one at a time: one mirror per process)
        shared_knowledge.SharedKnowledge(
            pg_dsn,
            "test",
            5,
            r.resolve(r.knowledge.path),
            r.resolve(r.state_dir) / "locks",
            r.resolve(r.state_dir) / "history",
        )
        for r in replicas
    ]
    for m in mirrors:
        m._connection.get()  # connected (tables created) first, so that both reach the lock below together
    with psycopg.connect(pg_dsn) as holder:  # both start while a writer holds the lock: they wait, then one seeds
        holder.execute("SELECT generation FROM knowledge_state FOR UPDATE")
        threads = [threading.Thread(target=m.start) for m in mirrors]
        for t in threads:
            t.start()
        time.sleep(0.5)
    for t in threads:
        t.join(60)
    for m in mirrors:
        m.close()
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT content FROM knowledge_files WHERE path = 'faq.json'").fetchone()
    assert row is not None
    stored = row[0]
    mirrored = [(r.resolve(r.knowledge.path) / "faq.json").read_bytes() for r in replicas]
    assert mirrored == [stored, stored] and json.loads(stored) in own  # one folder seeded it; the other mirrors it


def test_a_database_that_is_down_keeps_reads_serving_and_refuses_edits(
    settings, tmp_path, own_pg, monkeypatch, own_mirrors, caplog
):
    monkeypatch.setattr(shared_knowledge, "RETRY_SECONDS", 0.0)
    a = replica(settings, tmp_path, "a", own_pg.dsn(), monkeypatch)
    own_pg.stop("immediate")
    with caplog.at_level(logging.ERROR, logger="bot.knowledge.shared_knowledge"):
        store, index = build_store(a), build_index(a)  # down at start: the local folder serves
    index.load()
    assert len(index.entries) == len(TINY) and "not synced at start" in caplog.text
    own_pg.start()
    index.refresh()  # the first message once it is back seeds the empty database from this folder
    with psycopg.connect(own_pg.dsn()) as conn:
        assert conn.execute("SELECT path FROM knowledge_files").fetchall() == [("faq.json",)]
    before = (store.folder / "faq.json").read_bytes()
    own_pg.stop("immediate")  # down again, with the connection open
    with pytest.raises(KnowledgeWriteError, match="cannot be reached.*nothing was written"):
        store.upsert_entry("faq.json", None, "新问题", "新答案", "", expected_version=ABSENT)
    assert (store.folder / "faq.json").read_bytes() == before
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="bot.knowledge.shared_knowledge"):
        index.refresh()  # the mirror keeps serving
    assert "unreachable" in caplog.text and own_pg.dsn() not in caplog.text
    assert len(index.entries) == len(TINY)
    own_pg.start()
    store.upsert_entry("faq.json", None, "新问题", "新答案", "", expected_version=ABSENT)
    index.refresh()
    assert len(index.entries) == len(TINY) + 1


def test_shared_knowledge_without_a_valid_dsn_is_refused_naming_the_variable(settings, monkeypatch):
    shared = update(settings, {"knowledge.shared": "postgres", "log.postgres.dsn_env": DSN_ENV})
    monkeypatch.delenv(DSN_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"{DSN_ENV} is empty"):
        build_store(shared)
    monkeypatch.setenv(DSN_ENV, "host=db password=pw-QX7 port")
    with pytest.raises(ConfigError, match=f"{DSN_ENV} is not a valid PostgreSQL DSN") as err:
        build_index(shared)
    assert "QX7" not in str(err.value)
