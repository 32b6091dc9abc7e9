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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.knowledge.entries import Entry
from bot.search.base import Progress, SyncReport
from bot.search.progress import announce

if TYPE_CHECKING:
    from bot.search.encoders import FastTextEncoder
    from bot.search.faiss_searcher import FaissSearcher


def restage(index: FaissSearcher, entries: Sequence[Entry], progress: Progress | None) -> SyncReport | None:
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


def swap_in(
    index: FaissSearcher, encoder: FastTextEncoder, entries: Sequence[Entry], progress: Progress | None
) -> None:
    """Build the vectors of ``entries`` with ``encoder`` (a copy trained in its own folder) while ``index`` keeps
    serving, then make the copy's model ``index``'s encoder's and the new vectors ``index``'s, atomically."""
    from bot.search.encoders import FastTextEncoder

    aside = index.sibling(encoder.model_dir / "faiss", encoder)
    aside.reset("new model")
    announce(progress, len(entries))
    aside.upsert(entries, progress)
    current = index.encoder
    assert isinstance(current, FastTextEncoder)  # the only encoder with staged(), which made ``encoder``
    index.take_over(aside, lambda: current.adopt(encoder))
