"""Sparse retrieval on an Elasticsearch cluster: BM25 over jieba tokens (or the cluster's own Chinese analyzer)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bot.config.settings import ElasticsearchSettings, default_of
from bot.errors import SearchBackendError
from bot.knowledge.entries import Entry, entry_from_record, entry_record
from bot.knowledge.filters import EntryFilter
from bot.search.base import FILTER_DEPTH, Hit, Progress, top_within
from bot.search.es_client import (
    _require,
    build_client,
    bulk,
    guard,
)
from bot.search.es_cluster import ClusterIndex
from bot.search.relevance import (
    FIELDS,
    QuestionWeights,
    SparseSearcher,
    TermStats,
    query_text,
    unit_terms,
    weighted_text,
)
from bot.search.synonyms import Unit
from bot.search.tokenizer import Tokenizer

log = logging.getLogger(__name__)

TEXT_FIELD = "all"
SCHEMA_VERSION = "2"
DOCKER_HINT = (
    "docker run -d --name kbbot-es -p 9200:9200 -e discovery.type=single-node "
    "-e xpack.security.enabled=false -e ES_JAVA_OPTS='-Xms1g -Xmx1g' "
    "docker.elastic.co/elasticsearch/elasticsearch:9.1.5"
)


def safe_host(url: str) -> str:
    """A host URL without any user:password part, fit for messages and logs."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def mapping(analyzer: str, signature: str) -> dict:
    """The explicit index mapping: analyzed token fields, the id and hash, and the original entry for display."""
    props: dict[str, dict] = {"id": {"type": "keyword"}, "hash": {"type": "keyword", "index": False}}
    props[TEXT_FIELD] = {"type": "text", "analyzer": analyzer}
    props["entry"] = {"type": "object", "enabled": False}
    return {
        "dynamic": "strict",
        "_meta": {"kbbot": {"schema": SCHEMA_VERSION, "signature": signature}},
        "properties": props,
    }


def _layout(props: Mapping[str, Any]) -> dict[str, tuple]:
    return {
        name: (p.get("type", "object"), p.get("analyzer"), p.get("index", True), p.get("enabled", True))
        for name, p in props.items()
    }


