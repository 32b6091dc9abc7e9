"""Knowledge edits through the core: the store writes (validated, locked), then the index catches up at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from bot.chat.language import SAMPLE, language_of
from bot.conversations.inbox import normalise
from bot.editing.entry_table import EntryPage, HitCounts, entry_page
from bot.errors import BotError
from bot.knowledge import csv_io
from bot.knowledge.entries import Entry
from bot.knowledge.entry_ids import EntryId, entry_id, key_of
from bot.knowledge.files import entry_version
from bot.knowledge.history import FileVersion
from bot.knowledge.scratch import restore_edit
from bot.knowledge.store import ABSENT, KnowledgeStore, KnowledgeWriteError
from bot.knowledge.validity import Publication
from bot.search.index import KnowledgeIndex

SAVED, ADDED = "已保存 / Saved", "已新增 / Added"  # what a save and an add report, before the entry id


@dataclass(frozen=True)
class EditResult:
    """What an edit did: a bilingual summary, the file and entry key it touched, and the index afterwards.

    ``knowledge_error`` is set when another file's problem kept the index from taking the edit (admins only:
    it names server paths).
    """

    done: str
    file: str
    key: str | None
    ids: tuple[str, ...]
    entries: int
    knowledge_error: str | None = None
    # The edit is on disk, but indexing (this edit's, or another admin's bulk import ahead of it) was still running
    # when the save was acknowledged; ``progress``: entries indexed so far per index in the running syncs.
    pending: bool = False
    progress: tuple[tuple[str, int], ...] = ()

    @property
    def indexed(self) -> bool:
        """True when the index now serves the edit."""
        return self.knowledge_error is None and not self.pending


@dataclass(frozen=True)
class EntryFields:
    """The editable fields of one stored entry, as text (metadata comma-separated), and its version on disk."""

    query: str
    document: str
    metadata: str
    version: str | None = None
    questions: tuple[str, ...] = ()  # other phrasings of the question
    publication: Publication = field(default_factory=Publication)  # draft flag and validity dates


def file_name(file: str | None) -> str:
    """A knowledge file name as typed, with ``.json`` added when it has no such suffix ("" when empty)."""
    file = (file or "").strip()
    return file if not file or file.endswith(".json") else f"{file}.json"


class KnowledgeEditor:
    """Reads and edits the knowledge folder for a front end; every write refreshes the index (incrementally)."""

    # A served (background) index: a write is acknowledged once on disk and indexed, or after this many seconds
    # of indexing (then the answer says the index is still updating).
    ack_seconds = 5.0

    def __init__(self, index: KnowledgeIndex, store: KnowledgeStore):
        self.index = index
        self.store = store

    def files(self) -> list[str]:
        """The knowledge files, relative to the folder."""
        return self.store.files()

    def keys(self, file: str | None) -> list[str]:
        """The entry keys of ``file`` (empty for a new or unreadable file)."""
        file = file_name(file)
        try:
            return [k for k, _ in self.store.entries(file)] if file in self.store.files() else []
        except BotError:
            return []

    def entry(self, file: str | None, key: str | None) -> EntryFields | None:
        """The fields of entry ``key`` of ``file``, or None when there is no such entry."""
        file = file_name(file)
        if not key or file not in self.store.files():
            return None
        try:
            stored = self.store.entries(file)
        except BotError:
            return None
        for k, raw in stored:
            if k == key and isinstance(raw, dict):
                meta = raw.get("metadata") or ""
                return EntryFields(
                    str(raw.get("query", "")),
                    str(raw.get("document", "")),
                    ",".join(map(str, meta)) if isinstance(meta, list) else str(meta),
                    entry_version(raw),
                    tuple(str(q) for q in raw.get("questions") or () if isinstance(q, str)),
                    Publication.of(raw),
                )
        return None

    def save(
        self,
        file: str | None,
        key: str | None,
        query: str,
        document: str,
        metadata: str,
        *,
        expected_version: str | None = None,
        questions: list[str] | None = None,
        publication: Publication | None = None,
    ) -> EditResult:
        """Add (empty ``key``: the next number) or edit one entry; raises BotError naming what is wrong.

        With ``expected_version`` (see KnowledgeStore.version) an entry changed meanwhile is refused, not overwritten;
        ``publication`` sets the draft flag and validity dates (None keeps the entry's).
        """
        return self._save(SAVED, file, key, query, document, metadata, expected_version, questions, publication)

    def _save(
        self,
        done: str,
        file: str | None,
        key: str | None,
        query: str,
        document: str,
        metadata: str,
        expected_version: str | None,
        questions: list[str] | None,
        publication: Publication | None,
    ) -> EditResult:
        file = file_name(file)
        if not file:
            raise KnowledgeWriteError("请选择或输入文件名 / Choose or type a file name")
        saved = self.store.upsert_entry(
            file,
            (key or "").strip() or None,
            query or "",
            document or "",
            metadata or "",
            expected_version=expected_version,
            questions=questions,
            publication=publication,
        )
        return self._refreshed(f"{done} {saved}", file, key_of(saved), (saved,))

    def add(
        self,
        file: str | None,
        key: str | None,
        query: str,
        document: str,
        metadata: str,
        *,
        questions: list[str] | None = None,
        publication: Publication | None = None,
    ) -> EditResult:
        """Add a new entry (empty ``key``: the next number); refused, nothing written, when ``key`` exists."""
        return self._save(ADDED, file, key, query, document, metadata, ABSENT, questions, publication)

    def file_for(self, question: str) -> str | None:
        """The file a new entry for ``question`` most likely belongs in: the one with the most entries (among the
        first SAMPLE of each) written in the question's language; the first file on a tie; None without files."""
        language = language_of(question)
        best, most = None, -1
        for file in self.files():
            try:
                stored = self.store.entries(file)[:SAMPLE]
            except BotError:
                continue
            same = sum(
                isinstance(raw, dict) and language_of(str(raw.get("query", ""))) == language for _, raw in stored
            )
            if same > most:
                best, most = file, same
        return best

    def asking(self, question: str) -> Entry | None:
        """The loaded entry whose question or a phrasing of it is ``question`` (compared in the inbox's normal
        form: case, width and punctuation aside), or None."""
        norm = normalise(question)
        return next((e for e in self.index.entries if norm in {normalise(p) for p in e.phrasings}), None)

    def locate(self, entry_id: str) -> tuple[str, str] | None:
        """(file, key) of an entry id '<stem>:<key>' among the knowledge files, or None."""
        parsed = EntryId.parse(entry_id)
        if parsed is None:
            return None
        file = next((f for f in self.files() if PurePosixPath(f).stem == parsed.stem), None)
        return (file, parsed.key) if file else None

    def add_phrasing(self, entry_id: str, question: str) -> EditResult:
        """Add ``question`` to an entry's phrasings; BotError when the entry or the question is missing.

        As a page edit would: locked, versioned, with history, indexed at once.
        """
        question = (question or "").strip()
        where = self.locate(entry_id)
        fields = self.entry(*where) if where else None
        if where is None or fields is None or not question:
            raise KnowledgeWriteError(
                f"请选择一个条目并填写问法 / Choose an entry and type the phrasing (entry {entry_id!r} not found)"
                if question
                else "请填写问法 / Type the phrasing"
            )
        questions = [*fields.questions, question] if question not in fields.questions else list(fields.questions)
        return self.save(
            where[0],
            where[1],
            fields.query,
            fields.document,
            fields.metadata,
            expected_version=fields.version,
            questions=questions,
        )

    def delete(self, file: str | None, key: str | None, *, expected_version: str | None = None) -> EditResult:
        """Delete one entry (refused when ``expected_version`` is given and the entry changed); raises BotError."""
        file = file_name(file)
        if not file or not key:
            raise KnowledgeWriteError("请选择文件和条目 / Choose a file and an entry")
        self.store.delete_entry(file, key, expected_version=expected_version)
        deleted = entry_id(PurePosixPath(file).stem, key)
        return self._refreshed(f"已删除 / Deleted {deleted}", file, None, (deleted,))

    def import_file(self, name: str, text: str, overwrite: bool = False) -> EditResult:
        """Store an uploaded knowledge file; raises BotError (KnowledgeError lists every bad entry)."""
        ids = tuple(self.store.import_file(name, text, overwrite=overwrite))
        return self._refreshed(f"已导入 / Imported {name}: {len(ids)} entries", name, None, ids)

    def import_csv(self, name: str, text: str | bytes) -> EditResult:
        """Import a knowledge CSV, or an Excel .xlsx as bytes (bot/knowledge/csv_io.py).

        Rows without a file go to ``name``'s .json.
        """
        default = file_name(PurePosixPath(name).stem)
        source = PurePosixPath(name).name
        if isinstance(text, bytes):
            ids = tuple(csv_io.import_xlsx(self.store, text, default, source))
        else:
            ids = tuple(csv_io.import_csv(self.store, text, default, source))
        return self._refreshed(f"已导入 / Imported {source}: {len(ids)} entries", default, None, ids)

    def history(self, file: str | None) -> list[FileVersion]:
        """The kept earlier versions of ``file``, newest first; raises BotError for a bad name."""
        return self.store.history(file_name(file))

    def restore(self, file: str | None, version: str | None) -> EditResult:
        """Bring back a kept version of ``file`` (the current one is kept first, so this can be undone too)."""
        file = file_name(file)
        if not file or not version:
            raise KnowledgeWriteError("请选择文件和历史版本 / Choose a file and a kept version")
        ids = tuple(self.store.restore(file, version))
        return self._refreshed(f"已恢复 / Restored {file} to {version}", file, None, ids)

    def restore_edit(self, file: str | None, version: str | None) -> Callable[[KnowledgeStore], list[str]]:
        """:meth:`restore` as an edit of another store, for a replay before it (KnowledgeWriteError as it would)."""
        file = file_name(file)
        if not file or not version:
            raise KnowledgeWriteError("请选择文件和历史版本 / Choose a file and a kept version")
        return restore_edit(self.store, file, version)

    def export_csv(self) -> str:
        """Every entry the index serves now, as CSV text (see bot/knowledge/csv_io.py)."""
        return csv_io.export_csv(self.index.entries, self.store.folder)

    def page(self, text: str = "", page: int = 1, hits: HitCounts | None = None) -> EntryPage:
        """One page of the entries the index serves now that match ``text`` (the entry browser); files changed on
        disk since the last message are picked up first."""
        self.index.refresh()
        return entry_page(self.index.entries, text, page, folder=self.store.folder, hits=hits)

    def _refreshed(self, done: str, file: str, key: str | None, ids: tuple[str, ...]) -> EditResult:
        if not self.index.background:
            self.index.refresh(force=True, wait=True)
            pending = False
        else:
            # The file is on disk (written atomically): wait a little for the index, never behind another
            # admin's bulk indexing for minutes; the answer then says the index is still updating, and how far.
            self.index.refresh(force=True, wait=False)
            pending = not self.index.wait_idle(self.ack_seconds)
        error = self.index.error
        progress = tuple(sorted(self.index.indexing().items())) if pending else ()
        return EditResult(
            done, file, key, ids, len(self.index.entries), str(error) if error else None, pending, progress
        )
