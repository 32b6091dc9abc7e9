"""What an import would bring in, as entries, without writing anything (the dry run of ``knowledge import``)."""

from __future__ import annotations

from pathlib import Path

from bot.errors import KnowledgeError, KnowledgeProblem
from bot.knowledge.entries import (
    Entry,
    load_entries,
    parse_keywords,
    parse_questions,
    parse_text,
    related_problems,
)
from bot.knowledge.entry_ids import entry_id, stem_of
from bot.knowledge.store import KnowledgeStore


def incoming_entries(
    store: KnowledgeStore,
    path: Path,
    text: str,
    name: str | None = None,
    overwrite: bool = False,
    data: bytes = b"",
) -> tuple[list[Entry], list[Entry]]:
    """The entries a JSON, CSV or Excel import (``text``, or ``data`` for .xlsx) holds, and the entries beside it.

    Ids are those the import would give (``<file stem>:<key>``; CSV rows without a key get ``<stem>:+<n>``, the
    next free number being chosen only when written). Raises KnowledgeError naming every problem of the file.
    """
    text = text.removeprefix("\ufeff")
    existing = load_entries(store.folder) if store.folder.is_dir() else []
    if path.suffix.lower() in (".csv", ".xlsx"):
        from bot.knowledge.csv_io import json_name, read_csv, read_xlsx

        default = json_name(name or path.stem)
        sheet = path.suffix.lower() == ".xlsx"
        grouped = read_xlsx(data, default, path.name) if sheet else read_csv(text, default, path.name)
        incoming: list[Entry] = []
        for file, rows in grouped.items():
            stem = Path(file).stem
            raws = [*rows.keyed.items(), *((f"+{n}", raw) for n, raw in enumerate(rows.unkeyed, 1))]
            incoming += [_entry(entry_id(stem, key), raw) for key, raw in raws]
        return incoming, existing
    target = name or path.name
    problems: list[KnowledgeProblem] = []
    incoming = parse_text(text, Path(target).stem, str(path), problems)
    if problems:
        raise KnowledgeError(problems)
    if overwrite:  # the file's current entries go away
        existing = [e for e in existing if stem_of(e.id) != Path(target).stem]
    unknown = related_problems([*existing, *incoming], incoming)
    if unknown:
        raise KnowledgeError(unknown)
    return incoming, existing


def _entry(entry_id: str, raw: dict) -> Entry:
    query = raw["query"]
    return Entry(
        entry_id,
        query,
        raw["document"],
        parse_keywords(raw.get("metadata", "")),
        "",
        parse_questions(raw.get("questions"), query),
        categories=parse_keywords(raw.get("categories") or ""),
        draft=bool(raw.get("draft", False)),
        valid_from=raw.get("valid_from"),
        valid_until=raw.get("valid_until"),
    )
