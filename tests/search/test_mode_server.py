"""The mode server alone, over a fake index writer: what each mode serves while its indexes build, heal or fail, and
which indexes it asks the writer to open, sync and heal."""

from __future__ import annotations

import time
from collections.abc import Iterable

import pytest

from bot.errors import ConfigError, SearchBackendError
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search import serving
from bot.search.base import Composite, Hit, Progress, Searcher, SyncReport
from bot.search.loading import Loaded
from bot.search.serving import ModeServer, ServedSearcher
from bot.texts import BUILDING_ALONE, BUILDING_NOTICE, HEALING_ALONE, HEALING_NOTICE, PARTIAL_NOTICE

pytestmark = pytest.mark.unit

ENTRY = Entry(id="faq:a", query="问题", document="答案")


class Leaf(Searcher):
    """A leaf whose search returns one hit, or raises ``fails``."""

    def __init__(self, name: str, system: str = "sparse"):
        self.name, self.system = name, system
        self.fails: Exception | None = None

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        if self.fails is not None:
            raise self.fails
        return [Hit(ENTRY, 0.9, 9.0, self.name)]

    def upsert(self, entries, progress=None) -> None:
        raise AssertionError("the server never writes")

    def remove(self, ids) -> None:
        raise AssertionError("the server never writes")

    def indexed_hashes(self) -> dict[str, str] | None:
        return None


class Fused(Composite):
    """A hybrid mode over two leaves."""

    def __init__(self, *leaves: Leaf):
        self.name, self.system, self.parts = "hybrid", "hybrid-e5", list(leaves)

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        return [h for leaf in self.parts for h in leaf.search(query, top_k, within)]

    def leaves(self) -> list[Searcher]:
        return list(self.parts)


class FakeWriter:
    """Records what the server asks; ``serving`` and ``broken_ones`` are the writer's answers."""

    def __init__(self) -> None:
        self.serving: set[Searcher] = set()
        self.broken_ones: set[Searcher] = set()
        self.partly: set[Searcher] = set()  # searchable part-way through a first build
        self.opened: list[str] = []
        self.scheduled: list[str] = []
        self.retried: list[str] = []
        self.synced: list[tuple[list[str], bool]] = []

    def open(self, leaf: Searcher) -> None:
        self.opened.append(leaf.name)

    def serves(self, leaf: Searcher) -> bool:
        return leaf in self.serving and leaf not in self.broken_ones

    def serves_partly(self, leaf: Searcher) -> bool:
        return leaf in self.partly and leaf not in self.broken_ones

    def broken(self, leaf: Searcher) -> bool:
        return leaf in self.broken_ones

    def schedule(self, leaf: Searcher) -> None:
        self.scheduled.append(leaf.name)

    def retry(self, leaf: Searcher) -> None:
        self.retried.append(leaf.name)

    def mark_broken(self, leaves: Iterable[Searcher], exc: BaseException) -> None:
        self.broken_ones.update(leaves)

    def sync_together(self, leaves: list[Searcher], progress: Progress | None = None, rebuild: bool = False):
        self.synced.append(([leaf.name for leaf in leaves], rebuild))
        self.serving.update(leaves)
        return SyncReport(added=1)


LOADED = Loaded([ENTRY], [ENTRY], (1,))


def server(writer: FakeWriter, background: bool, loaded: Loaded | None = LOADED, **extra) -> ModeServer:
    sparse, dense = Leaf("tantivy"), Leaf("faiss", "dense-e5")
    factories = {"sparse": lambda: sparse, "dense": lambda: dense, "hybrid": lambda: Fused(sparse, dense), **extra}
    return ModeServer(factories, writer, lambda: loaded, background)


def test_a_script_syncs_a_mode_on_first_use_and_an_unknown_mode_names_the_known():
    writer = FakeWriter()
    modes = server(writer, background=False)
    assert modes.searcher("sparse").name == "tantivy" and writer.synced == [(["tantivy"], False)]
    assert modes.searcher("sparse").name == "tantivy" and len(writer.synced) == 1  # built once
    modes.searcher("hybrid")
    assert modes.leaves() == [modes.searcher("sparse"), modes.searcher("dense")]  # the shared leaves, once each
    with pytest.raises(ConfigError, match="choose one of: sparse, dense, hybrid"):
        modes.searcher("bm42")
    unread = FakeWriter()
    assert server(unread, background=False, loaded=None).searcher("dense").name == "faiss" and unread.synced == []


