"""The writing half of the FAISS index (:class:`bot.search.faiss_searcher.FaissSearcher`): entries encoded into
question and passage vectors, added by int64 id, replaced and removed, and the graph rebuilt when it outgrows a flat
index or collects too many tombstones (the layout is described in faiss_searcher's docstring)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bot.knowledge.entries import Entry
from bot.search.base import Progress
from bot.search.dense_scoring import encode_units
from bot.search.encoders import Encoder
from bot.search.encoders.base import DOCUMENT, QUESTION
from bot.search.faiss_files import _import_faiss

log = logging.getLogger("bot.search.faiss_searcher")  # one logger for the index, whichever half writes

HNSW_M = 32  # graph degree: the usual recall/memory balance for ~100-dim vectors
HNSW_EF_CONSTRUCTION = 80


class VectorWrites:
    """Encoding and storing vectors; mixed into FaissSearcher, which holds the state below and the locks."""

    encoder: Encoder
    hnsw_above: int
    kind: str
    _lock: threading.RLock
    _writing: threading.RLock
    _index: Any | None
    _next_id: int
    _units: dict[str, list[int]]
    _owner: dict[int, tuple[str, str]]
    _tombstones: set[int]
    _entries: dict[str, Entry]
    _hashes: dict[str, str]
    _incomplete: set[str]

    def unit_texts(self, entry: Entry) -> list[tuple[str, str]]:
        """(role, text) of each vector an entry gets (the index defines it)."""
        raise NotImplementedError

    def _ensure(self) -> bool:
        raise NotImplementedError

    def reset(self, reason: str) -> None:
        """Drop every vector (the index defines it)."""
        raise NotImplementedError

    def _save(self) -> None:
        raise NotImplementedError

    def _new_index(self, kind: str, dim: int):
        faiss = _import_faiss()
        if kind == "hnsw":
            inner = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        else:
            inner = faiss.IndexFlatIP(dim)
        return faiss.IndexIDMap2(inner)  # the faiss wrapper keeps ``inner`` alive as long as the map

    def _encode(self, entries: Sequence[Entry], progress: Progress | None) -> tuple[np.ndarray, list[tuple[str, str]]]:
        """Vectors of every unit of ``entries`` (rows in order) and each row's (entry id, role)."""
        return encode_units(self.encoder, self.unit_texts, entries, progress)

    def _drop(self, int_ids: list[int]) -> None:
        """Retire vectors: deleted from a flat index, tombstoned in HNSW (which cannot delete)."""
        for i in int_ids:
            self._owner.pop(i, None)
        if not int_ids or self._index is None:
            return
        if self.kind == "hnsw":
            self._tombstones.update(int_ids)
        else:
            self._index.remove_ids(np.array(int_ids, dtype=np.int64))

    def _rebuild(self, kind: str) -> None:
        """Rebuild the index as ``kind`` from the live vectors it stores (no re-encoding)."""
        faiss = _import_faiss()
        old = self._index
        assert old is not None  # only rebuilt when it holds vectors (see _maintain)
        ids = faiss.vector_to_array(old.id_map).astype(np.int64)
        vectors = faiss.downcast_index(old.index).reconstruct_n(0, old.ntotal)
        keep = np.array([i in self._owner for i in ids], dtype=bool)
        index = self._new_index(kind, vectors.shape[1])
        if keep.any():
            index.add_with_ids(np.ascontiguousarray(vectors[keep]), ids[keep])
        with self._lock:  # built outside it (HNSW takes a while); readers see the old graph until here
            self._index, self.kind, self._tombstones = index, kind, set()
        log.info("faiss index rebuilt as %s with %d vectors", kind, index.ntotal)

    def _maintain(self) -> None:
        live = len(self._owner)
        if (self.kind == "flat" and len(self._units) > self.hnsw_above) or (
            self.kind == "hnsw" and len(self._tombstones) > max(16, live // 10)
        ):
            self._rebuild("hnsw")

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Encode the entries and add them; an entry with a known id replaces its old vectors."""
        entries = list({e.id: e for e in entries}.values())
        if not entries:
            return
        with self._writing:
            if not self._ensure():
                self.reset("no index yet")
            if not self._units and self.encoder.questions_first:
                self._first_build(entries, progress)
            else:
                # The slow part, outside the readers' lock: searches keep using the current vectors meanwhile.
                vectors, owners = self._encode(entries, progress)
                with self._lock:
                    self._upsert_vectors(entries, vectors, owners)
            self._maintain()
            self._save()

    def _first_build(self, entries: list[Entry], progress: Progress | None) -> None:
        """Fill an empty index in two steps: every entry's question vectors (a small share of the text, searchable
        at once: :attr:`partial`), then their passage vectors."""
        self.add_questions(entries)
        log.info("faiss index: the questions of %d entries are searchable; encoding their passages", len(entries))
        self.add_passages(entries, progress)

    def add_questions(self, entries: list[Entry]) -> None:
        """Give ``entries`` their question vectors only (replacing what they had): searchable, :attr:`partial`
        until :meth:`add_passages`; the question cosine stands for the missing passage one."""
        vectors, owners = encode_units(self.encoder, lambda e: self._role(e, QUESTION), entries, None)
        with self._lock:
            self._upsert_vectors(entries, vectors, owners)
            self._incomplete |= {e.id for e in entries}

    def add_passages(self, entries: list[Entry], progress: Progress | None = None) -> None:
        """Add the passage vectors of entries that :meth:`add_questions` gave their questions."""
        vectors, owners = encode_units(self.encoder, lambda e: self._role(e, DOCUMENT), entries, progress)
        with self._lock:
            self._add_vectors(vectors, owners)
            self._incomplete.difference_update(e.id for e in entries)

    def _role(self, entry: Entry, role: str) -> list[tuple[str, str]]:
        return [unit for unit in self.unit_texts(entry) if unit[0] == role]

    @property
    def partial(self) -> bool:
        """True while a first build holds every entry's question vectors but not yet all their passage vectors."""
        return bool(self._incomplete)

    def _upsert_vectors(self, entries: list[Entry], vectors: np.ndarray, owners: list[tuple[str, str]]) -> None:
        """Replace the entries' vectors by the encoded ones (under the readers' lock: quick)."""
        self._drop([i for e in entries for i in self._units.pop(e.id, [])])
        if self._index is None:
            kind = "hnsw" if len(entries) > self.hnsw_above else "flat"
            self._index, self.kind = self._new_index(kind, vectors.shape[1]), kind
        self._add_vectors(vectors, owners)
        for e in entries:
            self._entries[e.id], self._hashes[e.id] = e, e.content_hash

    def _add_vectors(self, vectors: np.ndarray, owners: list[tuple[str, str]]) -> None:
        """Add vectors to their entries' (under the readers' lock), after the ones they have."""
        assert self._index is not None  # the entries' question vectors made it
        ids = np.arange(self._next_id, self._next_id + len(owners), dtype=np.int64)
        self._index.add_with_ids(vectors, ids)
        self._next_id += len(owners)
        for (entry_id, role), i in zip(owners, ids.tolist()):
            self._units.setdefault(entry_id, []).append(i)
            self._owner[i] = (entry_id, role)

    def remove(self, ids: Iterable[str]) -> None:
        """Remove entries by id; unknown ids are ignored."""
        with self._writing:
            if not self._ensure():
                return
            gone = [i for i in dict.fromkeys(ids) if i in self._units]
            if not gone:
                return
            with self._lock:
                self._drop([n for i in gone for n in self._units.pop(i)])
                self._incomplete.difference_update(gone)
                for i in gone:
                    self._entries.pop(i, None)
                    self._hashes.pop(i, None)
            self._maintain()
            self._save()
