"""The index writer alone, over plain in-memory leaves: what serves before and after a sync, healing a broken index,
syncs merged on a busy worker, and the progress a page reads."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import pytest

from bot.errors import ConfigError
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search import writer as writer_module
from bot.search.base import Hit, Progress, Searcher
from bot.search.loading import Loaded
from bot.search.writer import IndexWriter

pytestmark = pytest.mark.unit


def entries(*ids: str) -> list[Entry]:
    return [Entry(id=i, query=f"问题 {i}", document=f"答案 {i}") for i in ids]


class MemoryLeaf(Searcher):
    """An index held in a dict (id -> content hash); ``problem`` is what check() finds, ``gate`` holds upserts."""

    def __init__(self, name: str, held: dict[str, str] | None = None, problem: str | None = None):
        self.name = name
        self.held = held
        self.problem = problem
        self.resets: list[str] = []
        self.upserted: list[list[str]] = []
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        return []

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        held = self.held if self.held is not None else {}
        for entry in entries:
            held[entry.id] = entry.content_hash
            if progress is not None:
                progress(1)
        self.held = held
        self.upserted.append([e.id for e in entries])

    def remove(self, ids: Iterable[str]) -> None:
        for i in ids:
            (self.held or {}).pop(i, None)

    def indexed_hashes(self) -> dict[str, str] | None:
        if self.held == {"unreadable": ""}:
            raise OSError("cannot read the index")
        return dict(self.held) if self.held is not None else None

    def reset(self, reason: str) -> None:
        self.resets.append(reason)
        self.held, self.problem = {}, None

    def check(self) -> str | None:
        return self.problem or super().check()


class Knowledge:
    """What the writer reads when a sync starts: None until the folder is read."""

    def __init__(self) -> None:
        self.current: Loaded | None = None

    def read(self, *ids: str) -> None:
        units = entries(*ids)
        self.current = Loaded(units, units, (len(ids),))


@pytest.fixture
def knowledge() -> Knowledge:
    return Knowledge()


@pytest.fixture
def writer(knowledge: Knowledge) -> IndexWriter:
    return IndexWriter(lambda: knowledge.current)


def test_before_the_knowledge_is_read_what_is_on_disk_serves_and_nothing_is_written(writer):
    on_disk, empty, unreadable = MemoryLeaf("a", {"x": "1"}), MemoryLeaf("b"), MemoryLeaf("c", {"unreadable": ""})
    for leaf in (on_disk, empty, unreadable):
        writer.open(leaf)
    assert [writer.serves(leaf) for leaf in (on_disk, empty, unreadable)] == [True, False, False]
    report = writer.sync(empty)
    assert not report.changed and empty.upserted == [] and writer.serves(empty)  # nothing to sync against
    with pytest.raises(ConfigError, match="not loaded yet"):
        writer.sync_together([on_disk])


def test_a_sync_writes_the_knowledge_read_when_it_starts(writer, knowledge):
    leaf = MemoryLeaf("a")
    knowledge.read("q1", "q2")
    report = writer.sync(leaf)
    assert (report.added, report.rebuilt) == (2, True) and sorted(leaf.held or {}) == ["q1", "q2"]
    assert writer.serves(leaf) and not writer.broken(leaf)
    knowledge.read("q2", "q3")
    assert writer.schedule(leaf).result(10).removed == 1 and sorted(leaf.held or {}) == ["q2", "q3"]


def test_a_broken_index_stops_serving_and_is_rebuilt_when_damaged(writer, knowledge):
    knowledge.read("q1")
    damaged, sound = MemoryLeaf("a"), MemoryLeaf("b")
    for leaf in (damaged, sound):
        writer.sync(leaf)
        leaf.resets.clear()  # the first sync built it from nothing
    damaged.problem = "segment does not match its checksum"
    for leaf in (damaged, sound):
        leaf.gate = threading.Event()
    writer.mark_broken([damaged, sound], RuntimeError("search failed"))
    assert not writer.serves(damaged) and writer.broken(damaged) and writer.broken(sound)
    for leaf in (damaged, sound):
        assert leaf.gate is not None
        leaf.gate.set()
    assert all(w.wait_idle(10) for w in writer.workers())
    assert damaged.resets == ["damaged (segment does not match its checksum)"] and sound.resets == []
    assert writer.serves(damaged) and writer.serves(sound)


def test_a_failed_heal_is_tried_again_only_when_due(writer, knowledge, monkeypatch):
    due, later = MemoryLeaf("a"), MemoryLeaf("b")
    monkeypatch.setattr(writer_module, "RETRY_BROKEN", 0.0)
    writer.mark_broken([due], RuntimeError("backend down"))
    monkeypatch.setattr(writer_module, "RETRY_BROKEN", 3600.0)
    writer.mark_broken([later], RuntimeError("backend down"))
    # nothing read yet: each heal ran and left its index broken
    assert all(w.wait_idle(10) for w in writer.workers()) and writer.broken(due) and writer.broken(later)
    knowledge.read("q1")
    writer.retry(due)
    writer.retry(later)
    assert all(w.wait_idle(10) for w in writer.workers())
    assert due.upserted == [["q1"]] and writer.serves(due)
    assert later.upserted == [] and writer.broken(later)  # tried again only when its hour is up


def test_syncs_waiting_on_a_busy_worker_are_merged_and_the_progress_is_shown(writer, knowledge):
    leaf = MemoryLeaf("a")
    leaf.gate = threading.Event()
    knowledge.read("q1", "q2", "q3")
    first = writer.schedule(leaf)
    assert leaf.started.wait(10)
    assert [(s.name, s.total) for s in writer.building()] == [("a", 3)] and writer.indexing() == {}
    waiting = [writer.schedule(leaf) for _ in range(10)]
    assert all(f is waiting[0] for f in waiting)  # ten saves behind a running sync: one more sync
    knowledge.read("q1", "q2", "q3", "q4")
    leaf.gate.set()
    assert first.result(10).added == 3 and waiting[0].result(10).added == 1
    assert leaf.upserted == [["q1", "q2", "q3"], ["q4"]] and writer.building() == [] and writer.indexing() == {}


def test_a_mode_syncs_all_its_indexes_together_and_rebuilds_on_request(writer, knowledge):
    sparse, dense = MemoryLeaf("sparse", {"old": "h"}), MemoryLeaf("dense")
    knowledge.read("q1")
    report = writer.sync_together([sparse, dense], rebuild=True)
    assert (
        report.rebuilt
        and report.reason == "rebuild requested"
        and sparse.resets == dense.resets == ["rebuild requested"]
    )
    assert sparse.held == dense.held == {"q1": entries("q1")[0].content_hash}
    assert writer.serves(sparse) and writer.serves(dense)
