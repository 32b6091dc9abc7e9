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

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bot.errors import ConfigError
from bot.knowledge.entries import Entry, entry_from_record, entry_record
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, Progress, Searcher, SyncReport, top_within
from bot.search.encoders import Encoder
from bot.search.encoders.base import DOCUMENT, QUESTION
from bot.search.faiss_files import (  # noqa: F401 - INDEX_FILE, STATE_FILE and json_by_item re-exported
    INDEX_FILE,
    SCHEMA_VERSION,
    STATE_FILE,
    _import_faiss,
    _search_one_thread,
    json_by_item,
    read_state,
    write_state,
)
from bot.search.faiss_writes import VectorWrites
from bot.search.progress import announce
from bot.search.staging import restage
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import is_word, normalize

log = logging.getLogger(__name__)

TEMPLATE_KEY = "retrieval.dense.embed_template"
HNSW_EF_SEARCH = 64
CANDIDATES = 4  # vectors fetched per wanted hit before the entries found are scored exactly
RECENT_QUERIES = 256  # question vectors remembered (a model change resets the searcher, hence them too)


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


class Cosines(NamedTuple):
    """An entry's best question cosine (over its query and alternative questions), its passage cosine, and the
    alternative question that gave the best question cosine ("" when it was the query)."""

    question: float
    passage: float
    matched_question: str = ""


class FaissSearcher(VectorWrites, Searcher):
    """Cosine similarity between the question's vector and each entry's question and passage vectors."""

    name = "faiss"
    synonyms: Synonyms | None = None  # set by the factory: questions reach the encoder with canonical synonyms
    synonym_mode = "substitute"

    def __init__(
        self, path: str | Path, encoder: Encoder, embed_template: str, question_weight: float, hnsw_above: int
    ):
        _import_faiss()
        try:
            embed_template.format(query="", document="", metadata="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"{TEMPLATE_KEY} {embed_template!r} is invalid ({exc}); "
                "use the fields {query}, {document} and {metadata}"
            ) from None
        self.path = Path(path)
        self.encoder = encoder
        self.embed_template = embed_template
        self.question_weight = question_weight
        self.hnsw_above = hnsw_above
        self.system = f"dense-{encoder.name}"
        self._lock = threading.RLock()  # held by readers, and by writers only to swap what readers see
        self._writing = threading.RLock()  # one writer at a time; encoding and saving run outside ``_lock``
        self._generation = 0  # +1 when the encoder's model is swapped (question vectors of the old one are void)
        self._loaded = False
        self._stale = "no index yet"
        self._reset_memory()

    def _reset_memory(self) -> None:
        self._recent: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._index: Any | None = None  # a faiss index (the library has no type hints), None when empty
        self.kind = "flat"
        self._next_id = 0
        self._units: dict[str, list[int]] = {}  # entry id -> int64 ids of its live vectors
        self._owner: dict[int, tuple[str, str]] = {}  # int64 id -> (entry id, role), live vectors only
        self._tombstones: set[int] = set()
        self._entries: dict[str, Entry] = {}
        self._hashes: dict[str, str] = {}

    def embed_text(self, entry: Entry) -> str:
        """What is embedded as an entry's passage: the template filled with its fields."""
        return self.embed_template.format(query=entry.query, document=entry.document, metadata=" ".join(entry.metadata))

    def unit_texts(self, entry: Entry) -> list[tuple[str, str]]:
        """(role, text) of each vector an entry gets: its query, each alternative question, then its passage."""
        return [*((QUESTION, text) for text in entry.phrasings), (DOCUMENT, self.embed_text(entry))]

    def signature(self) -> str:
        """Schema, template and the encoder's model: a change in any means every vector is stale."""
        template = hashlib.sha256(self.embed_template.encode()).hexdigest()[:8]
        return f"{SCHEMA_VERSION}:{template}:{self.encoder.signature()}"

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
            for name in ("_index", "kind", "_next_id", "_units", "_owner", "_tombstones", "_entries", "_hashes"):
                setattr(self, name, getattr(other, name))
            self._recent.clear()
            self._generation += 1
            self._loaded = True
        self.path.mkdir(parents=True, exist_ok=True)
        self._save()

    # -- reads -----------------------------------------------------------
    def query_vector(self, query: str) -> np.ndarray | None:
        """The question's vector, or None for a word-less question or one the model cannot place.

        The last few are remembered: hybrid asks twice per question, and e5 takes ~10 ms per question.
        """
        if self.synonyms is not None:
            query = self.synonyms.canonical(query, self.synonym_mode)
        if not is_word(normalize(query)):
            return None
        with self._lock:
            if query in self._recent:
                self._recent.move_to_end(query)
                return self._recent[query]
        encoded = np.asarray(self.encoder.embed_query(query), dtype=np.float32)
        vector = encoded if encoded.any() else None
        with self._lock:
            self._recent[query] = vector
            while len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        return vector

    def forget_queries(self) -> None:
        """Drop the remembered question vectors (benchmarks time each system with its own encoding)."""
        with self._lock:
            self._recent.clear()

    def similarities(self, vector: np.ndarray, entry_ids: Iterable[str]) -> dict[str, Cosines]:
        """entry id -> its :class:`Cosines` for the given entries (unknown ids are left out)."""
        out: dict[str, Cosines] = {}
        with self._lock:
            if not self._ensure() or self._index is None:
                return out
            for entry_id in entry_ids:
                if entry_id not in self._units:
                    continue
                best = {QUESTION: -1.0, DOCUMENT: -1.0}
                nth, matched = 0, 0  # question vectors are stored in the order of entry.phrasings
                for i in self._units[entry_id]:
                    role = self._owner[i][1]
                    cosine = float(self._index.reconstruct(i) @ vector)
                    if cosine > best[role]:
                        best[role] = cosine
                        matched = nth if role == QUESTION else matched
                    nth += role == QUESTION
                phrasings = self._entries[entry_id].phrasings
                out[entry_id] = Cosines(
                    best[QUESTION], best[DOCUMENT], phrasings[matched] if 0 < matched < len(phrasings) else ""
                )
        return out

    def relevance(self, question_cosine: float, passage_cosine: float) -> float:
        """The dense relevance: the weighted cosines, clipped to [0, 1]."""
        w = self.question_weight
        return _clip(w * question_cosine + (1.0 - w) * passage_cosine)

    def hit(self, entry: Entry, cosines: Cosines) -> Hit:
        """A hit for ``entry`` from its cosines (and the alternative question that matched, if one did)."""
        relevance = self.relevance(cosines.question, cosines.passage)
        return Hit(
            entry,
            relevance,
            relevance,
            self.name,
            {"question": cosines.question, "passage": cosines.passage},
            matched_question=cosines.matched_question,
        )

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

            def nearest(k: int) -> list[int]:  # the live vectors among the k nearest, nearest first
                if self.kind == "hnsw":
                    _import_faiss().downcast_index(index.index).hnsw.efSearch = max(HNSW_EF_SEARCH, k)
                _, ids = _search_one_thread(index, vector[None, :], k)
                return [i for i in ids[0].tolist() if i in self._owner]

            if within is None:
                vectors = nearest(min(CANDIDATES * top_k + len(self._tombstones), total))
            else:
                vectors = top_within(
                    nearest, lambda i: self._entries[self._owner[i][0]], within, CANDIDATES * top_k, total
                )
            found = list(dict.fromkeys(self._owner[i][0] for i in vectors))
            scored = self.similarities(vector, found)
            hits = [self.hit(self._entries[e], scored[e]) for e in found]
        hits.sort(key=lambda h: -h.relevance)
        return hits[:top_k]
