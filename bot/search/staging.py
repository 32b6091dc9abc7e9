"""Staging a new encoder model for a vector index: when the knowledge changed what the model must be (fastText is
trained on the knowledge), the model is trained again and every vector re-encoded, the index serving meanwhile.

Two ways, chosen by the encoder. One that can stage (``staged(entries)``: fastText) trains a copy in its own folder;
the vectors are encoded aside with it while the index keeps serving the old model, then model and vectors are swapped
in at once (:meth:`bot.search.faiss_searcher.FaissSearcher.take_over`). Any other encoder is asked to ``prepare``
(train in place, if it needs to) and the index is rebuilt. An encoder whose model did not change leaves the sync to
the usual diff (:meth:`bot.search.base.Searcher.sync`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, Self, cast

from bot.knowledge.entries import Entry
from bot.search.base import Progress, SyncReport
from bot.search.encoders.base import Encoder
from bot.search.progress import announce


class StagingEncoder(Protocol):
    """An encoder that trains a new model in its own folder while the old one serves (fastText)."""

    model_dir: Path

    def staged(self, entries: Sequence[Entry]) -> tuple[str, Self] | None:
        """(why, a copy trained on ``entries``) when the model must change, else None."""
        ...

    def adopt(self, other: Self) -> None:
        """Make ``other``'s model this encoder's."""
        ...


class VectorIndex(Protocol):
    """What staging needs of a vector index (:class:`bot.search.faiss_searcher.FaissSearcher`)."""

    encoder: Encoder

    def reset(self, reason: str) -> None:
        """Drop every vector."""
        ...

    def upsert(self, entries: Sequence[Entry], progress: Progress | None = None) -> None:
        """Encode and store ``entries``."""
        ...

    def rebuild_with(self, entries: Sequence[Entry], reason: str, progress: Progress | None) -> None:
        """Drop every vector and encode ``entries`` again, readers waiting."""
        ...

    def sibling(self, path: Path, encoder: Encoder) -> Self:
        """An index like this one in another folder, with another encoder."""
        ...

    def take_over(self, other: Self, adopt: Callable[[], None]) -> None:
        """Serve ``other``'s vectors from now on, ``adopt`` run in the same step."""
        ...


def restage(index: VectorIndex, entries: Sequence[Entry], progress: Progress | None) -> SyncReport | None:
    """Bring ``index``'s model in step with ``entries`` and re-encode them all when it changed (the caller holds the
    index's writer lock); None when the model stays and the usual diff applies."""
    start = time.perf_counter()
    staged = getattr(index.encoder, "staged", None)
    fresh = staged(entries) if staged is not None else None
    if fresh is not None:  # a new model: encode everything aside, then swap model and vectors at once
        reason, encoder = fresh
        swap_in(index, encoder, entries, progress)
    else:
        retrained = index.encoder.prepare(entries)
        if not retrained:
            return None
        reason = retrained
        index.rebuild_with(entries, retrained, progress)
    return SyncReport(
        added=len(entries),
        rebuilt=True,
        seconds=time.perf_counter() - start,
        reason=f"{reason}; all {len(entries)} vectors re-encoded",
    )


def swap_in(index: VectorIndex, encoder: StagingEncoder, entries: Sequence[Entry], progress: Progress | None) -> None:
    """Build the vectors of ``entries`` with ``encoder`` (a copy trained in its own folder) while ``index`` keeps
    serving, then make the copy's model ``index``'s encoder's and the new vectors ``index``'s, atomically."""
    aside = index.sibling(encoder.model_dir / "faiss", cast(Encoder, encoder))
    aside.reset("new model")
    announce(progress, len(entries))
    aside.upsert(entries, progress)
    current = cast(StagingEncoder, index.encoder)  # the encoder whose staged() made ``encoder``
    index.take_over(aside, lambda: current.adopt(encoder))
