"""Building the searchers of every retrieval mode from the settings: the sparse engine (tantivy or Elasticsearch,
with its embedded stand-in), the dense encoder and index (FAISS or the search cluster), and hybrid over both.

The one place outside the backends that names them (tests/test_architecture.py); bot.factory assembles the rest of
a Bot around what this builds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config.retrieval import AgreementWeights
from bot.config.settings import Settings
from bot.errors import ConfigError, SearchBackendError
from bot.search.agreeing import AgreeingSearcher
from bot.search.aliases import AliasMiner
from bot.search.base import ModeSearcher, Searcher
from bot.search.crosslingual import QueryTranslator, bundled_dictionary
from bot.search.homophones import Homophones
from bot.search.relevance import SparseSearcher
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import Tokenizer

if TYPE_CHECKING:
    from bot.search.encoders import Encoder
    from bot.search.es_searcher import ElasticsearchSearcher
    from bot.search.es_vectors import ClusterVectors
    from bot.search.faiss_searcher import FaissSearcher

log = logging.getLogger("bot.factory")  # the start's messages keep the logger they always had


def build_tokenizer(settings: Settings) -> Tokenizer:
    """The shared jieba tokenizer, with the optional user dictionary."""
    user_dict = settings.resolve(settings.knowledge.user_dict) if settings.knowledge.user_dict else None
    return Tokenizer(user_dict=user_dict, cache_dir=settings.resolve(settings.state_dir) / "jieba")


def build_synonyms(settings: Settings, tokenizer: Tokenizer) -> Synonyms | None:
    """The synonym file of ``knowledge.synonyms`` (re-read when it changes) with the aliases mined from the
    knowledge (``knowledge.aliases``), or None when neither is wanted."""
    k = settings.knowledge
    if not k.synonyms and not k.aliases:
        return None
    path = settings.resolve(k.synonyms) if k.synonyms else None
    return Synonyms(path, tokenizer, miner=AliasMiner(tokenizer) if k.aliases else None)


def translator(settings: Settings, tokenizer: Tokenizer) -> QueryTranslator | None:
    """The English-to-Chinese query translator of ``retrieval.sparse.translate`` (CC-CEDICT, read on first use),
    or None when it is off."""
    if not settings.retrieval.sparse.translate:
        return None
    return QueryTranslator(bundled_dictionary, tokenizer)


def sparse_searcher(settings: Settings, tokenizer: Tokenizer) -> SparseSearcher:
    """The configured sparse engine: embedded tantivy, or Elasticsearch checked reachable; with
    ``fallback_to_embedded``, an unreachable Elasticsearch is replaced by tantivy built with a visible notice."""
    from bot.search.tantivy_searcher import TantivySearcher

    path = settings.resolve(settings.state_dir) / "tantivy"
    weights: dict[str, int] = dict(settings.retrieval.sparse.field_weights.items())  # field name -> weight
    if settings.retrieval.sparse.backend != "elasticsearch":
        return TantivySearcher(path, tokenizer, weights)
    from bot.texts import FALLBACK_NOTICE

    try:
        return elasticsearch_searcher(settings, tokenizer)
    except SearchBackendError as exc:
        if not settings.retrieval.sparse.elasticsearch.fallback_to_embedded:
            raise
        log.warning("Elasticsearch unavailable, falling back to the embedded engine: %s", exc)
        return TantivySearcher(path, tokenizer, weights, notice=FALLBACK_NOTICE, fallback_reason=str(exc))


def es_ca_certs(settings: Settings) -> Path | None:
    """The CA file of ``retrieval.sparse.elasticsearch``, resolved against the config's folder (None: the system's)."""
    ca = settings.retrieval.sparse.elasticsearch.ca_certs
    return settings.resolve(ca) if ca else None


def elasticsearch_searcher(settings: Settings, tokenizer: Tokenizer) -> ElasticsearchSearcher:
    """The Elasticsearch searcher of ``retrieval.sparse``, checked reachable (no fallback: see sparse_searcher)."""
    from bot.search.es_searcher import build_elasticsearch_searcher

    sparse = settings.retrieval.sparse
    weights: dict[str, int] = dict(sparse.field_weights.items())  # field name -> weight
    return build_elasticsearch_searcher(sparse.elasticsearch, weights, tokenizer, es_ca_certs(settings))


def cluster_vectors(settings: Settings, encoder: Encoder) -> ClusterVectors:
    """The dense index on the search cluster of ``retrieval.sparse.elasticsearch`` (index ``<index>-vectors``),
    checked reachable: every replica reads the vectors that whichever replica wrote them encoded."""
    from bot.search.es_client import build_client
    from bot.search.es_cluster import ClusterIndex
    from bot.search.es_searcher import safe_host
    from bot.search.es_vectors import ClusterVectors

    es, d = settings.retrieval.sparse.elasticsearch, settings.retrieval.dense
    hosts = ", ".join(safe_host(h) for h in es.hosts)
    cluster = ClusterIndex(
        build_client(es, es_ca_certs(settings)), f"{es.index}-vectors", hosts, es.shards, es.replicas
    )
    searcher = ClusterVectors(cluster, encoder, d.embed_template, d.question_weight, es.vector_form)
    _ = searcher.form  # reads the server's version: an unreachable cluster stops the start, naming the host
    return searcher


def dense_encoder(settings: Settings, tokenizer: Tokenizer) -> Encoder:
    """The configured encoder of the dense mode: an OpenAI-compatible embeddings endpoint, e5 or fastText."""
    from bot.search.encoders import E5Encoder, FastTextEncoder, FastTextParams, OpenAIEncoder

    state = settings.resolve(settings.state_dir)
    d = settings.retrieval.dense
    encoder: Encoder
    if d.encoder == "openai":
        key = d.openai.api_key()
        if key is None:
            raise ConfigError(
                f"retrieval.dense.encoder is openai but {d.openai.api_key_env} is not set in the environment"
            )
        o = d.openai
        encoder = OpenAIEncoder(
            o.base_url,
            o.model,
            key,
            state / "embeddings",
            o.batch_size,
            o.timeout,
            o.max_retries,
            o.input_type,
            key_env=o.api_key_env,
        )
    elif d.encoder == "e5":
        e = d.e5
        encoder = E5Encoder(state / "embeddings", e.num_threads, e.batch_size, e.variant, build_workers=e.build_workers)
    else:
        f = d.fasttext
        params = FastTextParams(
            dim=f.dim,
            epoch=f.epoch,
            minn=f.minn,
            maxn=f.maxn,
            bucket=f.bucket,
            ws=f.ws,
            lr=f.lr,
            min_count=f.min_count,
            threads=f.threads,
            seed=f.seed,
            subsample=f.subsample,
            neg=f.neg,
            output_vectors=f.output_vectors,
            target_tokens=f.target_tokens,
            max_epoch=f.max_epoch,
        )
        pretrained = settings.resolve(f.pretrained) if f.pretrained else None
        encoder = FastTextEncoder(
            tokenizer, state / "fasttext", pretrained, params, f.sif_a, retrain_after=f.retrain_after
        )
    return encoder


def searcher_factories(
    settings: Settings, tokenizer: Tokenizer, synonyms: Synonyms | None = None
) -> dict[str, Callable[[], ModeSearcher]]:
    """mode -> a function that builds that mode's searcher (called lazily, on first use); every mode searches with
    ``synonyms`` (default: built from the settings)."""
    state = settings.resolve(settings.state_dir)
    # one file for every mode, read now: a bad line stops the start
    synonyms = synonyms if synonyms is not None else build_synonyms(settings, tokenizer)

    def sparse() -> SparseSearcher:
        searcher = sparse_searcher(settings, tokenizer)
        searcher.synonyms = synonyms
        searcher.translator = translator(settings, tokenizer)
        searcher.homophones = Homophones(tokenizer) if settings.retrieval.sparse.homophones else None
        return searcher

    def dense() -> Searcher:
        from bot.search.faiss_searcher import FaissSearcher

        d = settings.retrieval.dense
        encoder = dense_encoder(settings, tokenizer)
        searcher: FaissSearcher | ClusterVectors
        if d.store == "elasticsearch":
            searcher = cluster_vectors(settings, encoder)
        else:
            searcher = FaissSearcher(state / "faiss", encoder, d.embed_template, d.question_weight, d.hnsw_above)
        searcher.synonyms, searcher.synonym_mode = synonyms, d.synonyms
        return searcher

    def hybrid() -> ModeSearcher:
        from bot.search.base import DenseRetriever
        from bot.search.hybrid import HybridSearcher

        h = settings.retrieval.hybrid
        dense_searcher = built_dense()
        assert isinstance(dense_searcher, DenseRetriever)  # built by dense()
        weight = h.sparse_weight.get(settings.retrieval.dense.encoder)
        if weight is None:
            raise ConfigError(
                f"retrieval.hybrid.sparse_weight has no value for the {settings.retrieval.dense.encoder} "
                'encoder; add one (docs/retrieval-and-decision.md "Scores and thresholds")'
            )
        fused = HybridSearcher(
            built_sparse(), dense_searcher, weight, h.candidates, h.language_aware, h.translated_weight
        )
        return agreeing(fused, built_sparse())

    def agreeing(searcher: ModeSearcher, sparse_searcher: SparseSearcher, languages: bool = False) -> AgreeingSearcher:
        """``searcher`` re-scored by agreement with its system's weights (``retrieval.agreement``; none: all 0, and
        the hits still carry the signals, which ``calibrate`` replays other weights from)."""
        weights = settings.retrieval.agreement.get(searcher.system, AgreementWeights())
        return AgreeingSearcher(searcher, sparse_searcher, weights, languages)

    # Memoised so the hybrid mode wraps the very instances the sparse and dense modes use (one index each).
    built: dict[str, Searcher] = {}

    def built_sparse() -> SparseSearcher:
        found = built["sparse"] if "sparse" in built else built.setdefault("sparse", sparse())
        assert isinstance(found, SparseSearcher)  # built by sparse()
        return found

    def built_dense() -> Searcher:
        return built["dense"] if "dense" in built else built.setdefault("dense", dense())

    def dense_mode() -> ModeSearcher:
        # the dense mode reads its candidates' words from the sparse index, as hybrid does (the hybrid mode shares
        # the bare dense searcher: it scores the dense side before agreement); an entry in another language than
        # the message is marked, so that words, which cannot match across languages, do not count against it
        return agreeing(built_dense(), built_sparse(), languages=True)

    return {"sparse": lambda: agreeing(built_sparse(), built_sparse()), "dense": dense_mode, "hybrid": hybrid}
