"""Reading the knowledge folder: when it changed, its entries and the units the indexes hold.

The source knows no searcher. :meth:`KnowledgeSource.changed` says whether the folder should be read again (another
replica's edit pulled in, or a file changed on disk), and :meth:`KnowledgeSource.read` reads it into a
:class:`Loaded` snapshot. A malformed file raises KnowledgeError and is kept in ``error``; the last good snapshot stays
``current`` until a read succeeds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.errors import KnowledgeError
from bot.knowledge.entries import Entry, folder_signature, load_entries
from bot.search.passages import Passages
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import Tokenizer


@dataclass(frozen=True)
class Loaded:
    """One good read of the folder: entries, the units the indexes hold, and the folder's signature then."""

    entries: list[Entry]
    units: list[Entry]
    signature: tuple


class KnowledgeSource:
    """The knowledge folder as the index reads it."""

    def __init__(
        self,
        folder: str | Path,
        tokenizer: Tokenizer,
        passages: Passages | None = None,
        pull: Callable[[], bool] | None = None,
        synonyms: Synonyms | None = None,
    ):
        self.folder = Path(folder)
        self.tokenizer = tokenizer
        # Long documents reach the indexes as passage units (bot/search/passages.py); None = every entry whole.
        self.passages = passages
        # Replicas sharing the knowledge (bot/knowledge/shared.py): brings their edits into the folder before each
        # check; True when a file changed.
        self.pull = pull
        # The searchers' synonyms: told each loaded knowledge, whose aliases they mine (bot/search/aliases.py).
        self.synonyms = synonyms
        self.lock = threading.RLock()  # held while the files are read: one read at a time
        self.current: Loaded | None = None  # the last good read; None before one succeeded
        self.error: KnowledgeError | None = None  # why the last read failed, until one succeeds
        self.signature: tuple | None = None  # the folder as last read, good or bad
        self._last_check = 0.0

    def changed(self, force: bool = False, check_interval: float = 0.0) -> tuple | None:
        """The folder's signature when it should be read again, else None.

        It is read again when it changed since the last read (looked at no more often than every ``check_interval``
        seconds) or with ``force``.
        """
        now = time.monotonic()
        # Another replica's edit is in the folder from here on; it is read now, whatever check_interval says.
        pulled = self.pull() if self.pull is not None else False
        if not force and not pulled and now - self._last_check < check_interval:
            return None
        self._last_check = now
        signature = folder_signature(self.folder)
        return signature if force or signature != self.signature else None

    def read(self, signature: tuple | None = None) -> Loaded:
        """Read the folder (its ``signature`` when the caller has it); KnowledgeError on a bad file."""
        with self.lock:
            signature = folder_signature(self.folder) if signature is None else signature
            try:
                entries = load_entries(self.folder)
            except KnowledgeError as exc:
                self.signature, self.error = signature, exc
                raise
            self.tokenizer.add_words(w for e in entries for w in e.metadata)
            if self.synonyms is not None:  # before any sync: an alias may join jieba's words, as keywords do
                self.synonyms.learn(entries)
            units = self.passages.expand(entries) if self.passages is not None else entries
            self.current, self.signature, self.error = Loaded(entries, units, signature), signature, None
            return self.current