def wait(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_server_builds_the_sparse_mode_first_and_it_stands_in_until_the_mode_serves():
    writer = FakeWriter()
    modes = server(writer, background=True)
    assert modes.built("dense") is None
    first = modes.searcher("dense")
    assert isinstance(first, ServedSearcher) and first.standing_in
    assert modes.builder.wait_idle(5) and writer.opened == ["tantivy", "faiss"]  # sparse first
    assert writer.scheduled == ["tantivy", "faiss"]  # knowledge read: each index synced in the background
    assert modes.served("dense").notice == BUILDING_ALONE  # nothing serves yet
    writer.partly.add(modes.leaves()[1])
    assert modes.served("dense").notice == PARTIAL_NOTICE and modes.served("dense").name == "faiss"  # part-way
    writer.partly.clear()
    writer.serving.add(modes.leaves()[0])
    stand_in = modes.served("dense")
    assert stand_in.name == "tantivy" and stand_in.notice == BUILDING_NOTICE.format(mode="sparse")
    writer.serving.update(modes.leaves())
    own = modes.served("dense")
    assert own.name == "faiss" and not own.standing_in and modes.wait_ready("dense", 1)


def test_a_failing_search_marks_the_indexes_broken_and_another_mode_stands_in_while_they_heal():
    writer = FakeWriter()
    modes = server(writer, background=True)
    modes.searcher("dense")
    assert modes.builder.wait_idle(5)
    writer.serving.update(modes.leaves())
    sparse, dense = modes.leaves()
    dense.fails = SearchBackendError("index file damaged")  # type: ignore[attr-defined]
    found = modes.served("dense").find("问题", 3)
    assert found.failed and found.hits == () and HEALING_ALONE in found.notices
    assert writer.broken_ones == {dense}
    healing = modes.served("dense")
    assert healing.name == "tantivy" and healing.notice == HEALING_NOTICE.format(mode="sparse")
    assert writer.retried == ["faiss", "faiss"]  # each request asks the writer to heal it again when due
    writer.broken_ones.add(sparse)
    assert modes.served("dense").notice == HEALING_ALONE


def test_a_failing_composite_spares_the_index_that_serves_another_mode_alone_and_checks_fine():
    writer = FakeWriter()
    modes = server(writer, background=True)
    modes.searcher("hybrid")  # the sparse mode is built first: its index serves on its own
    assert modes.builder.wait_idle(5)
    writer.serving.update(modes.leaves())
    sparse, dense = modes.leaves()
    sparse.check = lambda: None  # type: ignore[method-assign]  # its files are sound
    dense.fails = SearchBackendError("index file damaged")  # type: ignore[attr-defined]
    assert modes.served("hybrid").find("问题", 3).failed
    # the sparse index only read for the failed search: it keeps standing in while the dense one heals
    assert writer.broken_ones == {dense}
    assert modes.served("hybrid").name == "tantivy"
    # an index that fails its own check is in doubt too
    writer.broken_ones.clear()
    sparse.check = lambda: "checksum mismatch"  # type: ignore[method-assign]
    assert modes.served("hybrid").find("问题", 3).failed and writer.broken_ones == {sparse, dense}


def test_a_mode_that_cannot_be_built_reports_its_error_until_it_is_tried_again(monkeypatch):
    def broken():
        raise SearchBackendError("Elasticsearch unreachable")

    writer = FakeWriter()
    modes = server(writer, background=True, es=broken)
    modes.searcher("es")
    assert modes.builder.wait_idle(5)
    with pytest.raises(SearchBackendError, match="unreachable"):
        modes.searcher("es")
    monkeypatch.setattr(serving, "RETRY_FAILED_BUILD", 0.0)
    assert isinstance(modes.searcher("es"), ServedSearcher)  # the error's time is up: built again
