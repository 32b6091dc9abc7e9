"""When each entry was last edited, read from the kept versions of its file (the store's history)."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from bot.errors import BotError
from bot.knowledge.entry_ids import entry_id
from bot.knowledge.files import entry_version, items
from bot.knowledge.store import KnowledgeStore


def _versions(content: bytes | None) -> dict[str, str]:
    """key -> entry version of a file's content (empty when it is not a knowledge file)."""
    try:
        data = json.loads(content or b"null")
    except (ValueError, RecursionError):
        return {}
    return {k: entry_version(raw) for k, raw in items(data)} if isinstance(data, (dict, list)) else {}


def last_edits(store: KnowledgeStore) -> dict[str, str]:
    """entry id -> the time (UTC ISO) its file was last written with that entry changed or added.

    Walks each file's kept versions newest first: the entry differs between a version and the one after it, so
    the write that replaced that version changed it. An entry unchanged through every kept version is left out
    (it was last edited before the oldest one, or written by hand before there was any history).
    """
    out: dict[str, str] = {}
    for file in store.files():
        stem = PurePosixPath(file).stem
        try:
            newer = {k: entry_version(raw) for k, raw in store.entries(file)}
            kept = store.history(file)
        except BotError:
            continue
        open_keys = set(newer)
        for version in kept:
            older = _versions(store.kept(file, version.version))
            for key in [k for k in open_keys if older.get(k) != newer.get(k)]:
                out[entry_id(stem, key)] = version.time
                open_keys.discard(key)
            if not open_keys:
                break
            newer = older
    return out
