"""The nearest vectors of many questions found in one batch, used by the single searches that follow without
changing what they return.

A batch search (a matrix product over every question at once) costs a fraction of one scan per question, but its
scores come from another order of summation than a single search's: two near-equal vectors can swap places at the
edge of the list. So a single search only learns from the batch where to look: it scans the batch's candidates
with its own code (a FAISS selector: the same kernel over the same vectors in the same order, hence the same
scores), and keeps that result only when every vector outside the candidates scores below its last one, which
holds when its last score beats the lowest candidate's batch score by more than the two summations' rounding can
differ. Then the full scan returns the same list: the vectors it skips score below the k-th, so they never decide
whether one of those scoring as the k-th is kept (a faiss heap admits a vector when fewer than k of those seen
score at least as much), nor the order (faiss sorts the kept ones by score, then position). Otherwise, or for a
list long enough that faiss collects it another way (a reservoir, from ``distance_compute_min_k_reservoir``), it
scans everything, as without a batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bot.search.faiss_files import _import_faiss, _search_one_thread

UNIT_ROUNDOFF = 2.0**-24  # float32
CHUNK = 8192  # stored vectors read at a time for their longest norm
DEPTH = 160  # vectors kept per question: twice a hybrid search's default scan (4 vectors per hit, 20 hits)


class PreparedNearest:
    """Each question vector's ``depth`` nearest vectors in a flat index, as one batch found them.

    ``added``: how many vectors the index was ever given (with its size, any write since changes one of them).
    """

    def __init__(self, index: Any, added: int, vectors: np.ndarray, depth: int = DEPTH):
        faiss = _import_faiss()
        self.index, self.added = index, added
        self.ntotal = int(index.ntotal)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        k = min(depth, self.ntotal)
        scores, ids = _search_one_thread(index, vectors, k) if len(vectors) and k else (np.empty((0, 0)), None)
        flat, longest = faiss.downcast_index(index.index), 0.0
        for start in range(0, self.ntotal, CHUNK):  # a chunk at a time, not a copy of the whole index
            rows = flat.reconstruct_n(start, min(CHUNK, self.ntotal - start))
            longest = max(longest, float(np.linalg.norm(rows, axis=1).max()))
        # |computed - exact| <= gamma_d * sum|x_i y_i| <= gamma_d |x| |y| for any order of summation (Higham 3.1):
        # twice that between a batch's and a single search's score of one pair, doubled again to be safe.
        gamma = index.d * UNIT_ROUNDOFF / (1.0 - index.d * UNIT_ROUNDOFF)
        self.error_per_norm = 4.0 * gamma * longest
        self._rows = {v.tobytes(): (ids[i], scores[i]) for i, v in enumerate(vectors)} if ids is not None else {}

    def __len__(self) -> int:
        return len(self._rows)

    def nearest(self, index: Any, added: int, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(scores, ids) of ``vector``'s ``k`` nearest, exactly as a single search of ``index`` returns them; None
        when the batch cannot tell (the index was written since, an unknown vector, ``k`` too deep, a near tie)."""
        if index is not self.index or added != self.added or int(index.ntotal) != self.ntotal:
            return None
        found = self._rows.get(np.ascontiguousarray(vector, dtype=np.float32).tobytes())
        if found is None or not 0 < k < len(found[0]):
            return None
        ids, scores = found
        faiss = _import_faiss()
        if k >= faiss.cvar.distance_compute_min_k_reservoir:
            return None
        candidates = ids >= 0
        selector = faiss.IDSelectorBatch(ids[candidates])
        got, got_ids = _search_one_thread(index, vector[None, :], k, faiss.SearchParameters(sel=selector))
        if (got_ids[0] < 0).any():
            return None
        if candidates.all():  # else every vector is a candidate: nothing was left out
            error = self.error_per_norm * float(np.linalg.norm(vector))
            if not float(got[0, -1]) > float(scores.min()) + error:
                return None
        return got, got_ids
