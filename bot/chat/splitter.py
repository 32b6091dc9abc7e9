"""Splitting a message that asks several things at once into parts, each retrieved on its own."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from bot.search.base import Hit

_PUNCT = r"[，,；;？?！!。\n]"


class QuestionSplitter:
    """Splits on Chinese/English commas, semicolons, question marks and configurable conjunctions."""

    def __init__(self, conjunctions: Sequence[str], min_part_chars: int, max_parts: int):
        words = sorted((re.escape(c) for c in conjunctions if c.strip()), key=len, reverse=True)
        self._pattern = re.compile(_PUNCT + ("|" + "|".join(words) if words else ""), re.IGNORECASE)
        self.min_part_chars = min_part_chars
        self.max_parts = max_parts

    def split(self, text: str) -> list[str]:
        """The parts of ``text`` (one part means: do not split)."""
        parts = [p.strip() for p in self._pattern.split(text)]
        parts = [p for p in parts if len(p) >= self.min_part_chars]
        return parts[: self.max_parts] if len(parts) > 1 else [text]


def merge_hits(lists: Sequence[tuple[str, list[Hit]]], top_k: int) -> list[Hit]:
    """Merge per-part hit lists by entry, keeping each entry's best relevance and the part it came from.

    Ordered by rank within its own list first, so every part's best hit survives the top_k cut
    even when another part's scores are all higher.
    """
    best: dict[str, tuple[int, Hit, int]] = {}  # entry id -> (best rank anywhere, hit, rank in the labelled part)
    unlabelled = len(max((hits for _, hits in lists), key=len, default=[])) + 1
    for part, hits in lists:
        for rank, hit in enumerate(hits):
            part_rank = rank if part else unlabelled
            current = best.get(hit.entry.id)
            if current is None:
                best[hit.entry.id] = (rank, dataclasses.replace(hit, subquestion=part), part_rank)
                continue
            old_rank, old, old_part_rank = current
            top = hit if hit.relevance > old.relevance else old
            # The label names the sub-question that ranks the entry best (ties: the earlier part); the whole
            # message has no label.
            label, label_rank = (part, part_rank) if part_rank < old_part_rank else (old.subquestion, old_part_rank)
            best[hit.entry.id] = (min(rank, old_rank), dataclasses.replace(top, subquestion=label), label_rank)
    ordered = sorted(best.values(), key=lambda rh: (rh[0], -rh[1].relevance))
    return [hit for _, hit, _ in ordered[:top_k]]
