"""Dense retrieval on the search cluster: the entries' vectors stored in Elasticsearch/OpenSearch, kNN there.

One document per vector, as FAISS keeps them (an entry's query, each alternative question, its passage), in a
sibling index ``<index>-vectors`` rather than the BM25 index: BM25 statistics count documents (several vectors per
entry would skew them), the BM25 mapping is strict and knows nothing of the encoder, and a new encoder rebuilds the
vectors alone. Every replica reads the same vectors; only a writer encodes, and only entries whose hash changed
(:meth:`Searcher.sync`), so a second replica syncing the same knowledge encodes nothing.

kNN proposes the candidates (ES ``dense_vector`` + top-level ``knn``, or OpenSearch ``knn_vector`` + a ``knn``
query); their cosines are then computed from the stored vectors exactly as FAISS does (:mod:`dense_scoring`), so the
relevance, and the thresholds on it, are those of the embedded dense mode. A server that stores vectors but cannot
search them (osmem-server, the in-memory test server) is scanned instead, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bot.errors import SearchBackendError
from bot.knowledge.entries import Entry, entry_from_record, entry_record
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, Progress, Searcher, SyncReport, top_within
from bot.search.dense_scoring import DenseScoring, best_cosines, encode_units
from bot.search.encoders import Encoder
from bot.search.encoders.base import DOCUMENT
from bot.search.es_cluster import ClusterIndex

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
CANDIDATES = 4  # vectors fetched per wanted hit before the entries found are scored exactly (as FAISS does)
NUM_CANDIDATES = 100  # Elasticsearch's per-shard HNSW candidates, at least


def cosine_from_score(score: float) -> float:
    """The cosine behind a kNN ``_score``: Elasticsearch's ``cosine`` similarity and OpenSearch's lucene
    ``cosinesimil`` both score (1 + cosine) / 2."""
    return 2.0 * score - 1.0


def vector_field(form: str, dims: int) -> dict:
    """The mapping of the vector field in the cluster's form."""
    if form == "opensearch":
        method = {"name": "hnsw", "space_type": "cosinesimil", "engine": "lucene"}
        return {"type": "knn_vector", "dimension": dims, "method": method}
    return {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine"}


def field_dims(field: dict) -> int | None:
    """The dimensions of a mapped vector field (either form), None when it is no vector field."""
    value = field.get("dims", field.get("dimension"))
    return int(value) if value is not None else None


class ClusterVectors(DenseScoring, Searcher):
    """Cosine similarity between the question's vector and each entry's vectors, stored and kNN-searched on the
    cluster; same roles and relevance as :class:`bot.search.faiss_searcher.FaissSearcher`."""

    name = "es-vectors"

    def __init__(
        self,
        cluster: ClusterIndex,
        encoder: Encoder,
        embed_template: str,
        question_weight: float,
        form: str = "auto",
        page_size: int = 2000,
    ):
        self._init_scoring(encoder, embed_template, question_weight)
        self.cluster = cluster
        self.client, self.index = cluster.client, cluster.index
        self._form = form
        self.page_size = page_size
        self.scanning = False  # the server rejected kNN queries: nearest vectors found by reading them all
        self._stale = "no index yet"

    @property
    def form(self) -> str:
        """elasticsearch or opensearch: the configured form, or the server's distribution for auto."""
        if self._form == "auto":
            try:
                with self.cluster.guard("read the server's version"):
                    info = self.client.info()
            except SearchBackendError as exc:
                if getattr(getattr(exc.__cause__, "meta", None), "status", None) == 403:
                    raise SearchBackendError(
                        f"{exc}; a key that may not read the cluster's info needs "
                        "retrieval.sparse.elasticsearch.vector_form set to elasticsearch or opensearch"
                    ) from exc.__cause__
                raise
            self._form = "opensearch" if info["version"].get("distribution") == "opensearch" else "elasticsearch"
        return self._form

    def signature(self) -> str:
        """Schema, vector form, template and the encoder's model: a change in any means every vector is stale."""
        return f"{SCHEMA_VERSION}:{self.form}:{self.template_hash()}:{self.encoder.signature()}"

    # -- index lifecycle ---------------------------------------------------
    def _layout_problem(self, meta: dict, vector: dict) -> str | None:
        """Why the stored index does not fit these settings (signature, form or dimensions), None when it does."""
        if meta.get("signature") != self.signature():
            return "built with other settings (encoder, template or vector form changed)"
        want = vector_field(self.form, int(meta.get("dims", 0)))["type"]
        dims = field_dims(vector)
        if vector.get("type") != want or dims != meta.get("dims"):
            return f"its vector field is {vector.get('type')} of {dims} dimensions; these settings make {want} of {meta.get('dims')}"
        return None

    def check(self) -> str | None:
        """Why the vectors on the cluster cannot serve: missing, built by other settings, of the wrong dimensions."""
        found = self.cluster.mapping()
        if found is None:
            return "no index yet"
        meta, props = found
        return self._layout_problem(meta, props.get("vector", {}))

    def _dims(self) -> int:
        """The encoder's dimensions (one probe; only a writer rebuilding the index asks)."""
        return int(np.asarray(self.encoder.embed_documents(["kbbot"])).shape[1])

    def reset(self, reason: str, dims: int | None = None) -> None:
        """Drop our vectors index (never a foreign one) and create it empty for the encoder's dimensions."""
        dims = dims or self._dims()
        props = {
            "unit": {"type": "keyword"},  # the document id, to page by (sorting on _id is off by default in ES 8+)
            "entry_id": {"type": "keyword"},
            "hash": {"type": "keyword", "index": False},
            "role": {"type": "keyword"},
            "entry": {"type": "object", "enabled": False},
            "vector": vector_field(self.form, dims),
        }
        meta = {"schema": SCHEMA_VERSION, "signature": self.signature(), "dims": dims, "form": self.form}
        settings = {"index": {"knn": True}} if self.form == "opensearch" else {}
        self.cluster.recreate(reason, {"dynamic": "strict", "_meta": {"kbbot": meta}, "properties": props}, settings)

    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash of the entries whose vectors the cluster holds, None when missing or stale."""
        self._stale = self.check() or ""
        if self._stale:
            return None
        rows = self.cluster.scan({"term": {"role": DOCUMENT}}, ["entry_id", "hash"], self.page_size)
        return {r["entry_id"]: r.get("hash", "") for r in rows}

    def sync(self, entries: Sequence[Entry], progress: Progress | None = None) -> SyncReport:
        """Train the encoder if it is trained on the knowledge (fastText) and that changed, then add/replace/remove
        the diff: only entries whose hash changed are encoded. A new model has a new signature, so the stored vectors
        no longer fit (check()) and all are rebuilt; a replica that trained the same model (same knowledge, same
        seed) finds them fitting and encodes nothing."""
        self.encoder.prepare(entries)
        return super().sync(entries, progress)

    # -- writes ------------------------------------------------------------
    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Encode the entries (once, here) and store their vectors, replacing the old ones of the same ids."""
        entries = list({e.id: e for e in entries}.values())
        if not entries:
            return
        vectors, owners = encode_units(self.encoder, self.unit_texts, entries, progress)
        found = self.cluster.mapping()
        if found is None or self._layout_problem(*(found[0], found[1].get("vector", {}))):
            self.reset("the vectors index does not fit these settings", dims=vectors.shape[1])
        by_id = {e.id: e for e in entries}
        stale = set(self._unit_ids(by_id)) - {f"{eid}#{n}" for n, eid in _numbered(owners)}
        actions: list[dict] = [{"_op_type": "delete", "_index": self.index, "_id": i} for i in sorted(stale)]
        for (entry_id, role), (n, _), vector in zip(owners, _numbered(owners), vectors):
            unit = f"{entry_id}#{n}"
            doc: dict[str, Any] = {"unit": unit, "entry_id": entry_id, "role": role}
            if vector.any():  # a zero vector (word-less text) is left out: a cosine field cannot hold one
                doc["vector"] = vector.tolist()
            if role == DOCUMENT:  # the entry itself once, on its passage vector
                doc |= {"hash": by_id[entry_id].content_hash, "entry": entry_record(by_id[entry_id])}
            actions.append({"_op_type": "index", "_index": self.index, "_id": unit, "_source": doc})
        self.cluster.bulk(actions, "store vectors")

    def _unit_ids(self, entry_ids: Iterable[str]) -> list[str]:
        rows = self.cluster.scan({"terms": {"entry_id": list(entry_ids)}}, ["entry_id"], self.page_size)
        return [r["_id"] for r in rows]

    def remove(self, ids: Iterable[str]) -> None:
        """Delete the entries' vectors; unknown ids are ignored."""
        ids = list(ids)
        if ids and self.cluster.mapping() is not None:
            actions = [{"_op_type": "delete", "_index": self.index, "_id": i} for i in self._unit_ids(ids)]
            self.cluster.bulk(actions, "remove vectors")

    # -- reads -------------------------------------------------------------
    def _units(self, query: dict) -> dict[str, tuple[Entry | None, list[tuple[str, np.ndarray]]]]:
        """entry id -> (entry, its (role, vector) units in stored order) for the unit documents ``query`` selects."""
        out: dict[str, tuple[Entry | None, list[tuple[str, np.ndarray]]]] = {}
        rows = self.cluster.scan(query, ["entry_id", "role", "vector", "entry"], self.page_size)
        for row in sorted(rows, key=lambda r: (r["entry_id"], int(r["_id"].rsplit("#", 1)[1]))):
            entry, units = out.get(row["entry_id"], (None, []))
            if "entry" in row:
                entry = entry_from_record(row["entry"])
            units.append((row["role"], np.asarray(row.get("vector", []), dtype=np.float32)))
            out[row["entry_id"]] = (entry, units)
        return out

    def similarities(self, vector: np.ndarray, entry_ids: Iterable[str]) -> dict[str, Any]:
        """entry id -> its :class:`Cosines` from the stored vectors (unknown ids are left out; nothing is encoded)."""
        ids = list(entry_ids)
        units = self._units({"terms": {"entry_id": ids}}) if ids else {}
        return {i: best_cosines(u, vector, e.phrasings) for i, (e, u) in units.items() if e is not None}

    def _knn(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """(entry id, cosine) of the ``k`` nearest vectors, nearest first (kNN on the cluster)."""
        if self.form == "opensearch":
            body: dict[str, Any] = {"query": {"knn": {"vector": {"vector": vector.tolist(), "k": k}}}}
        else:
            body = {"knn": {"field": "vector", "query_vector": vector.tolist(), "k": k}}
            body["knn"]["num_candidates"] = max(NUM_CANDIDATES, 2 * k)
        try:
            with self.cluster.guard("search vectors"):
                resp = self.client.search(index=self.index, size=k, source=["entry_id"], **body)
        except SearchBackendError as exc:
            if not _unsupported(exc):
                raise
            log.warning("%s cannot search vectors (%s); reading them all for each search instead", self.index, exc)
            self.scanning = True
            return []
        return [(h["_source"]["entry_id"], cosine_from_score(float(h["_score"]))) for h in resp["hits"]["hits"]]

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """Top ``top_k`` entries (of those ``within`` admits) by dense relevance; [] for a word-less query."""
        vector = self.query_vector(query) if top_k > 0 else None
        if vector is None:
            return []
        scored: dict[str, tuple[Entry | None, list[tuple[str, np.ndarray]]]] = {}
        if not self.scanning:
            depth = CANDIDATES * top_k

            def nearest(k: int) -> list[tuple[str, Entry]]:
                ids = list(dict.fromkeys(i for i, _ in self._knn(vector, k)))
                scored.update(self._units({"terms": {"entry_id": [i for i in ids if i not in scored]}}))
                return [(i, e) for i in ids if (e := scored.get(i, (None, []))[0]) is not None]

            found = top_within(nearest, lambda r: r[1], within, depth, self.cluster.count() if within else depth)
        if self.scanning:  # set by _knn on a server without kNN: every stored vector is read and ranked here
            scored = self._units({"match_all": {}})
            found = _nearest_scanned(scored, vector, within, CANDIDATES * top_k)
        hits = [self.hit(e, best_cosines(scored[i][1], vector, e.phrasings)) for i, e in found]
        hits.sort(key=lambda h: -h.relevance)
        return hits[:top_k]


def _nearest_scanned(
    scored: dict[str, tuple[Entry | None, list[tuple[str, np.ndarray]]]],
    vector: np.ndarray,
    within: EntryFilter | None,
    depth: int,
) -> list[tuple[str, Entry]]:
    """The entries of the ``depth`` nearest vectors (of entries ``within`` admits), nearest first: what kNN (and
    FAISS's exact index) proposes, computed from every stored vector."""
    units = [
        (float(v @ vector) if v.size else 0.0, i, e)
        for i, (e, rows) in scored.items()
        if e is not None and (within is None or within.admits(e))
        for _, v in rows
    ]
    units.sort(key=lambda u: -u[0])
    return list({i: (i, e) for _, i, e in units[:depth]}.values())


def _numbered(owners: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(n, entry id) for each unit: its number among its entry's units (the n of its document id ``<entry>#<n>``)."""
    seen: dict[str, int] = {}
    out = []
    for entry_id, _ in owners:
        seen[entry_id] = seen.get(entry_id, -1) + 1
        out.append((seen[entry_id], entry_id))
    return out


def _unsupported(exc: SearchBackendError) -> bool:
    """True when the server refused a kNN search as something it does not do (not a failure of the cluster)."""
    cause = exc.__cause__
    if getattr(getattr(cause, "meta", None), "status", None) != 400:
        return False
    text = str(cause).lower()
    return any(w in text for w in ("not supported", "unsupported_operation", "unknown key", "unknown query"))
