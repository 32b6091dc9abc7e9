"""The SQLite embedding cache: round trip, size checks, LRU bound, threads, two processes, a busy or damaged file."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from bot.search.encoders import cache as cache_module
from bot.search.encoders.cache import CACHE_FILE, TABLE, EmbeddingCache, cache_key
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.e2e


def keys(n: int, start: int = 0, role: str = "document") -> list[bytes]:
    return [cache_key("sig", role, f"text {i}") for i in range(start, start + n)]


def vec(i: int, dim: int = 8) -> np.ndarray:
    return np.full(dim, i, dtype=np.float32)


def test_keys_depend_on_signature_role_and_text():
    assert (
        len(
            {
                cache_key("a", "r", "t"),
                cache_key("b", "r", "t"),
                cache_key("a", "q", "t"),
                cache_key("a", "r", "u"),
                cache_key("a:", "r", "t"),
                cache_key("a", ":r", "t"),
            }
        )
        == 6
    )
    assert cache_key("a", "r", "t") == cache_key("a", "r", "t") and len(cache_key("a", "r", "t")) == 32


def test_round_trip_and_misses(tmp_path):
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    ks = keys(5)
    assert cache.get_many(ks, 8) == {}
    cache.put_many({k: vec(i) for i, k in enumerate(ks[:3])})
    reopened = EmbeddingCache(tmp_path / CACHE_FILE)
    found = reopened.get_many(ks + ks[:1], 8)
    assert set(found) == set(ks[:3]) and all(np.array_equal(found[k], vec(i)) for i, k in enumerate(ks[:3]))
    assert found[ks[0]].dtype == np.float32 and found[ks[0]].flags.writeable
    assert reopened.get_many([], 8) == {}


def test_wrong_sized_rows_are_misses(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    ks = keys(3)
    cache.put_many({ks[0]: vec(0, 8), ks[1]: vec(1, 4)})
    caplog.set_level(logging.WARNING)
    assert set(cache.get_many(ks, 8)) == {ks[0]}
    assert any("wrong size" in r.getMessage() for r in caplog.records)
    assert set(cache.get_many(ks[:1], None)) == {ks[0]}  # dim None: the first row found sets it


def test_least_recently_used_rows_are_evicted_above_the_cap(tmp_path):
    cache = EmbeddingCache(tmp_path / CACHE_FILE, max_rows=10)
    old = keys(10)
    cache.put_many({k: vec(i) for i, k in enumerate(old)})
    time.sleep(0.01)
    cache.get_many(old[:5], 8)  # used again: newer than old[5:]
    time.sleep(0.01)
    cache.put_many({k: vec(i) for i, k in enumerate(keys(5, 10))})
    assert len(cache) == 9  # evicted down to 90 % of the cap
    left = cache.get_many(old + keys(5, 10), 8, touch=False)
    assert not set(old[5:]) & set(left) and set(keys(5, 10)) <= set(left)


def test_threads_share_one_cache(tmp_path):
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    errors = []

    def work(n):
        try:
            ks = keys(50, n * 50)
            for i in range(0, 50, 10):
                cache.put_many({k: vec(n) for k in ks[i : i + 10]})
                assert len(cache.get_many(ks[: i + 10], 8)) == i + 10
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) == 200


def test_two_processes_write_at_once(tmp_path):
    child = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        from bot.search.encoders.cache import EmbeddingCache, cache_key
        cache = EmbeddingCache(sys.argv[1])
        for i in range(0, 1000, 10):
            batch = range(i, i + 10)
            cache.put_many({{cache_key("sig", "document", f"child {{j}}"): np.ones(8, np.float32) for j in batch}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", child, str(tmp_path / CACHE_FILE)])
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    written = 0
    while proc.poll() is None or written < 200:  # keep writing while the child writes
        cache.put_many({k: vec(1) for k in keys(10, written)})
        written += 10
    assert proc.wait(30) == 0
    assert len(cache) == 1000 + written
    assert len(cache.get_many([cache_key("sig", "document", f"child {j}") for j in range(1000)], 8)) == 1000


def test_a_busy_database_costs_only_the_cache(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(cache_module, "BUSY_SECONDS", 0.1)
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    cache.put_many({keys(1)[0]: vec(0)})
    other = sqlite3.connect(str(tmp_path / CACHE_FILE), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    other.execute(f"DELETE FROM {TABLE}")
    caplog.set_level(logging.WARNING)
    try:
        cache.put_many({keys(1, 1)[0]: vec(1)})  # skipped with a warning, no exception
        assert set(cache.get_many(keys(2), 8)) == {keys(1)[0]}  # WAL: readers see the last commit
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert any("write failed" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / f"{CACHE_FILE}.damaged").exists()  # busy is not damage
    cache.put_many({keys(1, 1)[0]: vec(1)})
    assert len(cache) == 2


@pytest.mark.parametrize("damage", [b"garbage " * 500, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_a_damaged_file_is_moved_aside_and_recreated(tmp_path, caplog, damage):
    path = tmp_path / CACHE_FILE
    path.write_bytes(damage)
    caplog.set_level(logging.WARNING)
    cache = EmbeddingCache(path)
    assert cache.get_many(keys(3), 8) == {}
    cache.put_many({keys(1)[0]: vec(0)})
    assert len(EmbeddingCache(path)) == 1
    assert path.with_name(f"{CACHE_FILE}.damaged").read_bytes() == damage
    assert any("damaged" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)