class ElasticsearchSearcher(SparseSearcher):
    """BM25 on an Elasticsearch index: one field of all an entry's words, each field's repeated by its weight."""

    name = "elasticsearch"
    notice: str | None = None

    def __init__(
        self,
        client: Any,
        index: str,
        tokenizer: Tokenizer,
        field_weights: Mapping[str, int],
        analyzer: str = default_of(ElasticsearchSettings, "analyzer"),
        shards: int = default_of(ElasticsearchSettings, "shards"),
        replicas: int = default_of(ElasticsearchSettings, "replicas"),
        chunk_size: int = 500,
        page_size: int = 5000,
    ):
        es = _require()
        self._errors = es
        self.client = client
        self.index = index
        super().__init__(tokenizer)
        self.field_weights = {f: int(field_weights.get(f, 1)) for f in FIELDS}
        self.analyzer = analyzer
        self.shards, self.replicas = shards, replicas
        self.chunk_size, self.page_size = chunk_size, page_size
        nodes = getattr(getattr(client, "transport", None), "node_pool", None)
        self.hosts = ", ".join(safe_host(n.base_url) for n in nodes.all()) if nodes is not None else "?"

    @property
    def pre_tokenized(self) -> bool:
        """True when we send jieba tokens (whitespace analyzer) rather than raw text to a cluster-side analyzer."""
        return self.analyzer == "whitespace"

    def signature(self) -> str:
        """Schema version, analyzer and (for jieba tokens) the tokenizer's rules; a change forces a rebuild."""
        weights = "".join(str(self.field_weights[f]) for f in FIELDS)
        return f"{SCHEMA_VERSION}:{weights}:{self.analyzer}:{self.tokenizer.signature() if self.pre_tokenized else '-'}"

    # -- errors ------------------------------------------------------------
    def _guard(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Turn client failures into SearchBackendError that says what to do; nothing broken is cached."""
        return guard(self._errors, self.hosts, self.index, what)

    def check_reachable(self) -> None:
        """Fail fast at start when the cluster is unreachable, naming the host and how to start one."""
        try:
            with self._guard("connect"):
                self.client.info()
        except SearchBackendError as exc:
            if isinstance(exc.__cause__, self._errors.AuthorizationException):
                return  # reachable; a key limited to index privileges may not read cluster info
            if isinstance(exc.__cause__, self._errors.ApiError):
                raise
            raise SearchBackendError(
                f"cannot reach Elasticsearch at {self.hosts} ({type(exc.__cause__).__name__}). Start a local "
                f"single-node cluster with:\n  {DOCKER_HINT}\nor set retrieval.sparse.elasticsearch.hosts, "
                "or set fallback_to_embedded: true to use the embedded engine meanwhile"
            ) from exc.__cause__

    # -- index lifecycle ---------------------------------------------------
    def _recreate_hint(self) -> str:
        host = self.hosts.split(", ")[0]
        return (
            f"recreate it with `python -m bot index --rebuild`, or delete it with "
            f"`curl -X DELETE '{host}/{self.index}'` (add -u or an Authorization header on a secured cluster) "
            f"and run `python -m bot index`"
        )

    def _meta(self) -> dict | None:
        """Our _meta of the index, None when it is missing; raises when its layout is not ours."""
        found = ClusterIndex(self.client, self.index, self.hosts).mapping()
        if found is None:
            return None
        meta, props = found
        want = mapping(self.analyzer, self.signature())["properties"]
        if _layout({k: props.get(k, {}) for k in want}) != _layout(want):
            raise SearchBackendError(
                f"the Elasticsearch index {self.index!r} at {self.hosts} has a different mapping than this config "
                f"expects (analyzer {self.analyzer!r}, schema {SCHEMA_VERSION}); {self._recreate_hint()}"
            )
        return meta

    def _create(self) -> None:
        body = mapping(self.analyzer, self.signature())
        try:
            with self._guard("create the index"):
                self.client.indices.create(
                    index=self.index,
                    mappings=body,
                    settings={"number_of_shards": self.shards, "number_of_replicas": self.replicas},
                )
        except SearchBackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, self._errors.BadRequestError) and "already_exists" in str(cause.error):
                self._meta()  # another app instance won the race; make sure it made the same layout
                return
            if isinstance(cause, self._errors.BadRequestError) and self.analyzer in str(cause):
                raise SearchBackendError(
                    f"Elasticsearch at {self.hosts} has no analyzer {self.analyzer!r}; install its plugin "
                    "(see docs/elasticsearch.md) or set retrieval.sparse.elasticsearch.analyzer: whitespace"
                ) from cause
            raise

    def reset(self, reason: str) -> None:
        """Drop our index (never a foreign one) and create it empty with the explicit mapping."""
        log.info("recreating Elasticsearch index %s at %s (%s)", self.index, self.hosts, reason)
        try:
            exists = self._meta() is not None
        except SearchBackendError as exc:
            if "not created by kbbot" in str(exc):
                raise
            exists = True  # ours, with an old layout: a rebuild is what was asked for
        if exists:
            with self._guard("delete the old index"):
                self.client.indices.delete(index=self.index)
        self._create()

    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash read from the index (paged with search_after), or None when missing or stale."""
        meta = self._meta()
        if meta is None or meta.get("signature") != self.signature():
            self._stale = "no index yet" if meta is None else "built with other settings (analyzer or schema changed)"
            return None
        hashes: dict[str, str] = {}
        after = None
        while True:
            with self._guard("read the indexed entries"):
                resp = self.client.search(
                    index=self.index,
                    query={"match_all": {}},
                    sort=[{"id": "asc"}],
                    size=self.page_size,
                    source=["hash"],
                    search_after=after,
                    track_total_hits=False,
                )
            page = resp["hits"]["hits"]
            hashes.update((h["_id"], h["_source"].get("hash", "")) for h in page)
            if len(page) < self.page_size:
                return hashes
            after = page[-1]["sort"]

    # -- writes ------------------------------------------------------------
    def _text(self, text: str) -> str:
        return " ".join(self.tokenizer.index_tokens(text)) if self.pre_tokenized else text

    def _doc(self, entry: Entry) -> dict:
        texts = (self._text(query_text(entry)), self._text(" ".join(entry.metadata)), self._text(entry.text))
        return {
            "id": entry.id,
            "hash": entry.content_hash,
            TEXT_FIELD: weighted_text(texts, self.field_weights),
            "entry": entry_record(entry),
        }

    def _bulk(self, actions: Iterable[dict], what: str, progress: Progress | None = None) -> None:
        """Send actions in chunks without refreshing, then refresh once so they are searchable together."""
        bulk(self.client, self.index, actions, self.chunk_size, self._guard(what), what, progress)

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Index (add or replace by id) the entries in bulk; one refresh at the end."""
        if not entries:
            return
        if self._meta() is None:
            self._create()  # never let a bulk auto-create an index with a dynamic mapping
        self._bulk(
            ({"_op_type": "index", "_index": self.index, "_id": e.id, "_source": self._doc(e)} for e in entries),
            "index entries",
            progress,
        )

    def remove(self, ids: Iterable[str]) -> None:
        """Delete entries by id in bulk; unknown ids are ignored."""
        ids = list(ids)
        if ids and self._meta() is not None:
            self._bulk(({"_op_type": "delete", "_index": self.index, "_id": i} for i in ids), "remove entries")

    # -- reads -------------------------------------------------------------
    def _word_query(self, word: str) -> dict:
        return {"term": {TEXT_FIELD: word}} if self.pre_tokenized else {"match": {TEXT_FIELD: word}}

    def _stats_aggs(self, words: Sequence[str]) -> dict:
        """A global aggregation counting, over every entry, the entries holding each word (its document frequency)."""
        return {
            "stats": {"global": {}, "aggs": {f"w{i}": {"filter": self._word_query(w)} for i, w in enumerate(words)}}
        }

    def _unit_query(self, unit: Unit) -> dict:
        """A question word, or a synonym group: any of its words (a word of several terms: all of them, weighed as one
        word by their mean), best scores."""
        if isinstance(unit, str):
            return self._word_query(unit)
        return {
            "dis_max": {
                "queries": [
                    self._word_query(alt[0])
                    if len(alt) == 1
                    else {"bool": {"must": [self._word_query(t) for t in alt], "boost": 1.0 / len(alt)}}
                    for alt in unit
                ]
            }
        }

    @staticmethod
    def _stats(resp: Mapping[str, Any], words: Sequence[str]) -> TermStats:
        agg = resp["aggregations"]["stats"]
        return TermStats(int(agg["doc_count"]), {w: int(agg[f"w{i}"]["doc_count"]) for i, w in enumerate(words)})

    def term_stats(self, words: Sequence[str]) -> TermStats:
        """Document frequencies of ``words`` over the index, and its number of entries (one request)."""
        words = list(dict.fromkeys(words))
        with self._guard("count words"):
            resp = self.client.search(index=self.index, size=0, track_total_hits=False, aggs=self._stats_aggs(words))
        return self._stats(resp, words)

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """BM25 top_k over the weighted field (of the entries ``within`` admits), each hit with its coverage as
        relevance; [] for a word-less query.

        One request (unfiltered): the hits and, in a global aggregation, the statistics coverage needs.
        """
        units, translated = self.searched_units(query)
        if not units or top_k <= 0:
            return []
        terms = unit_terms(units)
        responses: list[Any] = []

        def ranked(size: int) -> list[tuple[float, Entry]]:
            with self._guard("search"):
                resp = self.client.search(
                    index=self.index,
                    size=size,
                    source=["entry"],
                    track_total_hits=within is not None,
                    query={"bool": {"should": [self._unit_query(u) for u in units]}},
                    aggs=self._stats_aggs(terms),
                )
            responses.append(resp)
            return [(float(h["_score"]), entry_from_record(h["_source"]["entry"])) for h in resp["hits"]["hits"]]

        found = ranked(top_k) if within is None else []
        if within is not None:
            first = ranked(top_k * FILTER_DEPTH)
            total = _total_hits(responses[0], len(first))
            found = top_within(lambda n: first if n <= len(first) else ranked(n), lambda r: r[1], within, top_k, total)
        weights = QuestionWeights(units, self._stats(responses[-1], terms))
        return self.follow_ranking([self.sparse_hit(entry, weights, score, translated) for score, entry in found])


def _total_hits(resp: Any, seen: int) -> int:
    """How many documents matched, from a response asked to track them (``seen`` when the server did not say)."""
    total = resp["hits"].get("total")
    value = total.get("value") if isinstance(total, dict) else total
    return int(value) if isinstance(value, int) else seen


def build_elasticsearch_searcher(
    es: ElasticsearchSettings,
    field_weights: Mapping[str, int],
    tokenizer: Tokenizer,
    ca_certs: Path | None = None,
    client: Any = None,
) -> ElasticsearchSearcher:
    """The Elasticsearch searcher of ``es``, checked reachable (SearchBackendError naming the fix when it is not)."""
    searcher = ElasticsearchSearcher(
        client if client is not None else build_client(es, ca_certs),
        es.index,
        tokenizer,
        field_weights,
        analyzer=es.analyzer,
        shards=es.shards,
        replicas=es.replicas,
    )
    searcher.check_reachable()
    return searcher
