"""Serving never waits for writing, and damaged indexes heal instead of failing (real files, real corruption).

The app's bot (``build_bot(..., watch_config=True, keep_last_good=True)``) runs its index updates in background
workers: these tests hold a worker back on purpose (an encoder that waits for an event) and check that chats and
searches are answered meanwhile, then that the mode switches once the index is ready.
"""

from __future__ import annotations

import json
import struct
import threading
import time

import numpy as np
import pytest

from bot.chat.answer import Strategy
from bot.config.variants import replace
from bot.factory import build_bot, build_index
from bot.knowledge.entries import load_entries
from bot.search.encoders.base import Encoder, normalize_rows
from bot.search.index import KnowledgeIndex
from bot.search.integrity import clean_stale_temp
from bot.search.tantivy_searcher import TantivySearcher
from bot.texts import BUILDING_ALONE, HEALING_ALONE
from tests.support.fault_injection import plant_stale_temp, scramble, segment_files
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.llm_scripts import ANSWER, HARD, kind

pytestmark = pytest.mark.unit

WEIGHTS = {"query": 3, "metadata": 2, "document": 1}
BUILDING = "Index building"
HEALING = "being rebuilt"


def app_bot(settings):
    """The bot as app.py builds it: background index workers, last good index kept."""
    return build_bot(settings, watch_config=True, keep_last_good=True)


def fasttext_settings(settings, mode: str = "dense"):
    """A small, quick fastText model for the dense mode."""
    pytest.importorskip("faiss")
    pytest.importorskip("fasttext")
    settings = replace(settings, "retrieval.mode", mode)
    settings = replace(settings, "retrieval.dense.encoder", "fasttext")
    settings = replace(settings, "retrieval.dense.fasttext.dim", 16)
    settings = replace(settings, "retrieval.dense.fasttext.target_tokens", 0)
    settings = with_cutoffs(settings, "sparse", 0.5)
    settings = with_cutoffs(settings, "dense-fasttext", 0.3)
    return settings


@pytest.fixture
def gate(monkeypatch):
    """An event the FAISS encoding waits for: while it is clear, every dense index build or update is held back."""
    from bot.search.faiss_searcher import FaissSearcher

    event = threading.Event()
    encode = FaissSearcher._encode

    def held(self, entries, progress):
        assert event.wait(60), "the test never released the encoder"
        return encode(self, entries, progress)

    monkeypatch.setattr(FaissSearcher, "_encode", held)
    yield event
    event.set()


# -- the app serves at once ----------------------------------------------------------
def test_app_answers_at_once_from_sparse_while_dense_builds_then_switches(settings, gate):
    bot = app_bot(fasttext_settings(settings))
    deadline = time.monotonic() + 30
    answer = bot.answer("怎么添加知识？")
    while not answer.hits and time.monotonic() < deadline:  # the sparse stand-in is built first (quick)
        assert BUILDING in (answer.notice or ""), answer.notice
        time.sleep(0.05)
        answer = bot.answer("怎么添加知识？")
    assert answer.hits[0].entry.id == "faq:add" and answer.hits[0].searcher == "tantivy"
    assert "sparse" in answer.notice and BUILDING in answer.notice
    assert BUILDING in (bot.status().notice or "")

    gate.set()
    assert bot.index.wait_idle(60)
    answer = bot.answer("怎么添加知识？")
    assert answer.hits and answer.hits[0].searcher == "faiss" and BUILDING not in (answer.notice or "")
    assert BUILDING not in (bot.status().notice or "")


