"""Faults in the index, the knowledge and the LLM: each is detected, logged, and survived.

Every test here breaks something real on disk or on the wire and checks the handling that copes with it;
without that handling (the try/except in ``_open``, state written after commit, the retry budget, the
degrade-to-retrieval path) the test fails.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot.chat.answer import Strategy
from bot.config.variants import update
from bot.errors import KnowledgeError
from bot.factory import build_bot, build_index, build_knowledge_base
from bot.knowledge.entries import Entry, load_entries
from bot.search.tantivy_searcher import STATE_FILE, TantivySearcher
from bot.search.tokenizer import Tokenizer
from bot.texts import CUT_NOTICE, LLM_DOWN_NOTICE, RETRIEVAL_ONLY_LABEL
from bot.ui.render import html_text
from tests.support.knowledge import ROOT, with_cutoffs
from tests.support.llm_server import Fault

pytestmark = pytest.mark.e2e

TANTIVY_LOG = "bot.search.tantivy_searcher"
WEIGHTS = {"query": 3, "metadata": 2, "document": 1}
FAISS_LOG = "bot.search.faiss_searcher"


# -- helpers -------------------------------------------------------------------
def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut a file to ``keep`` of its size, as a full disk or a crash mid-write would."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def assert_each_entry_is_top_hit(searcher, entries) -> None:
    """Every entry comes back first when searched by its own title."""
    for e in entries:
        hits = searcher.search(e.query, 3)
        assert hits and hits[0].entry.id == e.id, (e.id, [h.entry.id for h in hits])


def warnings_about(caplog, logger: str, path: Path) -> list[str]:
    """Messages at WARNING or above from ``logger`` that name ``path``."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == logger and r.levelno >= logging.WARNING and str(path) in r.getMessage()
    ]


@pytest.fixture
def entries(kb_dir) -> list[Entry]:
    """The tiny knowledge base as entries."""
    return load_entries(kb_dir)


@pytest.fixture
def tantivy_dir(tmp_path, tokenizer, entries) -> Path:
    """A tantivy index of the tiny knowledge base, built and closed."""
    path = tmp_path / "tantivy"
    TantivySearcher(path, tokenizer, WEIGHTS).sync(entries)
    assert (path / "meta.json").is_file() and (path / STATE_FILE).is_file()
    return path


# -- tantivy corruption ----------------------------------------------------------
def _truncate_all(path: Path) -> None:
    for f in path.iterdir():
        if f.is_file():
            truncate(f)


def _truncate_segments(path: Path) -> None:
    # Leaves our state file and tantivy's meta.json intact, so only tantivy's own checks can notice.
    segments = [
        f for f in path.iterdir() if f.is_file() and not f.name.endswith(".json") and not f.name.startswith(".")
    ]
    assert segments
    for f in segments:
        truncate(f)


def _delete_meta(path: Path) -> None:
    (path / "meta.json").unlink()


def _truncate_state(path: Path) -> None:
    truncate(path / STATE_FILE)


def _garbage_state(path: Path) -> None:
    (path / STATE_FILE).write_text("{not json", encoding="utf-8")


def _state_of_wrong_type(path: Path) -> None:
    (path / STATE_FILE).write_text("[1, 2, 3]", encoding="utf-8")


def _truncate_managed(path: Path) -> None:
    truncate(path / ".managed.json")


@pytest.mark.parametrize(
    "damage",
    [
        _truncate_all,
        _truncate_segments,
        _delete_meta,
        _truncate_state,
        _garbage_state,
        _state_of_wrong_type,
        _truncate_managed,
    ],
    ids=lambda f: f.__name__.lstrip("_"),
)
def test_corrupt_tantivy_index_is_rebuilt_with_a_log_line(tantivy_dir, tokenizer, entries, caplog, damage):
    damage(tantivy_dir)
    caplog.set_level(logging.INFO)
    searcher = TantivySearcher(tantivy_dir, tokenizer, WEIGHTS)  # a restart: nothing cached in memory
    report = searcher.sync(entries)
    assert report.rebuilt and report.added == len(entries)
    assert warnings_about(caplog, TANTIVY_LOG, tantivy_dir), [r.getMessage() for r in caplog.records]
    assert searcher.indexed_hashes() == {e.id: e.content_hash for e in entries}
    assert_each_entry_is_top_hit(searcher, entries)
    # The rebuilt index is whole: another restart reuses it without a rebuild.
    assert not TantivySearcher(tantivy_dir, tokenizer, WEIGHTS).sync(entries).changed


