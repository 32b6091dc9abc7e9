"""Where the knowledge store's edits go besides the local folder: nowhere (one machine), or a store shared by replicas.

A :class:`KnowledgeStore` runs each edit inside ``sync.editing()`` (under its folder lock) and its reads after
``sync.pull()``. The local default does nothing. A shared one (``knowledge.shared: postgres``,
bot/knowledge/shared_knowledge.py) makes the knowledge folder and the history folder a mirror of the store of record:
``editing`` takes the shared writer lock, brings the mirror up to date, lets the store run its ordinary edit on it,
then stores what changed (or puts the mirror back when the edit failed); ``pull`` brings in other replicas' edits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol


class KnowledgeSync(Protocol):
    """The knowledge store's link to the store of record shared by replicas."""

    def editing(self) -> AbstractContextManager[None]:
        """Hold the shared writer lock around one edit of the (up to date) local folder and publish its changes."""
        ...

    def pull(self) -> bool:
        """Bring other replicas' edits into the local folder; True when a file changed."""
        ...


class LocalOnly:
    """No store but the local folder (one machine): edits and reads need nothing more."""

    @contextmanager
    def editing(self) -> Iterator[None]:
        """Nothing to lock or publish beyond the folder lock."""
        yield

    def pull(self) -> bool:
        """Nothing to pull."""
        return False
