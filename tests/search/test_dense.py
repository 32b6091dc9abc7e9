"""Dense retrieval: the fastText and OpenAI encoders, the FAISS searcher's lifecycle and relevance (hybrid: test_hybrid.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest

from bot.chat.answer import Cutoffs, Strategy
from bot.config.variants import replace, update
from bot.errors import ConfigError
from bot.factory import build_bot
from bot.knowledge.entries import Entry, load_entries
from bot.search.base import dense_leaf
from bot.search.encoders import FastTextEncoder, FastTextParams, OpenAIEncoder
from bot.search.faiss_searcher import FaissSearcher
from tests.support.http_stub import StubServer
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.ports import free_port

pytestmark = pytest.mark.unit

SMALL_FASTTEXT = {"dim": 32, "epoch": 50, "bucket": 20_000, "sif_a": 1.0}

# Fast on the tiny knowledge (~0.3 s to train): 50 epochs flat. The epoch budget (target_tokens) would give the
# tiny knowledge 1,000 epochs; it has tests of its own below. Output vectors are on, as shipped.
SMALL = FastTextParams(dim=32, epoch=50, bucket=20_000, target_tokens=0)
QUESTION_WEIGHT = 0.4


@pytest.fixture
def entries(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


def vector(encoder, word: str) -> np.ndarray:
    """A fastText encoder's vector of ``word`` (the test relies on it having one)."""
    found = encoder._word_vector(word)
    assert found is not None, word
    return found


def encoder(path: Path, tokenizer, **kw) -> FastTextEncoder:
    return FastTextEncoder(
        tokenizer,
        path / "fasttext",
        params=kw.pop("params", SMALL),
        sif_a=kw.pop("sif_a", 1.0),
        retrain_after=kw.pop("retrain_after", 0.0),
        **kw,
    )


def dense(path: Path, tokenizer, hnsw_above: int = 50_000, **kw) -> FaissSearcher:
    return FaissSearcher(
        path / "faiss", encoder(path, tokenizer, **kw), "{query} {metadata}", QUESTION_WEIGHT, hnsw_above
    )


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


# -- encoder -------------------------------------------------------------
def test_training_twice_gives_the_same_vectors(tmp_path, tokenizer, entries):
    texts = [e.query for e in entries] + ["图书馆几点开放", "停车场收费"]
    vectors = []
    for run in ("a", "b"):  # with the epoch budget (163 epochs here) and output vectors, as shipped
        enc = encoder(tmp_path / run, tokenizer, params=dataclasses.replace(SMALL, target_tokens=20_000))
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
        FastTextEncoder(tokenizer, tmp_path / "ft", pretrained=missing, retrain_after=0.0)
    assert str(missing) in str(err.value) and "retrieval.dense.fasttext.pretrained" in str(err.value)


def test_pretrained_model_is_used_as_is(tmp_path, tokenizer, entries):
    trained = encoder(tmp_path / "train", tokenizer)
    trained.prepare(entries)
    enc = FastTextEncoder(
        tokenizer, tmp_path / "unused", pretrained=trained.model_file, params=SMALL, retrain_after=0.0
    )
    assert enc.prepare(entries) is None and enc.signature().startswith("pretrained:")
    assert enc.embed_query("怎么添加知识").shape == (SMALL.dim,)
    assert not (tmp_path / "unused").exists()


def test_epoch_budget_gives_a_small_corpus_more_epochs_within_bounds():
    p = FastTextParams(epoch=20, target_tokens=950_000, max_epoch=1000)
    assert p.epochs_for(10_000) == 95  # ceil(950k / 10k)
    assert p.epochs_for(9_999) == 96  # rounded up
    assert p.epochs_for(100) == 1000  # capped
    assert p.epochs_for(0) == 1000  # an empty corpus does not divide by zero
    assert p.epochs_for(200_000) == 20  # a large corpus keeps the configured epochs
    assert dataclasses.replace(p, target_tokens=0).epochs_for(100) == 20  # 0 = epoch as configured
    assert dataclasses.replace(p, max_epoch=10).epochs_for(100) == 20  # epoch wins over a lower cap


def trained_args(enc: FastTextEncoder):
    """The arguments fastText saved in the trained .bin (what training really used)."""
    import fasttext

    return fasttext.load_model(str(enc.model_file)).f.getArgs()


def test_training_uses_the_epoch_budget(tmp_path, tokenizer, entries):
    tokens = sum(len(line.split()) for line in encoder(tmp_path, tokenizer).training_lines(entries))
    params = dataclasses.replace(SMALL, epoch=5, target_tokens=40 * tokens, max_epoch=1000)
    enc = encoder(tmp_path / "budget", tokenizer, params=params)
    enc.prepare(entries)
    args = trained_args(enc)
    assert (args.epoch, args.ws, args.neg, args.dim) == (40, SMALL.ws, SMALL.neg, SMALL.dim)
    assert json.loads((tmp_path / "budget" / "fasttext" / "fasttext.json").read_text())["epoch"] == 40
    capped = encoder(tmp_path / "capped", tokenizer, params=dataclasses.replace(params, max_epoch=12))
    capped.prepare(entries)
    assert trained_args(capped).epoch == 12