def test_a_chat_turn_schedules_the_reload_and_never_waits_for_it(settings, kb_dir, gate):
    gate.set()
    bot = app_bot(fasttext_settings(settings))
    assert bot.index.wait_idle(60)
    bot.index.check_interval = 0
    gate.clear()  # the next dense update hangs until released
    write_knowledge(
        kb_dir,
        {"gym": {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"}},
        "more.json",
    )
    start = time.monotonic()
    answer = bot.answer("怎么添加知识？")
    assert time.monotonic() - start < 10 and answer.hits[0].entry.id == "faq:add"
    assert answer.hits[0].searcher == "faiss"  # the last good dense snapshot keeps serving
    gate.set()
    assert bot.index.wait_idle(60)
    assert "more:gym" in {h.entry.id for h in bot.retrieve("体育馆几点关门？", "dense")[0]}


# -- a write does not block a search --------------------------------------------------
class SlowEncoder(Encoder):
    """Hashes characters into vectors; documents take ``delay`` seconds a batch, questions are instant."""

    name = "slow"
    batch_size = 4

    def __init__(self, delay: float):
        self.delay = delay

    def signature(self) -> str:
        """Fixed."""
        return "slow:1"

    def embed_documents(self, texts):
        """Slow on purpose."""
        time.sleep(self.delay)
        return self.embed_questions(texts)

    def embed_questions(self, texts):
        """Character-bag vectors."""
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for r, t in enumerate(texts):
            for ch in t:
                rows[r, ord(ch) % 64] += 1
        return normalize_rows(rows)


def test_a_save_does_not_block_a_concurrent_search(tmp_path, kb_dir, tokenizer):
    pytest.importorskip("faiss")
    from bot.search.faiss_searcher import FaissSearcher

    slow = SlowEncoder(0.0)
    dense = FaissSearcher(tmp_path / "faiss", slow, "{query} {document}", 0.5, 50_000)
    factories = {"sparse": lambda: TantivySearcher(tmp_path / "tantivy", tokenizer, WEIGHTS), "dense": lambda: dense}
    index = KnowledgeIndex(kb_dir, tokenizer, factories, background=True)
    index.load()
    index.searcher("dense")
    assert index.wait_idle(60)
    slow.delay = 0.5
    write_knowledge(kb_dir, {f"n{i}": {"query": f"新问题{i}", "document": f"新答案{i}"} for i in range(40)}, "big.json")
    saved = threading.Event()

    def save() -> None:
        index.refresh(force=True, wait=True)
        saved.set()

    saver = threading.Thread(target=save)
    saver.start()  # 40 entries x 2 batches of 4 x 0.5 s: the save takes about 5 s
    time.sleep(0.5)
    for mode in ("dense", "sparse"):
        start = time.monotonic()
        hits = index.searcher(mode).search("怎么添加知识", 3)
        assert time.monotonic() - start < 2 and hits and hits[0].entry.id == "faq:add"
    assert not saved.is_set(), "the save finished before the searches: make the encoder slower"
    saver.join(60)
    assert saved.is_set() and len(index.searcher("dense").leaves()[0].indexed_hashes() or {}) == len(TINY) + 40


# -- healing ----------------------------------------------------------------------------
def test_random_bytes_in_tantivy_segments_heal_instead_of_failing_the_chat(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = app_bot(settings)
    assert bot.index.wait_idle(60) and bot.answer("怎么添加知识？").hits
    folder = settings.resolve(settings.state_dir) / "tantivy"
    for f in segment_files(folder):
        scramble(f)
    answers = [bot.answer(q) for q in ("怎么添加知识？", "食堂在哪里？", "阈值是什么意思？")]  # no exception
    assert any(HEALING in (a.notice or "") for a in answers), [a.notice for a in answers]
    assert bot.index.wait_idle(60)
    answer = bot.answer("怎么添加知识？")
    assert answer.hits[0].entry.id == "faq:add" and HEALING not in (answer.notice or "")
    assert TantivySearcher(folder, bot.index.tokenizer, WEIGHTS).indexed_hashes() is not None  # whole on disk again


def test_a_search_failing_in_the_rewrite_rung_is_healed_and_reported_like_the_main_search(
    llm_settings, llm_server, monkeypatch, caplog
):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    bot = app_bot(replace(llm_settings, "fallback.chain", ["rewrite", "last_resort"]))
    assert bot.index.wait_idle(60)
    leaf = bot.index.searcher("sparse").leaves()[0]
    armed, search = threading.Event(), leaf.search
    rewrites: list[str] = []

    def fails_once_armed(query, top_k, within=None):  # the index's files go away under the rung's first search
        if armed.is_set():
            armed.clear()
            raise OSError("injected: the index files went away")
        return search(query, top_k, within)

    def reply(body):
        if kind(body) == "rewrite":
            if not rewrites:
                armed.set()  # the first turn's main search is done: only its rung's first search fails
            rewrites.append(body)
            return "怎么添加知识？\n如何往知识库里加资料"
        return ANSWER

    monkeypatch.setattr(leaf, "search", fails_once_armed)
    llm_server.reply = reply
    answer = bot.answer(HARD)  # no exception
    assert not armed.is_set() and "healing the index in the background" in caplog.text
    assert HEALING in (answer.notice or ""), answer.notice
    assert bot.index.wait_idle(60)
    again = bot.answer(HARD)
    assert again.strategy is Strategy.REWRITE and again.hits[0].entry.id == "faq:add"
    assert HEALING not in (again.notice or "")


def test_tantivy_body_damage_is_found_at_open_by_its_checksums(tmp_path, kb_dir, tokenizer, caplog):
    entries = load_entries(kb_dir)
    TantivySearcher(tmp_path / "t", tokenizer, WEIGHTS).sync(entries)
    for f in segment_files(tmp_path / "t"):
        data = f.read_bytes()
        body = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
        at = body // 2
        with open(f, "r+b") as fh:  # the middle of the body, footers intact: tantivy itself opens it fine
            fh.seek(at)
            fh.write(bytes(255 - b for b in data[at : at + 4]))
    report = TantivySearcher(tmp_path / "t", tokenizer, WEIGHTS).sync(entries)
    assert report.rebuilt and "checksum" in report.reason


def test_damaged_faiss_body_is_detected_and_rebuilt_never_served(tmp_path, kb_dir, tokenizer):
    pytest.importorskip("faiss")
    from bot.search.faiss_files import INDEX_FILE
    from bot.search.faiss_searcher import FaissSearcher

    entries = load_entries(kb_dir)

    def make():
        return FaissSearcher(tmp_path / "faiss", SlowEncoder(0.0), "{query} {document}", 0.5, 50_000)

    make().sync(entries)
    scramble(tmp_path / "faiss" / INDEX_FILE, share=0.3)
    searcher = make()
    assert searcher.indexed_hashes() is None and "checksum" in (searcher.check() or "")
    report = searcher.sync(entries)
    assert report.rebuilt and report.added == len(entries)
    for e in entries:
        assert searcher.search(e.query, 1)[0].entry.id == e.id
        assert searcher.search(e.query, 1)[0].relevance <= 1.0


def test_damaged_fasttext_model_the_app_starts_and_retrains(settings):
    settings = fasttext_settings(settings)
    first = app_bot(settings)
    assert first.index.wait_idle(60)
    model_dir = settings.resolve(settings.state_dir) / "fasttext"
    scramble(model_dir / "fasttext.bin", share=0.05)
    bot = app_bot(settings)  # a restart: must not raise
    # Every chat while it heals is answered (by the sparse mode standing in, saying so), none left empty:
    # a search that finds the damage itself is searched again with the stand-in.
    for _ in range(5):
        answer = bot.answer("怎么添加知识？")
        assert answer.hits and answer.hits[0].entry.id == "faq:add", answer.notices
        assert answer.hits[0].searcher == "faiss" or answer.notices
    deadline = time.monotonic() + 60  # the retrained model comes back on its own
    while True:
        assert bot.index.wait_idle(120)
        answer = bot.answer("怎么添加知识？")
        if answer.hits[0].searcher == "faiss" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert answer.hits and answer.hits[0].searcher == "faiss" and not answer.notice
    state = json.loads((model_dir / "fasttext.json").read_text(encoding="utf-8"))
    from bot.search.integrity import file_digest

    assert state["model_digest"] == file_digest(model_dir / "fasttext.bin")
    assert not [p for p in model_dir.iterdir() if p.name.startswith(".kbbot-ft-")]  # staging folder gone


def test_stale_temp_files_of_a_dead_process_are_removed_at_start_a_live_ones_kept(settings):
    state = settings.resolve(settings.state_dir)
    planted = plant_stale_temp(state)
    build_index(settings)
    assert not any(p.exists() for p in planted.stale)
    assert planted.live.exists() and planted.mine.exists()
    assert clean_stale_temp([state]) == 0


def test_notices_are_the_documented_texts():
    assert "索引构建中" in BUILDING_ALONE and BUILDING in BUILDING_ALONE and HEALING in HEALING_ALONE
