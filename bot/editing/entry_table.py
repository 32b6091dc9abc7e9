"""The entry browser's data: every loaded entry filtered by a text search and cut into pages, on the server."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.knowledge.entries import Entry
from bot.knowledge.entry_ids import key_of
from bot.knowledge.files import entry_file

log = logging.getLogger(__name__)
PAGE_SIZE = 50
PREVIEW_CHARS = 80
HitCounts = Mapping[str, tuple[int, str]]  # entry id -> (answers that used it, time of the latest)


@dataclass(frozen=True)
class EntryRow:
    """One table row: where the entry lives, its fields (document shortened) and how often answers used it."""

    id: str
    file: str
    key: str
    query: str
    document: str
    keywords: str
    questions: tuple[str, ...]
    hits: int | None
    last_hit: str | None


@dataclass(frozen=True)
class EntryPage:
    """One page of matching rows, with the number of matches and pages (page numbers start at 1)."""

    rows: list[EntryRow]
    total: int
    page: int
    pages: int


def _haystack(entry: Entry) -> str:
    questions = getattr(entry, "questions", ()) or ()
    return "\n".join([entry.id, entry.query, entry.document, entry.keywords, *questions]).casefold()


def matching(entries: Sequence[Entry], text: str) -> list[Entry]:
    """Entries with every space-separated word of ``text`` in some field (case-insensitive substring)."""
    words = (text or "").casefold().split()
    if not words:
        return list(entries)
    return [e for e in entries if _has_all(_haystack(e), words)]


def _has_all(haystack: str, words: list[str]) -> bool:
    return all(w in haystack for w in words)


def entry_page(
    entries: Sequence[Entry],
    text: str = "",
    page: int = 1,
    size: int = PAGE_SIZE,
    *,
    folder: Path | str | None = None,
    hits: HitCounts | None = None,
) -> EntryPage:
    """Page ``page`` (clamped to the existing ones) of the entries matching ``text``, as table rows.

    ``hits`` comes from the turn log (TurnLog.hit_counts); without it hits and last hit are None ("—").
    """
    found = matching(entries, text)
    pages = max(1, -(-len(found) // size))
    page = min(max(1, int(page or 1)), pages)
    rows = []
    for entry in found[(page - 1) * size : page * size]:
        count, last = (hits or {}).get(entry.id, (0, None)) if hits is not None else (None, None)
        doc = entry.document if len(entry.document) <= PREVIEW_CHARS else entry.document[:PREVIEW_CHARS] + "…"
        rows.append(
            EntryRow(
                entry.id,
                entry_file(entry, folder),
                key_of(entry.id),
                entry.query,
                doc,
                entry.keywords,
                tuple(getattr(entry, "questions", ()) or ()),
                count,
                last,
            )
        )
    return EntryPage(rows, len(found), page, pages)


def safe_hit_counts(provider: Callable[[], HitCounts] | None) -> HitCounts | None:
    """The provider's hit counts, or None when there is no provider or it fails (the table then shows "—")."""
    if provider is None:
        return None
    try:
        return provider()
    except Exception:  # the log is optional: a broken log must not break the knowledge tab
        log.warning("hit counts unavailable", exc_info=True)
        return None
