"""Knowledge files as raw JSON for rewriting: faithful reads, entry versions, ids other files already define."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from bot.errors import KnowledgeError, KnowledgeProblem
from bot.knowledge.entries import (
    JSON_ERRORS,
    LONE_SURROGATE_PROBLEM,
    Entry,
    json_problem,
    knowledge_files,
    lone_surrogate,
    parse_text,
    related_problems,
)
from bot.knowledge.entry_ids import key_of, stem_of

INDEX = re.compile(r"0|[1-9][0-9]*")


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _strict_object(pairs: list[tuple[str, Any]]) -> dict:
    # A rewrite would silently keep only the last copy of a repeated key, so such files are refused.
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _stems_may_clash(a: str, b: str) -> bool:
    # Ids are "<stem>:<key>", so "a" + "b:c" equals "a:b" + "c"; only such stems can share an id.
    return a == b or a.startswith(b + ":") or b.startswith(a + ":")


def entry_version(raw: Any) -> str:
    """The version of one stored entry: a hash of its raw JSON record (every field, key order ignored)."""
    blob = json.dumps(raw, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def items(data: dict | list) -> list[tuple[str, Any]]:
    """(key, raw entry) of a decoded file; the key of a list entry is its index."""
    return list(data.items()) if isinstance(data, dict) else [(str(i), v) for i, v in enumerate(data)]


def lookup(data: dict | list, key: str | None) -> Any:
    """The raw entry at ``key`` (None when there is none)."""
    if key is None:
        return None
    if isinstance(data, dict):
        return data.get(key)
    return data[int(key)] if INDEX.fullmatch(key) and int(key) < len(data) else None


def read_data(path: Path) -> dict | list | None:
    """The decoded knowledge file (None when missing); refuses only a file that cannot be rewritten faithfully."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeError([KnowledgeProblem(str(path), None, f"cannot read as UTF-8 text: {exc}")]) from None
    try:
        data = json.loads(text, object_pairs_hook=_strict_object)
    except JSON_ERRORS as exc:
        why = f"{json_problem(exc)}; fix it by hand or re-upload it"
        raise KnowledgeError([KnowledgeProblem(str(path), None, why)]) from None
    except _DuplicateKey as dup:
        why = f"key {dup.key!r} appears twice; fix it by hand (a rewrite would silently drop one copy)"
        raise KnowledgeError([KnowledgeProblem(str(path), None, why)]) from None
    if not isinstance(data, (dict, list)):
        why = "top level must be an object {id: entry} or a list of entries"
        raise KnowledgeError([KnowledgeProblem(str(path), None, why)])
    if lone_surrogate(text, data):  # it could not be written back
        raise KnowledgeError([KnowledgeProblem(str(path), None, f"{LONE_SURROGATE_PROBLEM}; fix it by hand")])
    return data


def duplicate_ids(folder: Path, path: Path, entries: list[Entry]) -> list[KnowledgeProblem]:
    """Ids of ``entries`` that another knowledge file already defines (only same-stem files can clash)."""
    if not folder.is_dir():
        return []
    problems: list[KnowledgeProblem] = []
    ids = {e.id for e in entries}
    for other in knowledge_files(folder):
        if not _stems_may_clash(path.stem, other.stem) or other.resolve() == path.resolve():
            continue
        for entry in file_entries(other):
            if entry.id in ids:
                problems.append(KnowledgeProblem(str(path), entry.id, f"duplicate id, also defined in {other}"))
    return problems


def file_entries(path: Path) -> list[Entry]:
    """The valid entries of one knowledge file (none when it cannot be read: the loader reports that itself)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return []
    return parse_text(text, path.stem, str(path), [])


def broken_related(folder: Path, path: Path, entries: list[Entry]) -> list[KnowledgeProblem]:
    """What the new version of ``path`` (``entries``) would leave naming no entry in ``related``: its own entries'
    ids of no entry, and an entry it drops that another file's entry lists (the folder is read only then)."""
    own = {e.id for e in entries}
    pending = [e for e in entries if any(r not in own for r in e.related)]
    dropped = {e.id for e in file_entries(path)} - own if path.exists() else set()
    if not pending and not dropped:
        return []
    here = path.resolve()
    others = [e for other in knowledge_files(folder) if other.resolve() != here for e in file_entries(other)]
    problems = related_problems([*others, *entries], entries)
    for entry in others:
        for gone in dropped.intersection(entry.related):
            why = f"{gone} is listed in 'related' of {entry.id} ({entry.source}); remove it there first"
            problems.append(KnowledgeProblem(str(path), key_of(gone), why))
    return problems


def dump_like(data: dict | list, previous: bytes | None) -> bytes:
    """``data`` as JSON laid out like ``previous`` (its indent, ``":"`` or ``": "``, final newline); indent 2 when new.

    Key order is kept as decoded and non-ASCII text stays readable (ensure_ascii=False), so a one-entry edit
    changes only that entry's lines.
    """
    text = previous.decode("utf-8-sig", "replace") if previous else ""
    indent: str | int | None = 2
    colon = ": "
    if text:
        found = re.search(r"\n([ \t]+)\S", text)
        indent = found.group(1) if found else None
        first = re.search(r"[{\[]\s*(\{\s*)?\"", text)
        if first:
            try:
                # scanstring is public at runtime (json.decoder) but missing from typeshed's stub
                end = json.decoder.scanstring(text, first.end())[1]  # type: ignore[attr-defined]
                colon = ":" if text[end : end + 1] == ":" and text[end + 1 : end + 2] not in (" ", "\t") else ": "
            except ValueError:
                pass
    comma = "," if indent is not None or colon == ":" else ", "
    out = json.dumps(data, ensure_ascii=False, indent=indent, separators=(comma, colon))
    return (out + ("\n" if not text or text.endswith("\n") else "")).encode("utf-8")


def entry_file(entry: Entry, folder: Path | str | None) -> str:
    """The entry's knowledge file relative to ``folder`` ('/'-separated), or its stem + '.json' when unknown."""
    source = Path(entry.source) if entry.source else None
    if source is not None and folder is not None:
        try:
            return source.resolve().relative_to(Path(folder).resolve()).as_posix()
        except ValueError:
            pass
    return source.name if source is not None else stem_of(entry.id) + ".json"
