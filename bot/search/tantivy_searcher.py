"""Embedded BM25 on an on-disk tantivy index, over jieba tokens, with incremental add/replace/remove.

One field holds all of an entry's words, each field's words repeated by its weight (query 3, metadata 2,
document 1 by default): BM25F with shared statistics. Separate fields gave each field its own IDF, so a word
common in documents but rare in the short metadata field ("中山大学" in a campus guide) made an entry whose
only match was that word outrank entries that answer the question (BENCHMARKS.md "Sparse field weights").
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import SearchBackendError
from bot.fsutil import commit_file, temp_beside, write_json_atomic
from bot.knowledge.entries import Entry, entry_from_record, entry_record
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, Progress, top_within
from bot.search.integrity import tantivy_problem
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

if TYPE_CHECKING:
    import tantivy

log = logging.getLogger(__name__)

TEXT_FIELD = "all"
ANALYZER = "kb_tokens"  # whitespace split over our jieba tokens; must be registered after every open
SCHEMA_VERSION = "2"
STATE_FILE = "kbbot-state.json"
# Tokens of indexed entries by content hash, so a rebuild (`index --rebuild`, a repaired index) re-tokenizes only
# what changed. JSON lines: a header {"key": tokenizer.state_key()} (any other key = cache void), then
# [content_hash, query tokens, metadata tokens, document tokens]. A cache only: a torn last line is skipped.
TOKENS_FILE = "kbbot-tokens.jsonl"
CACHE_LOOKUP_MIN = 500  # smaller batches tokenize directly (reading the cache would cost more) and append


@dataclass
class Reading:
    """One version of the index as searches read it: its searcher, and the word counts and entries read so far."""

    searcher: Any
    counts: dict[str, int] = field(default_factory=dict)
    entries: dict[tuple[int, int], Entry] = field(default_factory=dict)  # by (segment, doc) address


def _analyzer():
    import tantivy

    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).filter(tantivy.Filter.remove_long(100)).build()


class TantivySearcher(SparseSearcher):
    """BM25 (tantivy) over one field of all an entry's words, each field's words repeated by its weight."""

    name = "tantivy"

    def __init__(
        self,
        path: str | Path,
        tokenizer: Tokenizer,
        field_weights: Mapping[str, int],
        notice: str | None = None,
        fallback_reason: str | None = None,
        private: bool = False,
    ):
        """``private``: no other process writes this index (a staging index), so searches share one
        :class:`Reading` until this searcher's next write; otherwise each search reads afresh (another process's
        commit shows at once)."""
        # notice / fallback_reason: set when this engine stands in for an unreachable Elasticsearch (the factory)
        self.notice, self.fallback_reason = notice, fallback_reason
        self.private = private
        self._reading: Reading | None = None
        self._version = 0  # writes so far: a reading made before one is not kept
        self._reading_lock = threading.Lock()
        self.path = Path(path)
        super().__init__(tokenizer)
        self.field_weights = {f: int(field_weights.get(f, 1)) for f in FIELDS}
        self._lock = threading.RLock()
        self._index: tantivy.Index | None = None
        self._hashes: dict[str, str] | None = None  # set together with _index

    # -- index lifecycle -------------------------------------------------
    def _schema(self):
        import tantivy

        b = tantivy.SchemaBuilder()
        b.add_text_field("id", stored=True, tokenizer_name="raw")
        b.add_text_field(TEXT_FIELD, stored=False, tokenizer_name=ANALYZER, index_option="freq")
        b.add_bytes_field("entry", stored=True)
        return b.build()

    def signature(self) -> str:
        """Schema version, field weights and the tokenizer's rules: a change in any forces a rebuild."""
        weights = "".join(str(self.field_weights[f]) for f in FIELDS)
        return f"{SCHEMA_VERSION}:{weights}:{self.tokenizer.signature()}"

    def check(self) -> str | None:
        """Why the index on disk cannot serve: none there, other settings, or (open already) a segment file that
        no longer matches its checksum; None when it can."""
        reason = super().check()
        if reason is None and (self.path / "meta.json").is_file():
            return tantivy_problem(self.path)
        return reason

    def _open(self):
        """Open the index on disk, or return None if it is missing, from another version, or unreadable."""
        import tantivy

        state_file = self.path / STATE_FILE
        if not state_file.is_file():
            self._stale = "no index yet"
            return None
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            if state.get("signature") != self.signature():
                self._stale = "built with other settings (tokenizer or schema changed)"
                log.info("tantivy index at %s was built with other settings; rebuilding", self.path)
                return None
            problem = tantivy_problem(self.path)  # random bytes in a body would panic mid-search, not here
            if problem:
                raise ValueError(problem)
            index = tantivy.Index.open(str(self.path))
            index.register_tokenizer(ANALYZER, _analyzer())
            index.searcher().num_docs  # noqa: B018 - touches the segments so corruption shows here
        except Exception as exc:  # any failure to read means: rebuild from the knowledge
            self._stale = f"index unreadable ({exc})"
            log.warning("tantivy index at %s is unreadable (%s); rebuilding it", self.path, exc)
            return None
        self._hashes = dict(state.get("hashes", {}))
        return index

    def _ensure(self):
        index = self._index
        if index is not None:  # readers never wait for a writer (it holds the lock while it writes)
            return index
        with self._lock:
            if self._index is None:
                self._index = self._open()
            return self._index

    def indexed_hashes(self) -> dict[str, str] | None:
        """id -> content hash of what the index holds, or None when there is no usable index."""
        with self._lock:
            return None if self._ensure() is None else dict(self._hashes or {})

    def reset(self, reason: str) -> None:
        """Delete the index folder and create an empty index."""
        import tantivy

        with self._lock:
            carried = self._read_tokens()[0] if self.path.exists() else {}
            if self.path.exists():
                shutil.rmtree(self.path)
            self.path.mkdir(parents=True)
            index = tantivy.Index(self._schema(), path=str(self.path))
            index.register_tokenizer(ANALYZER, _analyzer())
            self._index, self._hashes = index, {}
            self._forget()
            self._save_state()
            if carried:  # the tokens survive the rebuild (same tokenizer state only)
                self._write_tokens(carried)

    # -- token cache -------------------------------------------------------
    def _read_tokens(self) -> tuple[dict[str, list[str]], int]:
        """(content hash -> [query, metadata, document] token strings, lines read); empty when void or absent."""
        out: dict[str, list[str]] = {}
        lines = 0
        try:
            with open(self.path / TOKENS_FILE, encoding="utf-8") as fh:
                if json.loads(fh.readline() or "{}").get("key") != self.tokenizer.state_key():
                    return {}, 0
                for line in fh:
                    lines += 1
                    try:
                        h, q, m, d = json.loads(line)
                    except ValueError:
                        continue
                    out[h] = [q, m, d]
        except (OSError, ValueError, AttributeError):
            return {}, 0
        return out, lines

    def _write_tokens(self, tokens: dict[str, list[str]]) -> None:
        tmp = temp_beside(self.path / TOKENS_FILE)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": self.tokenizer.state_key()}) + "\n")
            fh.writelines(json.dumps([h, *f], ensure_ascii=False) + "\n" for h, f in tokens.items())
        commit_file(tmp, self.path / TOKENS_FILE)

    def _append_tokens(self, tokens: dict[str, list[str]]) -> None:
        file = self.path / TOKENS_FILE
        try:
            with open(file, encoding="utf-8") as fh:
                valid = json.loads(fh.readline() or "{}").get("key") == self.tokenizer.state_key()
        except (OSError, ValueError, AttributeError):
            valid = False
        if not valid:
            self._write_tokens(tokens)
            return
        with open(file, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps([h, *f], ensure_ascii=False) + "\n" for h, f in tokens.items())

    def lend_tokens(self, folder: Path) -> None:
        """Copy this index's token cache into ``folder``, where an empty index over the same tokenizer is about to
        be built (a staging copy): it starts with the tokens of every entry indexed here."""
        if (self.path / TOKENS_FILE).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.path / TOKENS_FILE, folder / TOKENS_FILE)

    def _tokens_for(
        self, entries: Sequence[Entry]
    ) -> tuple[list[list[str]], dict[str, list[str]], dict[str, list[str]], int]:
        """Token strings per entry (cache first, then jieba over each distinct missing text, in parallel for big
        batches); also the fresh ones to cache, the cache as read (empty for small batches) and its line count."""
        cached, lines = self._read_tokens() if len(entries) >= CACHE_LOOKUP_MIN else ({}, 0)
        missing = [e for e in entries if e.content_hash not in cached]
        texts = list(dict.fromkeys(t for e in missing for t in (query_text(e), " ".join(e.metadata), e.text)))
        cut = dict(zip(texts, (" ".join(t) for t in self.tokenizer.tokenize_many(texts))))
        fresh = {e.content_hash: [cut[query_text(e)], cut[" ".join(e.metadata)], cut[e.text]] for e in missing}
        return [cached.get(e.content_hash) or fresh[e.content_hash] for e in entries], fresh, cached, lines

    def _save_state(self) -> None:
        write_json_atomic(self.path / STATE_FILE, {"signature": self.signature(), "hashes": self._hashes})

    def _writer(self):
        try:
            return self._ensure_or_reset().writer(heap_size=64_000_000, num_threads=1)
        except ValueError as exc:
            raise SearchBackendError(
                f"cannot write the tantivy index at {self.path} ({exc}); another process may be indexing — wait for it or stop it"
            ) from exc

    def _ensure_or_reset(self):
        if self._ensure() is None:
            self.reset("no index yet")
        return self._index

    # -- writes ----------------------------------------------------------
    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Replace-or-add each entry (delete by id, then add), one commit for the batch."""
        import tantivy

        if not entries:
            return
        with self._lock:
            writer = self._writer()
            assert self._index is not None and self._hashes is not None  # _writer() opened or created the index
            try:
                state = self.tokenizer.state_key()
                tokens, fresh, cached, cache_lines = self._tokens_for(entries)
                # an empty index has nothing to delete: skipping 100k no-op deletes makes a first build faster
                empty = self._index.searcher().num_docs == 0
                for i, (entry, (q, m, d)) in enumerate(zip(entries, tokens)):
                    if not empty:
                        writer.delete_documents_by_term("id", entry.id)
                    doc = tantivy.Document()
                    doc.add_text("id", entry.id)
                    doc.add_text(TEXT_FIELD, weighted_text((q, m, d), self.field_weights))
                    doc.add_bytes("entry", json.dumps(entry_record(entry), ensure_ascii=False).encode("utf-8"))
                    writer.add_document(doc)
                    if progress and (i + 1) % 100 == 0:
                        progress(100)
                writer.commit()
                writer.wait_merging_threads()
            except BaseException:
                writer.rollback()
                raise
            if progress and len(entries) % 100:
                progress(len(entries) % 100)
            self._index.reload()
            self._forget()
            self._hashes.update({e.id: e.content_hash for e in entries})
            self._save_state()
            if self.tokenizer.state_key() == state:  # no word learnt meanwhile: the tokens are those of ``state``
                self.words.remember(list(zip(entries, tokens)), state)
            try:
                # Mostly stale lines: keep the live ones only. cache_lines > 0 means _tokens_for read the cache.
                if cache_lines > 2 * len(self._hashes) + 1000:
                    live = set(self._hashes.values())
                    self._write_tokens({h: f for h, f in {**cached, **fresh}.items() if h in live})
                elif fresh:
                    self._append_tokens(fresh)
            except OSError as exc:  # only a cache: the index itself is committed
                log.warning("could not write the token cache in %s: %s", self.path, exc)

    def remove(self, ids: Iterable[str]) -> None:
        """Delete entries by id in one commit."""
        ids = list(ids)
        if not ids:
            return
        with self._lock:
            writer = self._writer()
            assert self._index is not None and self._hashes is not None  # _writer() opened or created the index
            for entry_id in ids:
                writer.delete_documents_by_term("id", entry_id)
            writer.commit()
            writer.wait_merging_threads()
            self._index.reload()
            self._forget()
            for entry_id in ids:
                self._hashes.pop(entry_id, None)
            self._save_state()

    # -- reads -----------------------------------------------------------
    def _forget(self) -> None:
        """Drop the shared reading after a write (the next search makes one of the new version)."""
        with self._reading_lock:
            self._version += 1
            self._reading = None

    def _read(self, index) -> Reading:
        """The index as a search reads it: the shared reading of a private index, else a fresh one."""
        if not self.private:
            return Reading(index.searcher())
        reading = self._reading
        if reading is not None:
            return reading
        version = self._version
        reading = Reading(index.searcher())
        with self._reading_lock:
            if self._version == version:  # no write since the searcher was taken: it is the current version
                self._reading = reading
        return reading

    @staticmethod
    def _live_stats(index, reading: Reading, words: Sequence[str]) -> TermStats:
        """Entries holding each word, counted over live entries only.

        ``doc_freq`` also counts replaced and removed entries until their segment is merged, so coverage would
        depend on the edit history and differ from Elasticsearch's (which counts live entries).
        """
        import tantivy

        known, searcher = reading.counts, reading.searcher
        for w in dict.fromkeys(words):
            if w not in known:
                query = tantivy.Query.term_query(index.schema, TEXT_FIELD, w)
                known[w] = searcher.search(query, limit=1, count=True).count
        return TermStats(searcher.num_docs, {w: known[w] for w in words})

    def term_stats(self, words: Sequence[str]) -> TermStats:
        """Document frequencies of ``words`` in the index, and its number of entries."""
        index = self._ensure()
        if index is None:
            return TermStats(0, {})
        return self._live_stats(index, self._read(index), words)

    @staticmethod
    def _entry(reading: Reading, address) -> Entry:
        """The entry stored at ``address`` (decoded once per reading)."""
        key = (address.segment_ord, address.doc)
        entry = reading.entries.get(key)
        if entry is None:
            entry = entry_from_record(json.loads(reading.searcher.doc(address)["entry"][0]))
            reading.entries[key] = entry
        return entry

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """BM25 top_k over the index (of the entries ``within`` admits), each hit with its coverage as relevance;
        [] when the query has no words."""
        import tantivy

        words, translated = self.searched_units(query)
        index = self._ensure()
        if not words or index is None or top_k <= 0:
            return []
        reading = self._read(index)
        searcher = reading.searcher

        def term(word: str):
            return tantivy.Query.term_query(index.schema, TEXT_FIELD, word)

        def clause(unit: Unit):
            if isinstance(unit, str):
                return term(unit)
            # A synonym group: any of its words matches (a word of several terms: all of them, weighed as one word
            # by their mean, not their sum), scored as the best.
            return tantivy.Query.disjunction_max_query(
                [
                    term(alt[0])
                    if len(alt) == 1
                    else tantivy.Query.boost_query(
                        tantivy.Query.boolean_query([(tantivy.Occur.Must, term(t)) for t in alt]), 1.0 / len(alt)
                    )
                    for alt in unit
                ]
            )

        question = tantivy.Query.boolean_query([(tantivy.Occur.Should, clause(u)) for u in words])

        def ranked(limit: int) -> list[tuple[float, Entry]]:
            return [
                (float(score), self._entry(reading, address))
                for score, address in searcher.search(question, limit=limit).hits
            ]

        found = top_within(ranked, lambda r: r[1], within, top_k, searcher.num_docs)
        weights = QuestionWeights(words, self._live_stats(index, reading, unit_terms(words)))
        return self.follow_ranking([self.sparse_hit(entry, weights, score, translated) for score, entry in found])
