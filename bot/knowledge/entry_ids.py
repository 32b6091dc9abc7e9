"""Entry ids: ``<stem>:<key>``, the knowledge file's name without ``.json`` and the entry's key in it.

The one place that builds and takes them apart (sources, the API's ``entries``, the eval files, the CLI, edits
from the page and the inbox): a key may itself hold ":" (it is everything after the first one).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EntryId:
    """An entry's id, parsed: the knowledge file's stem and the entry's key in that file."""

    stem: str
    key: str

    @classmethod
    def parse(cls, text: str) -> EntryId | None:
        """The id in ``text`` (spaces around it ignored), or None when it is not ``<stem>:<key>``."""
        stem, sep, key = (text or "").strip().partition(":")
        return cls(stem, key) if sep and stem and key else None

    def __str__(self) -> str:
        return entry_id(self.stem, self.key)


def entry_id(stem: str, key: str) -> str:
    """The id of the entry ``key`` in the knowledge file ``<stem>.json``."""
    return f"{stem}:{key}"


def stem_of(entry_id: str) -> str:
    """The knowledge file's stem of an id ("faq" of "faq:add")."""
    return entry_id.split(":", 1)[0]


def key_of(entry_id: str) -> str:
    """The key of an id within its file ("add" of "faq:add"; the whole text when it has no ":")."""
    return entry_id.split(":", 1)[-1]
