"""Dense retrieval: sentence vectors of each entry in a FAISS index, cosine similarity, incremental edits.

Each entry has a *question* vector (its ``query`` embedded in the question role, which e5 matches
symmetrically against the user's question), one more question vector per alternative question
(``questions``), and a *passage* vector (``embed_template`` embedded in the document role). Relevance =
``question_weight`` x question cosine + the rest x passage cosine, where the question cosine is the best over
the query and its alternatives (BENCHMARKS.md "Relevance": the stored question wins on paraphrase FAQ, the
passage on longer documents; "Alternative questions": the best of several vectors beat one vector of them all).

Layout: exact inner product (IndexFlatIP) inside an IndexIDMap2 so single vectors can be removed and
replaced by int64 id. Above ``hnsw_above`` entries the index becomes HNSW (IndexHNSWFlat, inner
product). HNSW cannot delete, so a replaced or removed vector's old id becomes a *tombstone*: it stays in
the graph, searches over-fetch and skip it, and once tombstones exceed a tenth of the live vectors the
graph is rebuilt from the stored vectors (``reconstruct_n``; no re-encoding).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bot.knowledge.entries import Entry, entry_from_record, entry_record
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, Progress, Searcher, SyncReport, top_within
from bot.search.dense_scoring import (
    Cosines,
    DenseScoring,
    best_cosines,
)
from bot.search.encoders import Encoder
from bot.search.faiss_batch import PreparedNearest
from bot.search.faiss_files import (
    SCHEMA_VERSION,
    _import_faiss,
    _search_one_thread,
    read_state,
    write_state,
)
from bot.search.faiss_writes import VectorWrites
from bot.search.progress import announce
from bot.search.staging import restage

log = logging.getLogger(__name__)

HNSW_EF_SEARCH = 64
CANDIDATES = 4  # vectors fetched per wanted hit before the entries found are scored exactly


class FaissSearcher(DenseScoring, VectorWrites, Searcher):
    """Cosine similarity between the question's vector and each entry's question and passage vectors."""

    name = "faiss"

    def __init__(
        self, path: str | Path, encoder: Encoder, embed_template: str, question_weight: float, hnsw_above: int
    ):
        _import_faiss()
        self._init_scoring(encoder, embed_template, question_weight)
        self.path = Path(path)
        self.hnsw_above = hnsw_above
        self._lock = threading.RLock()  # held by readers, and by writers only to swap what readers see
        self._writing = threading.RLock()  # one writer at a time; encoding and saving run outside ``_lock``
        self._generation = 0  # +1 when the encoder's model is swapped (question vectors of the old one are void)
        self._loaded = False
        self._stale = "no index yet"
        self._prepared: PreparedNearest | None = None  # questions' nearest vectors found in one batch
        self._reset_memory()

    def _reset_memory(self) -> None:
        self._recent.clear()
        self._index: Any | None = None  # a faiss index (the library has no type hints), None when empty
        self.kind = "flat"
        self._next_id = 0
        self._units: dict[str, list[int]] = {}  # entry id -> int64 ids of its live vectors
        self._owner: dict[int, tuple[str, str]] = {}  # int64 id -> (entry id, role), live vectors only
        self._tombstones: set[int] = set()
        self._entries: dict[str, Entry] = {}
        self._hashes: dict[str, str] = {}
        self._incomplete: set[str] = set()  # entries whose passage vector a first build has not added yet

    def signature(self) -> str:
        """Schema, template and the encoder's model: a change in any means every vector is stale."""
        return f"{SCHEMA_VERSION}:{self.template_hash()}:{self.encoder.signature()}"

    # -- index lifecycle -------------------------------------------------
    def _open(self) -> bool:
        """Load state and vectors from disk; False (and a reason) when missing, from other settings or unreadable."""
        try:
            loaded = read_state(self.path, self.signature())
        except Exception as exc:  # any failure to read means: rebuild from the knowledge
            self._stale = f"index unreadable ({exc})"
            log.warning("faiss index at %s is unreadable (%s); rebuilding it", self.path, exc)
            return False
        if isinstance(loaded, str):
            self._stale = loaded
            return False
        state, index = loaded
        self._reset_memory()
        self._index, self.kind, self._next_id = index, state["kind"], state["next_id"]
        self._units = {k: [int(i) for i, _ in units] for k, units in state["units"].items()}
        self._owner = {int(i): (k, role) for k, units in state["units"].items() for i, role in units}
        self._tombstones = set(state["tombstones"])
        self._entries = {k: entry_from_record({**d, "id": k}) for k, d in state["entries"].items()}
        self._hashes = {k: e.content_hash for k, e in self._entries.items()}
        return True

    def _ensure(self) -> bool:
        with self._lock:
            if not self._loaded:
                self._loaded = self._open()
            return self._loaded

    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash of the vectors held, or None when there is no usable index."""
        with self._lock:
            return dict(self._hashes) if self._ensure() else None

    def reset(self, reason: str) -> None:
        """Drop every vector (the encoder's model is kept) and save an empty index."""
        with self._writing, self._lock:
            self.path.mkdir(parents=True, exist_ok=True)
            self._reset_memory()
            self._loaded = True
            self._save()

    def _save(self) -> None:
        write_state(
            self.path,
            self._index,
            {
                "signature": self.signature(),
                "kind": self.kind,
                "next_id": self._next_id,
                "units": {k: [[i, self._owner[i][1]] for i in ids] for k, ids in self._units.items()},
                "tombstones": sorted(self._tombstones),
                "entries": {k: entry_record(e) for k, e in self._entries.items()},
            },
        )

    def sync(self, entries: Sequence[Entry], progress: Progress | None = None) -> SyncReport:
        """Retrain the encoder if the knowledge changed (then re-encode everything: bot/search/staging.py), else
        add/replace/remove the diff."""
        with self._writing:
            restaged = restage(self, entries, progress)
            return restaged if restaged is not None else super().sync(entries, progress)

    def rebuild_with(self, entries: Sequence[Entry], reason: str, progress: Progress | None) -> None:
        """Drop every vector and encode ``entries`` again, readers waiting (the encoder's model changed in place)."""
        with self._writing, self._lock:
            self.reset(reason)
            announce(progress, len(entries))
            self.upsert(entries, progress)

    def sibling(self, path: Path, encoder: Encoder) -> FaissSearcher:
        """An index like this one in another folder, with another encoder (where a new model's vectors are built)."""
        return FaissSearcher(path, encoder, self.embed_template, self.question_weight, self.hnsw_above)

    def take_over(self, other: FaissSearcher, adopt: Callable[[], None]) -> None:
        """Serve ``other``'s vectors from now on, with ``adopt`` (the swap of the model they were encoded with) run
        in the same step: no reader sees the new vectors with the old model or the reverse. Then saved here."""
        with self._lock:
            adopt()
            for name in (
                "_index",
                "kind",
                "_next_id",
                "_units",
                "_owner",
                "_tombstones",
                "_entries",
                "_hashes",
                "_incomplete",
            ):
                setattr(self, name, getattr(other, name))
            self.forget_queries()
            self._generation += 1
            self._loaded = True
        self.path.mkdir(parents=True, exist_ok=True)
        self._save()

    # -- reads -----------------------------------------------------------
    def similarities(self, vector: np.ndarray, entry_ids: Iterable[str]) -> dict[str, Cosines]:
        """entry id -> its :class:`Cosines` for the given entries (unknown ids are left out)."""
        out: dict[str, Cosines] = {}
        with self._lock:
            if not self._ensure() or self._index is None:
                return out
            known = [e for e in entry_ids if e in self._units]
            ids = [i for e in known for i in self._units[e]]
            if not ids:
                return out
            # one call for every row: a call per row cost more than the copy itself
            vectors = iter(self._index.reconstruct_batch(np.asarray(ids, dtype=np.int64)))
            for entry_id in known:
                rows = [(self._owner[i][1], next(vectors)) for i in self._units[entry_id]]
                cosines = best_cosines(rows, vector, self._entries[entry_id].phrasings)
                if entry_id in self._incomplete:  # no passage vector yet: the questions stand for it
                    cosines = cosines._replace(passage=cosines.question)
                out[entry_id] = cosines
        return out

    def prepare_nearest(self, vectors: np.ndarray) -> int:
        """Find the nearest vectors of many questions' ``vectors`` in one batch, for the searches that follow (they
        return what they would without it: bot/search/faiss_batch.py); how many it prepared.

        Only a flat index (a staging one is); any write to the index makes its searches scan again.
        """
        with self._lock:
            if not self._ensure() or self._index is None or self.kind != "flat" or not len(vectors):
                return 0
            self._prepared = PreparedNearest(self._index, self._next_id, vectors)
            return len(self._prepared)

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """Top ``top_k`` entries (of those ``within`` admits) by dense relevance; [] for a word-less query or one
        the model cannot place."""
        if top_k <= 0:
            return []
        generation = self._generation
        vector = self.query_vector(query)
        if vector is None:
            return []
        with self._lock:
            if generation != self._generation:  # the model was swapped while the question was embedded
                return self.search(query, top_k, within)
            if not self._ensure() or self._index is None or not self._owner:
                return []
            index = self._index
            total = int(index.ntotal)

            prepared = self._prepared if self.kind == "flat" else None

            def nearest(k: int) -> list[int]:  # the live vectors among the k nearest, nearest first
                if self.kind == "hnsw":
                    _import_faiss().downcast_index(index.index).hnsw.efSearch = max(HNSW_EF_SEARCH, k)
                found = prepared.nearest(index, self._next_id, vector, k) if prepared is not None else None
                _, ids = found if found is not None else _search_one_thread(index, vector[None, :], k)
                return [i for i in ids[0].tolist() if i in self._owner]

            if within is None:
                vectors = nearest(min(CANDIDATES * top_k + len(self._tombstones), total))
            else:
                vectors = top_within(
                    nearest, lambda i: self._entries[self._owner[i][0]], within, CANDIDATES * top_k, total
                )
            found = list(dict.fromkeys(self._owner[i][0] for i in vectors))
            scored = self.similarities(vector, found)
            # Ranked by the relevance their hits would carry (a stable sort, as of the hits): only the first become hits.
            ranked = sorted(found, key=lambda e: -self.relevance(scored[e].question, scored[e].passage))
            return [self.hit(self._entries[e], scored[e]) for e in ranked[:top_k]]