def test_rebuild_report_says_the_index_was_unreadable(tantivy_dir, tokenizer, entries):
    _truncate_all(tantivy_dir)
    report = TantivySearcher(tantivy_dir, tokenizer, WEIGHTS).sync(entries)
    assert report.rebuilt and "unreadable" in report.reason


def test_state_from_other_settings_is_rebuilt_with_a_reason(tantivy_dir, tokenizer, entries, caplog):
    state = json.loads((tantivy_dir / STATE_FILE).read_text(encoding="utf-8"))
    (tantivy_dir / STATE_FILE).write_text(json.dumps(dict(state, signature="0:old")), encoding="utf-8")
    caplog.set_level(logging.INFO)
    report = TantivySearcher(tantivy_dir, tokenizer, WEIGHTS).sync(entries)
    assert report.rebuilt and report.added == len(entries)
    assert any("other settings" in r.getMessage() for r in caplog.records if r.name == TANTIVY_LOG)


# -- kill -9 while indexing ------------------------------------------------------
SUBJECTS = [
    "图书馆",
    "食堂",
    "宿舍",
    "体育馆",
    "实验室",
    "教务处",
    "校医院",
    "停车场",
    "快递站",
    "打印店",
    "奖学金",
    "选课系统",
    "校园网",
    "一卡通",
    "考试安排",
    "学生证",
    "研究生院",
    "国际交流处",
    "就业中心",
    "心理咨询室",
]
ASPECTS = [
    "开放时间",
    "怎么办理",
    "在哪里",
    "如何预约",
    "收费标准",
    "联系电话",
    "注意事项",
    "申请流程",
    "需要哪些材料",
    "几点关门",
    "能不能带朋友",
    "周末开不开",
]
PLACES = ["东区", "西区", "南门", "北门", "主楼", "三号楼", "学生中心", "行政楼", "文体中心", "老校区"]


