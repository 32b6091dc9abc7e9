"""Suggested phrasings from traffic: a question the user resolved through the ladder becomes a suggested phrasing
of the entry it resolved to, for an admin to accept (a new phrasing, indexed at once) or reject (never again).

Read from the conversation log, per conversation, turn after turn:
- a clarify or confirm question, then the user's pick (strategy ``chosen``): the asked question → the picked entry;
- a fallback with "did you mean" options (last resort, hand-off after misses), then a message that is exactly an
  entry's question and is answered by it (a clicked suggestion): the missed question → that entry.
Nothing changes without approval. Questions are stored masked by the log, and an entry's own phrasings and
rejected pairs are never suggested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.conversations.inbox import normalise
from bot.conversations.log_store import ConversationLog
from bot.knowledge.entries import Entry

OFFERS = {"clarify": "clarify", "confirm": "confirm"}
FALLBACKS = ("last_resort", "escalate")
ANSWERED = ("direct", "verbatim", "chosen", "rewrite", "hyde", "translate")


@dataclass(frozen=True)
class Suggestion:
    """A question suggested as a phrasing of an entry: how often, in which conversations, through which rung."""

    entry_id: str
    entry_query: str
    question: str
    norm: str
    count: int
    sessions: tuple[str, ...]
    turn_ids: tuple[int, ...]
    via: tuple[str, ...]
    latest: str

    def to_dict(self) -> dict:
        """JSON-ready form (``python -m bot knowledge suggestions --json``)."""
        return {
            "entry_id": self.entry_id,
            "entry_query": self.entry_query,
            "question": self.question,
            "count": self.count,
            "conversations": len(self.sessions),
            "via": list(self.via),
            "turn_ids": list(self.turn_ids),
            "latest": self.latest,
        }


def _answered_entry(turn: dict) -> str | None:
    """The entry a turn answered from (its first used hit), if it answered."""
    if turn["strategy"] not in ANSWERED:
        return None
    used = [h for h in turn["hits"] if isinstance(h, dict) and h.get("used", True)]
    return str(used[0]["id"]) if used and used[0].get("id") else None


def resolutions(turns: Sequence[dict], entries: dict[str, Entry]) -> list[tuple[dict, str, str, dict]]:
    """(asked turn, entry id, via, resolving turn) for every resolution found in ``turns`` (oldest first)."""
    found = []
    last: dict[str, dict] = {}
    for turn in turns:
        previous = last.get(turn["session"])
        last[turn["session"]] = turn
        entry_id = _answered_entry(turn)
        if previous is None or entry_id is None or entry_id not in entries:
            continue
        if turn["strategy"] == "chosen" and previous["strategy"] in OFFERS:
            found.append((previous, entry_id, OFFERS[previous["strategy"]], turn))
        elif previous["strategy"] in FALLBACKS and normalise(turn["question"]) == normalise(entries[entry_id].query):
            found.append((previous, entry_id, "did-you-mean", turn))
    return found


def suggestions(log: ConversationLog, knowledge: Sequence[Entry], scan: int = 5000) -> list[Suggestion]:
    """The pending suggestions, most resolved first (then newest), from the newest ``scan`` conversation turns."""
    entries = {e.id: e for e in knowledge}
    rejected = log.rejected_suggestions()
    grouped: dict[tuple[str, str], list[tuple[dict, str, dict]]] = {}
    for asked, entry_id, via, resolving in resolutions(log.session_turns(scan), entries):
        norm = normalise(asked["question"])
        own = {normalise(p) for p in entries[entry_id].phrasings}
        if not norm or norm in own or (norm, entry_id) in rejected:
            continue
        grouped.setdefault((norm, entry_id), []).append((asked, via, resolving))
    out = [
        Suggestion(
            entry_id=entry_id,
            entry_query=entries[entry_id].query,
            question=found[-1][0]["question"],
            norm=norm,
            count=len(found),
            sessions=tuple(dict.fromkeys(a["session"] for a, _, _ in found)),
            turn_ids=tuple(t["id"] for a, _, r in found for t in (a, r)),
            via=tuple(dict.fromkeys(v for _, v, _ in found)),
            latest=found[-1][2]["time"],
        )
        for (norm, entry_id), found in grouped.items()
    ]
    newest_first = sorted(out, key=lambda s: s.latest, reverse=True)
    return sorted(newest_first, key=lambda s: -s.count)  # stable: the newest first among equal counts
