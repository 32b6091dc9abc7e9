"""Retrieval-only replies: the best entry's document, or one entry per part of a message that asks several things."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from bot.chat.answer import Part
from bot.search.base import Hit
from bot.search.passages import excerpt
from bot.texts import OTHERS_LABEL, PART_NOT_FOUND, RETRIEVAL_ONLY_LABEL


def compose(
    hits: Sequence[Hit],
    parts: Sequence[Part],
    no_hits: str,
    max_hit_chars: int | None = None,
    channel: str | None = None,
    together: Collection[str] = (),
) -> str:
    """The reply without an LLM; ``no_hits`` is used when nothing passed.

    A split message gets one block per part, each labelled with its sub-question (parts answered by the same
    entry share a block); a message asking for several of a kind gets one block per entry answering ``together``;
    otherwise the best hit's document (a long one: its best passages within
    ``max_hit_chars``; an entry's variant for ``channel`` instead, whole). The other passing hits follow as titles.
    """

    def _entry(hit: Hit) -> str:
        whole = hit.entry.document if max_hit_chars is None else excerpt(hit, max_hit_chars)
        document = hit.entry.variant(channel) or whole  # a variant was written for this channel: sent as written
        return f"**{hit.entry.query}**\n\n{document}"

    if not hits:
        return no_hits
    blocks: list[tuple[list[str], Hit | None]] = []
    if len(parts) > 1 and any(p.hit is not None for p in parts):
        for part in parts:
            same = next(
                (b for b in blocks if part.hit is not None and b[1] is not None and b[1].entry.id == part.hit.entry.id),
                None,
            )
            if same is not None:
                same[0].append(part.question)
            else:
                blocks.append(([part.question], part.hit))
        text = "\n\n".join(
            f"↳ {'；'.join(questions)}\n\n" + (_entry(hit) if hit else PART_NOT_FOUND) for questions, hit in blocks
        )
    elif len(listed := [hit for hit in hits if hit.entry.id in together]) > 1:
        blocks += [([], hit) for hit in listed]
        text = "\n\n".join(_entry(hit) for hit in listed)
    else:
        blocks.append(([], hits[0]))
        text = _entry(hits[0])
    shown = {hit.entry.id for _, hit in blocks if hit is not None}
    others = [h for h in hits if h.entry.id not in shown]
    text = f"{RETRIEVAL_ONLY_LABEL}\n\n{text}"
    if others:
        text += f"\n\n{OTHERS_LABEL}\n" + "\n".join(f"- {h.entry.query}" for h in others)
    return text