def generate_knowledge(folder: Path, n: int, seed: int = 7) -> None:
    """Write ``n`` campus-FAQ-like entries in a few files; each carries a unique code so it can be found alone."""
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    per_file = 5000
    for start in range(0, n, per_file):
        data = {}
        for i in range(start, min(n, start + per_file)):
            subject, aspect, place = rnd.choice(SUBJECTS), rnd.choice(ASPECTS), rnd.choice(PLACES)
            code = f"kb{i:05d}"
            data[f"e{i}"] = {
                "query": f"{subject}{aspect}？{code}",
                "document": f"{subject}位于{place}，{aspect}请到{rnd.randint(1, 30)}号窗口咨询，"
                f"工作日{rnd.randint(7, 10)}点到{rnd.randint(17, 22)}点。编号{code}",
                "metadata": f"{subject},{aspect},{code}",
            }
        (folder / f"campus_{start // per_file}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


INDEX_CHILD = textwrap.dedent("""
    import sys
    from bot.knowledge.entries import load_entries
    from bot.search.tantivy_searcher import TantivySearcher
    from bot.search.tokenizer import Tokenizer
    TantivySearcher(sys.argv[2], Tokenizer(), {"query": 3, "metadata": 2, "document": 1}).sync(load_entries(sys.argv[1]))
    print("finished", flush=True)
""")


def segment_bytes(path: Path) -> int:
    """Total size of tantivy's segment files under ``path`` (0 when there are none yet).

    Our JSON state and temp files are left out: they can be large too, and counting them could stop the
    writer before it has put a single document on disk.
    """
    if not path.exists():
        return 0
    return sum(
        f.stat().st_size
        for f in path.iterdir()
        if f.is_file() and not f.name.startswith(".") and not f.name.endswith(".json")
    )


@pytest.mark.slow
def test_kill_9_mid_upsert_then_sync_recovers_every_entry(tmp_path):
    knowledge, index_dir = tmp_path / "knowledge", tmp_path / "tantivy"
    generate_knowledge(knowledge, 20_000)
    entries = load_entries(knowledge)
    assert len(entries) == 20_000
    child = subprocess.Popen(
        [sys.executable, "-c", INDEX_CHILD, str(knowledge), str(index_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        # An empty index is a few KB; the doc store grows while documents are added, before the single commit.
        deadline = time.monotonic() + 60
        while segment_bytes(index_dir) < 300_000 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.poll() is None, "indexing finished before it could be killed; raise the entry count"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.stdout is not None
    assert child.returncode == -signal.SIGKILL and child.stdout.read() == b""

    tokenizer = Tokenizer()
    searcher = TantivySearcher(index_dir, tokenizer, WEIGHTS)
    before = searcher.indexed_hashes() or {}
    assert len(before) < len(entries)  # the kill landed before the state said "done"
    report = searcher.sync(entries)
    wanted = {e.id: e.content_hash for e in entries}
    assert searcher.indexed_hashes() == wanted
    assert report.added + report.updated == len(entries) - sum(1 for i, h in before.items() if wanted.get(i) == h)
    assert report.removed == 0
    # Exactly one document per entry: a half-written batch left no duplicates behind.
    assert searcher._index is not None and searcher._index.searcher().num_docs == len(entries)
    for e in entries:
        assert e.id in {h.entry.id for h in searcher.search(e.metadata[-1], 3)}, e.id
    # And the state now on disk is trusted by the next start.
    assert not TantivySearcher(index_dir, tokenizer, WEIGHTS).sync(entries).changed


# -- a bad knowledge edit across a restart -------------------------------------------
def test_malformed_edit_never_replaces_the_last_good_index_across_restart(settings, kb_dir, tokenizer):
    build_bot(settings)  # the app ran once: a good index on disk
    good = load_entries(kb_dir)
    (kb_dir / "faq.json").write_text('{"add": {"query": "怎么添加知识？", "document": ', encoding="utf-8")

    restarted = build_index(settings)
    with pytest.raises(KnowledgeError) as caught:
        restarted.load()
    assert all("faq.json" in p.file for p in caught.value.problems)

    on_disk = TantivySearcher(settings.resolve(settings.state_dir) / "tantivy", tokenizer, WEIGHTS)
    assert on_disk.indexed_hashes() == {e.id: e.content_hash for e in good}
    assert_each_entry_is_top_hit(on_disk, good)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"n": ' + "9" * 5000 + "}"], ids=["deep", "huge-int"])
def test_pathological_knowledge_file_is_a_bad_edit_not_a_crash(settings, kb_dir, text):
    bot = build_bot(settings)
    bot.index.check_interval = 0
    (kb_dir / "pathological.json").write_text(text, encoding="utf-8")
    answer = bot.answer("怎么添加知识？")
    assert answer.hits[0].entry.id == "faq:add"
    assert "pathological.json" in str(bot.index.error)


def test_searcher_after_failed_load_keeps_the_last_good_index(settings, kb_dir, tokenizer):
    build_bot(settings)
    good = load_entries(kb_dir)
    (kb_dir / "faq.json").write_text("[", encoding="utf-8")
    restarted = build_index(settings)
    with pytest.raises(KnowledgeError):
        restarted.load()
    served = restarted.searcher("sparse")  # a caller that carries on after logging the error
    assert served.search("怎么添加知识", 1)[0].entry.id == "faq:add"
    with pytest.raises(KnowledgeError):
        restarted.sync("sparse")  # syncing to "no entries" would wipe the last good index
    on_disk = TantivySearcher(settings.resolve(settings.state_dir) / "tantivy", tokenizer, WEIGHTS)
    assert on_disk.indexed_hashes() == {e.id: e.content_hash for e in good}


def test_restart_with_a_malformed_file_serves_the_last_good_index(settings, kb_dir):
    settings = with_cutoffs(settings, "sparse", 0.5)
    build_bot(settings)
    (kb_dir / "faq.json").write_text('{"add": {"query": ""}}', encoding="utf-8")
    with pytest.raises(KnowledgeError):  # a script or the CLI gets the error, never an answer from an old index
        build_bot(settings)
    restarted = build_bot(settings, keep_last_good=True)  # the app keeps serving
    assert restarted.answer("怎么添加知识？").hits[0].entry.id == "faq:add"
    assert "faq.json" in str(restarted.search.index.error)


def test_first_start_with_a_malformed_file_fails_with_the_problem(settings, kb_dir):
    (kb_dir / "faq.json").write_text('{"add": {"query": ""}}', encoding="utf-8")
    with pytest.raises(KnowledgeError, match="'query' is empty"):
        build_bot(settings)


# -- dense (FAISS + fastText) corruption ---------------------------------------------
@pytest.fixture
def dense(tmp_path, tokenizer, entries):
    """A factory for a FaissSearcher over a small fastText model in tmp (a restart each call), built once."""
    pytest.importorskip("faiss")
    pytest.importorskip("fasttext")
    from bot.search.encoders import FastTextEncoder, FastTextParams
    from bot.search.faiss_searcher import FaissSearcher

    def make():
        encoder = FastTextEncoder(
            tokenizer, tmp_path / "fasttext", params=FastTextParams(dim=16, epoch=5), retrain_after=0.0
        )
        return FaissSearcher(tmp_path / "faiss", encoder, "{query} {metadata}", 0.4, 50_000)

    make().sync(entries)
    return make


def _dense_search_works(searcher, entries) -> None:
    """Searching returns stored entries and raises nothing (ranking quality is not this file's concern)."""
    ids = {e.id for e in entries}
    for e in entries:
        hits = searcher.search(e.query, 3)
        assert hits and {h.entry.id for h in hits} <= ids


@pytest.mark.parametrize("name", ["vectors.faiss", "kbbot-state.json"])
def test_corrupt_faiss_index_is_rebuilt_with_a_log_line(dense, tmp_path, entries, caplog, name):
    truncate(tmp_path / "faiss" / name)
    caplog.set_level(logging.INFO)
    searcher = dense()
    report = searcher.sync(entries)
    assert report.rebuilt and report.added == len(entries) and "unreadable" in report.reason
    assert warnings_about(caplog, FAISS_LOG, tmp_path / "faiss")
    assert searcher.indexed_hashes() == {e.id: e.content_hash for e in entries}
    _dense_search_works(searcher, entries)


def test_truncated_fasttext_state_retrains(dense, tmp_path, entries, caplog):
    truncate(tmp_path / "fasttext" / "fasttext.json")
    searcher = dense()
    report = searcher.sync(entries)
    assert report.rebuilt and report.added == len(entries)
    _dense_search_works(searcher, entries)


def test_truncated_fasttext_state_says_why(dense, tmp_path, entries, caplog):
    truncate(tmp_path / "fasttext" / "fasttext.json")
    caplog.set_level(logging.INFO)
    dense().sync(entries)
    assert any("fasttext.json" in r.getMessage() and r.levelno >= logging.WARNING for r in caplog.records)


def test_truncated_fasttext_model_is_retrained_with_a_log_line(dense, tmp_path, entries, caplog):
    truncate(tmp_path / "fasttext" / "fasttext.bin")
    caplog.set_level(logging.INFO)
    searcher = dense()
    report = searcher.sync(entries)
    _dense_search_works(searcher, entries)
    # Vectors made with the damaged model cannot be trusted: a new model means every vector is re-encoded.
    assert report.rebuilt and report.added == len(entries)
    assert any("fasttext.bin" in r.getMessage() and r.levelno >= logging.WARNING for r in caplog.records)


@pytest.mark.parametrize("keep", [0.5, 0.0])
def test_truncated_embedding_cache_starts_afresh_with_a_log_line(tmp_path, caplog, keep):
    np = pytest.importorskip("numpy")
    from bot.search.encoders import CACHE_FILE, DOCUMENT, EmbeddingCache, OpenAIEncoder, cache_key

    def make():
        return OpenAIEncoder("http://127.0.0.1:9/v1", "emb", "sk-unused", tmp_path / "emb")

    keys = [cache_key(make().signature(), DOCUMENT, f"text {i}") for i in range(200)]
    first = EmbeddingCache(tmp_path / "emb" / CACHE_FILE)
    first.put_many({k: np.ones(8, dtype=np.float32) for k in keys})
    first.close()
    truncate(tmp_path / "emb" / CACHE_FILE, keep)
    caplog.set_level(logging.INFO)
    encoder = make()
    assert encoder.cache.get_many(keys, 8) == {}  # an empty file is an empty cache; a cut one is moved aside
    encoder.cache.put_many({keys[0]: np.ones(8, dtype=np.float32)})
    assert len(encoder.cache) == 1
    if keep:
        assert warnings_about(caplog, "bot.search.encoders.cache", tmp_path / "emb" / CACHE_FILE)
        assert (tmp_path / "emb" / f"{CACHE_FILE}.damaged").is_file()


# -- LLM faults through the Bot (complements tests/chat/test_bot.py) ----------------------------
@pytest.fixture
def llm_bot_factory(llm_settings, llm_server):
    """Build a Bot against the local server with a given retry budget and timeout."""
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = lambda body: "根据参考资料 [1]，放进 knowledge 文件夹即可。"

    def make(max_retries: int = 0, timeout: float = 5.0):
        return build_bot(update(llm_settings, {"llm.max_retries": max_retries, "llm.timeout": timeout}))

    return make


def test_500_then_success_is_retried_and_answered_by_the_llm(llm_bot_factory, llm_server):
    bot = llm_bot_factory(max_retries=1)
    llm_server.fail(Fault(status=500))
    answer = bot.answer("怎么添加知识？")
    assert answer.llm_used and answer.notice is None
    assert answer.text == "根据参考资料 [1]，放进 knowledge 文件夹即可。"
    assert len(llm_server.requests) == 2


def test_5xx_persisting_past_retries_degrades_to_retrieval_with_sources(llm_bot_factory, llm_server, llm_settings):
    from bot.ui.app import ChatHandlers

    bot = llm_bot_factory(max_retries=1)
    llm_server.fail(Fault(status=503), Fault(status=502))
    handlers = ChatHandlers(build_knowledge_base(llm_settings, bot), llm_settings)
    *_, (history, _, sources, *_) = handlers.chat("怎么添加知识？", [])
    reply = html_text(history[-1]["content"])  # the page shows the answer's Markdown rendered
    assert reply.startswith(LLM_DOWN_NOTICE) and RETRIEVAL_ONLY_LABEL in reply and "knowledge 文件夹" in reply
    assert LLM_DOWN_NOTICE in sources and "怎么添加知识？" in sources
    assert len(llm_server.requests) == 2


def test_429_storm_shorter_than_the_retry_budget_is_ridden_out(llm_bot_factory, llm_server):
    bot = llm_bot_factory(max_retries=2)
    llm_server.fail(Fault(status=429), Fault(status=429))
    answer = bot.answer("怎么添加知识？")
    assert answer.llm_used and answer.text.startswith("根据参考资料")
    assert len(llm_server.requests) == 3


def test_429_storm_longer_than_the_retry_budget_degrades_in_bounded_time(llm_bot_factory, llm_server):
    bot = llm_bot_factory(max_retries=2)
    llm_server.fail(*[Fault(status=429)] * 10)
    start = time.monotonic()
    answer = bot.answer("怎么添加知识？")
    assert time.monotonic() - start < 15  # openai backs off 0.5 s, 1 s (+ jitter): never hangs the turn
    assert not answer.llm_used and answer.text.startswith(LLM_DOWN_NOTICE)
    assert answer.hits[0].entry.id == "faq:add" and answer.notice == LLM_DOWN_NOTICE
    assert len(llm_server.requests) == 3  # one try plus max_retries, then it stops asking


def test_timeout_then_success_is_retried(llm_bot_factory, llm_server):
    bot = llm_bot_factory(max_retries=1, timeout=0.5)
    llm_server.fail(Fault(sleep=1.5))
    answer = bot.answer("怎么添加知识？")
    assert answer.llm_used and answer.text.startswith("根据参考资料")
    assert len(llm_server.requests) == 2


def test_stream_cut_before_the_first_token_degrades_instead_of_an_empty_cut_answer(llm_bot_factory, llm_server):
    bot = llm_bot_factory()
    llm_server.fail(Fault(break_after=0))
    answer = bot.answer("怎么添加知识？")
    assert CUT_NOTICE not in answer.text  # nothing was kept, so there is nothing "cut off" to show
    assert answer.text.startswith(LLM_DOWN_NOTICE) and "knowledge 文件夹" in answer.text
    assert answer.strategy is Strategy.DIRECT and answer.hits


def test_stream_cut_is_not_retried(llm_bot_factory, llm_server):
    # A retry would resend the question after the user already saw half an answer; the SDK must not.
    bot = llm_bot_factory(max_retries=2)
    llm_server.reply = lambda body: "这是一段很长的回答，" * 5
    llm_server.fail(Fault(break_after=2))
    answer = bot.answer("怎么添加知识？")
    assert answer.text.endswith(CUT_NOTICE) and answer.text.startswith("这是一段很长")
    assert len(llm_server.requests) == 1