def test_output_vectors_add_the_output_row_of_known_words_only(tmp_path, tokenizer, entries):
    both = encoder(tmp_path / "io", tokenizer)
    only_input = encoder(tmp_path / "in", tokenizer, params=dataclasses.replace(SMALL, output_vectors=False))
    both.prepare(entries)
    only_input.prepare(entries)
    # Training does not depend on the setting: the same model, read two ways.
    assert both.model_file.read_bytes() == only_input.model_file.read_bytes()
    import fasttext

    model = fasttext.load_model(str(both.model_file))
    word = "图书馆"
    assert word in model.words
    expected = model.get_word_vector(word) + model.get_output_matrix()[model.get_word_id(word)]
    assert np.allclose(vector(both, word), expected, atol=1e-6)
    assert np.allclose(vector(only_input, word), model.get_word_vector(word), atol=1e-6)
    unseen = "停车场"  # not in the knowledge: n-grams only, which have no output row
    assert unseen not in model.words
    assert np.allclose(vector(both, unseen), vector(only_input, unseen), atol=1e-6)
    texts = [e.query for e in entries]
    a, b = both.embed_documents(texts), only_input.embed_documents(texts)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize(
    "change", [{"neg": 5}, {"output_vectors": False}, {"target_tokens": 10_000}, {"max_epoch": 60}, {"ws": 5}]
)
def test_a_changed_training_parameter_retrains(tmp_path, tokenizer, entries, change):
    params = dataclasses.replace(SMALL, target_tokens=20_000, max_epoch=80)  # the budget is capped: 80 epochs
    first = encoder(tmp_path, tokenizer, params=params)
    first.prepare(entries)
    before = first.signature()
    assert encoder(tmp_path, tokenizer, params=params).prepare(entries) is None  # unchanged: reused
    changed = encoder(tmp_path, tokenizer, params=dataclasses.replace(params, **change))
    assert changed.prepare(entries) == "fastText settings changed: model retrained"
    assert changed.signature() != before


def test_pretrained_model_uses_input_vectors_only(tmp_path, tokenizer, entries):
    trained = encoder(tmp_path / "train", tokenizer)  # output_vectors on
    trained.prepare(entries)
    enc = FastTextEncoder(
        tokenizer, tmp_path / "unused", pretrained=trained.model_file, params=SMALL, retrain_after=0.0
    )
    enc.prepare(entries)
    import fasttext

    model = fasttext.load_model(str(trained.model_file))
    assert np.allclose(vector(enc, "图书馆"), model.get_word_vector("图书馆"), atol=1e-6)
    assert not np.allclose(vector(trained, "图书馆"), model.get_word_vector("图书馆"), atol=1e-3)


def test_config_reaches_the_fasttext_encoder(settings, tokenizer):
    from bot.factory import searcher_factories

    settings = replace(settings, "retrieval.dense.encoder", "fasttext")
    given = {"neg": 4, "output_vectors": False, "target_tokens": 1234, "max_epoch": 56, "ws": 7, "dim": 8}
    settings = update(settings, {f"retrieval.dense.fasttext.{k}": v for k, v in given.items()})
    dense = dense_leaf(searcher_factories(settings, tokenizer)["dense"]())
    assert isinstance(dense, FaissSearcher) and isinstance(dense.encoder, FastTextEncoder)
    params = dense.encoder.params
    assert (params.neg, params.output_vectors, params.target_tokens, params.max_epoch, params.ws, params.dim) == (
        4,
        False,
        1234,
        56,
        7,
        8,
    )


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
    searcher = FaissSearcher(
        tmp_path / "faiss",
        encoder(tmp_path, tokenizer, retrain_after=0.0),
        "{query} {metadata}",
        QUESTION_WEIGHT,
        50_000,
    )
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
    assert set(dense(tmp_path, tokenizer).indexed_hashes() or {}) == {e.id for e in entries}


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
    hits = searcher.search("知识", 6)
    assert hits and all(-1.0 - 1e-5 <= h.signals[role] <= 1.0 + 1e-5 for h in hits for role in ("question", "passage"))


# -- relevance ---------------------------------------------------------------
def test_each_entry_has_a_question_and_a_passage_vector(tmp_path, tokenizer, entries):
    searcher = dense(tmp_path, tokenizer)
    searcher.sync(entries)
    assert searcher.unit_texts(entries[0]) == [
        ("question", entries[0].query),
        ("document", f"{entries[0].query} {' '.join(entries[0].metadata)}"),
    ]
    assert searcher._index is not None and int(searcher._index.ntotal) == 2 * len(entries)


