"""Dense retrieval: the fastText and OpenAI encoders, the FAISS searcher's lifecycle, hybrid fusion and gating."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from bot.answer import Strategy, Thresholds
from bot.encoders import FastTextEncoder, FastTextParams, OpenAIEncoder
from bot.errors import ConfigError
from bot.factory import build_bot, build_tokenizer, searcher_factories
from bot.knowledge import Entry, load_entries
from bot.search.base import Hit
from bot.search.faiss_searcher import FaissSearcher
from bot.search.hybrid import HybridSearcher
from tests.conftest import TINY, write_knowledge

SMALL = FastTextParams(dim=32, epoch=50, bucket=20_000)  # fast on the tiny knowledge (~0.3 s to train)


@pytest.fixture
def entries(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


def encoder(path: Path, tokenizer, **kw) -> FastTextEncoder:
    return FastTextEncoder(tokenizer, path / "fasttext", params=kw.pop("params", SMALL), sif_a=kw.pop("sif_a", 1.0), **kw)


def dense(path: Path, tokenizer, hnsw_above: int = 50_000, **kw) -> FaissSearcher:
    return FaissSearcher(path / "faiss", encoder(path, tokenizer, **kw), "{query} {metadata}", hnsw_above)


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


# -- encoder -------------------------------------------------------------
def test_training_twice_gives_the_same_vectors(tmp_path, tokenizer, entries):
    texts = [e.query for e in entries] + ["图书馆几点开放", "停车场收费"]
    vectors = []
    for run in ("a", "b"):
        enc = encoder(tmp_path / run, tokenizer)
        assert enc.prepare(entries) == "fastText model trained"
        vectors.append(enc.embed_documents(texts))
    assert np.array_equal(vectors[0], vectors[1])
    assert np.allclose(np.linalg.norm(vectors[0], axis=1), 1.0, atol=1e-5)


def test_zero_vector_guard(tmp_path, tokenizer, entries):
    enc = encoder(tmp_path, tokenizer)
    enc.prepare(entries)
    for text in ["qwxzv plokij", "", "？！"]:
        vec = enc.embed_query(text)
        assert not vec.any() and not np.isnan(vec).any()
    searcher = dense(tmp_path, tokenizer)
    searcher.sync(entries)
    assert searcher.search("qwxzv plokij", 5) == []


def test_missing_pretrained_path_names_path_and_key(tmp_path, tokenizer):
    missing = tmp_path / "nope" / "cc.zh.300.bin"
    with pytest.raises(ConfigError) as err:
        FastTextEncoder(tokenizer, tmp_path / "ft", pretrained=missing)
    assert str(missing) in str(err.value) and "retrieval.dense.fasttext.pretrained" in str(err.value)


def test_pretrained_model_is_used_as_is(tmp_path, tokenizer, entries):
    trained = encoder(tmp_path / "train", tokenizer)
    trained.prepare(entries)
    enc = FastTextEncoder(tokenizer, tmp_path / "unused", pretrained=trained.model_file, params=SMALL)
    assert enc.prepare(entries) is None and enc.signature().startswith("pretrained:")
    assert enc.embed_query("怎么添加知识").shape == (SMALL.dim,)
    assert not (tmp_path / "unused").exists()


# -- FAISS searcher lifecycle -------------------------------------------
def test_index_survives_restart_without_retraining(tmp_path, tokenizer, entries):
    first = dense(tmp_path, tokenizer)
    first.sync(entries)
    expected = [(h.entry.id, round(h.score, 5)) for h in first.search("图书馆几点开放？", 3)]
    model = tmp_path / "fasttext" / "fasttext.bin"
    mtime = model.stat().st_mtime_ns
    reopened = dense(tmp_path, tokenizer)
    assert [(h.entry.id, round(h.score, 5)) for h in reopened.search("图书馆几点开放？", 3)] == expected
    assert not reopened.sync(entries).changed
    assert model.stat().st_mtime_ns == mtime


def test_knowledge_change_retrains_and_rebuilds(tmp_path, tokenizer, entries):
    searcher = FaissSearcher(tmp_path / "faiss", encoder(tmp_path, tokenizer, retrain_after=0.0))
    searcher.sync(entries)
    changed = [dataclasses.replace(e, document="图书馆周末九点开放。") if e.id == "faq:library" else e for e in entries]
    report = searcher.sync(changed)
    assert report.rebuilt and "retrained" in report.reason and report.added == len(entries)
    assert searcher.search("图书馆开放时间", 1)[0].entry.document == "图书馆周末九点开放。"


def test_upsert_encodes_with_the_existing_model(tmp_path, tokenizer, entries):
    searcher = dense(tmp_path, tokenizer)
    searcher.sync(entries)
    model = tmp_path / "fasttext" / "fasttext.bin"
    mtime = model.stat().st_mtime_ns
    searcher.upsert([Entry("faq:gym", "体育馆开放时间", "体育馆每天开放。", ("体育馆",))])
    assert "faq:gym" in ids(searcher.search("体育馆几点开放", 3))
    searcher.remove(["faq:gym", "faq:unknown"])
    assert "faq:gym" not in ids(searcher.search("体育馆几点开放", 6))
    assert model.stat().st_mtime_ns == mtime
    assert set(dense(tmp_path, tokenizer).indexed_hashes()) == {e.id for e in entries}


def test_hnsw_above_the_configured_size(tmp_path, tokenizer, entries):
    searcher = dense(tmp_path, tokenizer, hnsw_above=3)
    searcher.sync(entries)
    assert searcher.kind == "hnsw"
    assert ids(searcher.search("怎么添加知识", 1)) == ["faq:add"]
    # HNSW cannot delete: a replaced or removed entry's old vector is a tombstone, never returned.
    searcher.upsert([dataclasses.replace(entries[0], document="新的内容。")])
    searcher.remove(["faq:canteen"])
    hits = searcher.search("怎么添加知识 食堂在哪里", 10)
    assert "faq:canteen" not in ids(hits) and ids(hits).count("faq:add") == 1
    assert next(h for h in hits if h.entry.id == "faq:add").entry.document == "新的内容。"
    reopened = dense(tmp_path, tokenizer, hnsw_above=3)
    assert reopened.search("怎么添加知识", 1)[0].entry.document == "新的内容。"
    assert reopened.kind == "hnsw"


def test_flat_index_below_the_configured_size(tmp_path, tokenizer, entries):
    searcher = dense(tmp_path, tokenizer, hnsw_above=100)
    searcher.sync(entries)
    assert searcher.kind == "flat"
    assert all(-1.0 - 1e-5 <= h.score <= 1.0 + 1e-5 for h in searcher.search("知识", 6))


# -- hybrid ----------------------------------------------------------------
def test_hybrid_fuses_ranks_and_keeps_component_scores(tmp_path, tokenizer, entries):
    from tests.test_searcher_contract import tantivy_builder

    hybrid = HybridSearcher(tantivy_builder(tmp_path, tokenizer), dense(tmp_path, tokenizer), rrf_k=60)
    hybrid.sync(entries)
    hits = hybrid.search("怎么添加知识", 3)
    assert hits[0].entry.id == "faq:add" and hits[0].searcher == "hybrid"
    assert set(hits[0].scores) == {"tantivy", "faiss"}
    assert hits[0].score == pytest.approx(2 / 61)


def test_hybrid_threshold_passes_when_any_component_passes():
    gate = Thresholds({"tantivy": 10.0, "faiss": 0.8})
    entry = Entry("x", "q", "d")
    fused = lambda scores: Hit(entry, 0.03, "hybrid", scores)  # noqa: E731
    assert gate.passes(fused({"tantivy": 12.0, "faiss": 0.1}))
    assert gate.passes(fused({"faiss": 0.85}))
    assert not gate.passes(fused({"tantivy": 9.0, "faiss": 0.5}))
    assert not gate.passes(fused({}))
    assert gate.passes(Hit(entry, 0.9, "faiss")) and not gate.passes(Hit(entry, 9.0, "tantivy"))


def small_dense_settings(settings):
    f = settings.retrieval.dense.fasttext
    f.dim, f.epoch, f.bucket, f.sif_a = 32, 50, 20_000, 1.0
    settings.retrieval.dense.embed_template = "{query} {metadata}"
    settings.retrieval.dense.threshold = 0.5
    return settings


def test_hybrid_factory_reuses_the_sparse_and_dense_searchers(settings):
    factories = searcher_factories(small_dense_settings(settings), build_tokenizer(settings))
    hybrid = factories["hybrid"]()
    assert hybrid.sparse is factories["sparse"]() and hybrid.dense is factories["dense"]()


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_bot_answers_in_dense_and_hybrid_mode(settings, mode):
    settings.retrieval.mode = mode
    bot = build_bot(small_dense_settings(settings))
    answer = bot.answer("怎么添加知识？")
    assert answer.strategy == Strategy.DIRECT and answer.mode == mode
    assert answer.hits[0].entry.id == "faq:add"
    assert bot.answer("qwxzv plokij").strategy == Strategy.LAST_RESORT


# -- OpenAI-compatible embeddings over real HTTP ---------------------------
class EmbeddingServer:
    """A local /v1/embeddings endpoint: hashed bag of characters, and a log of every request's inputs."""

    def __init__(self, dim: int = 64):
        self.requests: list[list[str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                server.requests.append(inputs)
                data = [{"object": "embedding", "index": i, "embedding": server.vector(t)} for i, t in enumerate(inputs)]
                out = json.dumps({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.dim = dim
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for ch in text:
            if ch.isalnum():
                vec[int(hashlib.md5(ch.encode()).hexdigest(), 16) % self.dim] += 1.0
        return vec


@pytest.fixture
def embedding_server():
    server = EmbeddingServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_openai_encoder_embeds_only_what_changed(tmp_path, entries, embedding_server):
    def build():
        enc = OpenAIEncoder(embedding_server.url, "test-embed", "sk-test", tmp_path / "embeddings", max_retries=0)
        return FaissSearcher(tmp_path / "faiss", enc, "{query} {metadata} {document}")

    searcher = build()
    searcher.sync(entries)
    assert sum(len(r) for r in embedding_server.requests) == len(entries)
    assert ids(searcher.search("图书馆开放时间", 1)) == ["faq:library"]

    embedding_server.requests.clear()
    changed = [dataclasses.replace(e, document="学生食堂在西区。") if e.id == "faq:canteen" else e for e in entries]
    report = build().sync(changed)
    assert (report.updated, report.rebuilt) == (1, False)
    assert embedding_server.requests == [["食堂在哪里？ 食堂 餐饮 学生食堂在西区。"]]

    # A rebuild from scratch takes every vector from the on-disk cache: no request at all.
    embedding_server.requests.clear()
    rebuilt = build()
    rebuilt.reset("test")
    rebuilt.sync(changed)
    assert embedding_server.requests == []


def test_reload_syncs_each_index_once_when_hybrid_shares_them(settings, kb_dir):
    small_dense_settings(settings)
    bot = build_bot(settings)
    bot.index.searcher("hybrid")  # wraps the sparse index the default mode already serves, plus the dense one
    data = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    data["gym"] = {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"}
    (kb_dir / "faq.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    reports = bot.index.load()
    assert set(reports) == {"tantivy", "faiss"}
    assert reports["tantivy"].added == 1
    assert bot.retrieve("体育馆几点关门", "hybrid")[0][0].entry.id == "faq:gym"