def test_relevance_weighs_the_question_and_passage_cosines_and_stays_in_0_1(tmp_path, tokenizer, entries):
    searcher = dense(tmp_path, tokenizer)
    searcher.sync(entries)
    for question in ["怎么添加知识", "图书馆几点开放？", "食堂", "Ollama", "停车场收费", "今天天气怎么样"]:
        for h in searcher.search(question, 6):
            q, p = h.signals["question"], h.signals["passage"]
            assert h.relevance == h.score == pytest.approx(min(1.0, max(0.0, 0.4 * q + 0.6 * p)), abs=1e-6)
            assert 0.0 <= h.relevance <= 1.0
    # The stored question is the user's question: its cosine is 1, whatever the passage adds.
    exact = searcher.search("怎么添加知识？", 1)[0]
    assert exact.entry.id == "faq:add" and exact.signals["question"] == pytest.approx(1.0, abs=1e-5)
    only_question = FaissSearcher(tmp_path / "q-only", searcher.encoder, "{query} {metadata}", 1.0, 50_000)
    only_question.sync(entries)
    assert only_question.search("怎么添加知识？", 1)[0].relevance == pytest.approx(1.0, abs=1e-5)


def small_dense_settings(settings, mode: str = "dense"):
    """Settings for the fastText encoder on the tiny knowledge: a small model, thresholds pinned here."""
    settings = replace(settings, "retrieval.mode", mode)
    settings = update(
        settings,
        {
            "retrieval.dense.encoder": "fasttext",
            **{f"retrieval.dense.fasttext.{k}": v for k, v in SMALL_FASTTEXT.items()},
            "retrieval.dense.embed_template": "{query} {metadata}",
            "retrieval.hybrid.sparse_weight": {**settings.retrieval.hybrid.sparse_weight, "fasttext": 0.5},
        },
    )
    settings = with_cutoffs(settings, "sparse", 0.5)
    settings = with_cutoffs(settings, "dense-fasttext", 0.5)
    settings = with_cutoffs(settings, "hybrid-fasttext", 0.5)
    return settings


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_bot_answers_with_fasttext_in_dense_and_hybrid_mode(settings, mode):
    bot = build_bot(small_dense_settings(settings, mode))
    answer = bot.answer("怎么添加知识？")
    assert answer.strategy == Strategy.DIRECT and answer.mode == mode
    assert answer.hits[0].entry.id == "faq:add" and answer.hits[0].relevance >= 0.5
    assert answer.thresholds == Cutoffs(f"{mode}-fasttext", 0.5, None)
    assert bot.answer("qwxzv plokij").strategy == Strategy.LAST_RESORT


# -- OpenAI-compatible embeddings over real HTTP ---------------------------
class EmbeddingServer:
    """A local /v1/embeddings endpoint: hashed bag of characters, and a log of every request's inputs."""

    def __init__(self, dim: int = 64, key: str | None = None):
        self.requests: list[list[str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                    refused = json.dumps({"error": {"message": "Incorrect API key", "type": "invalid_request_error"}})
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(refused.encode())))
                    self.end_headers()
                    self.wfile.write(refused.encode())
                    return
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                server.requests.append(inputs)
                data = [
                    {"object": "embedding", "index": i, "embedding": server.vector(t)} for i, t in enumerate(inputs)
                ]
                out = json.dumps(
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.dim = dim
        self.server = StubServer(Handler).start()
        self.url = f"{self.server.base}/v1"

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
    server.server.stop()


def test_embedding_errors_say_what_to_check_as_the_llm_errors_do(tmp_path):
    from bot.errors import SearchBackendError

    locked = EmbeddingServer(key="sk-right")
    try:
        wrong = OpenAIEncoder(locked.url, "emb", "sk-wrong", tmp_path / "a", max_retries=0, key_env="KBBOT_EMBED_KEY")
        with pytest.raises(SearchBackendError, match="rejected the API key \\(401\\); check the KBBOT_EMBED_KEY"):
            wrong.embed_questions(["图书馆"])
        right = OpenAIEncoder(locked.url, "emb", "sk-right", tmp_path / "b", max_retries=0)
        assert right.embed_questions(["图书馆"]).shape == (1, 64)
    finally:
        locked.server.stop()
    down = OpenAIEncoder(f"http://127.0.0.1:{free_port()}/v1", "emb", "sk-secret-7", tmp_path / "c", max_retries=0)
    with pytest.raises(SearchBackendError, match="cannot connect .* retrieval.dense.openai.base_url") as err:
        down.embed_questions(["图书馆"])
    assert "sk-secret-7" not in str(err.value)


def test_openai_encoder_embeds_only_what_changed(tmp_path, entries, embedding_server):
    def build():
        enc = OpenAIEncoder(embedding_server.url, "test-embed", "sk-test", tmp_path / "embeddings", max_retries=0)
        return FaissSearcher(tmp_path / "faiss", enc, "{query} {metadata} {document}", QUESTION_WEIGHT, 50_000)

    searcher = build()
    searcher.sync(entries)
    sent = [text for r in embedding_server.requests for text in r]
    assert sorted(sent) == sorted([e.query for e in entries] + [searcher.embed_text(e) for e in entries])
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
