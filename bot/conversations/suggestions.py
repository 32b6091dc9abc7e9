"""Suggested phrasings from traffic: a question the user resolved through the ladder becomes a suggested phrasing
of the entry it resolved to, for an admin to accept (a new phrasing, indexed at once) or reject (never again).

Read from the conversation log, per conversation, turn after turn:
- a clarify or confirm question, then the user's pick (strategy ``chosen``): the asked question → the picked entry;
- a fallback with "did you mean" options (last resort, hand-off after misses), then a message that is exactly an
  entry's question and is answered by it (a clicked suggestion), or picks one by number from the unsure fallback's
  numbered options: the missed question → that entry.
Nothing changes without approval. Questions are stored masked by the log, and an entry's own phrasings and
rejected pairs are never suggested.

The same resolutions, and a 👍 on an answer, are labelled (message, entry) pairs: ``python -m bot calibrate
--traffic`` tunes the thresholds and agreement weights on them (:func:`labelled_pairs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.conversations.inbox import SessionTurn, normalise
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


def _answered_entry(turn: SessionTurn) -> str | None:
    """The entry a turn answered from (its first used hit), if it answered."""
    if turn["strategy"] not in ANSWERED:
        return None
    used = [h for h in turn["hits"] if isinstance(h, dict) and h.get("used", True)]
    return str(used[0]["id"]) if used and used[0].get("id") else None


@dataclass(frozen=True)
class Resolution:
    """A question resolved in its conversation: the asked turn, the entry it led to, how (``via``) and the turn that
    got the entry."""

    asked: SessionTurn
    entry_id: str
    via: str
    resolving: SessionTurn


def resolutions(turns: Sequence[SessionTurn], entries: dict[str, Entry]) -> list[Resolution]:
    """Every resolution found in ``turns`` (oldest first)."""
    found = []
    last: dict[str, SessionTurn] = {}
    for turn in turns:
        previous = last.get(turn["session"])
        last[turn["session"]] = turn
        entry_id = _answered_entry(turn)
        if previous is None or entry_id is None or entry_id not in entries:
            continue
        if turn["strategy"] == "chosen" and previous["strategy"] in OFFERS:
            found.append(Resolution(previous, entry_id, OFFERS[previous["strategy"]], turn))
        elif (turn["strategy"] == "chosen" and previous["strategy"] in FALLBACKS) or (
            previous["strategy"] in FALLBACKS and normalise(turn["question"]) == normalise(entries[entry_id].query)
        ):  # a number picked from its options
            found.append(Resolution(previous, entry_id, "did-you-mean", turn))
    return found


def suggestions(log: ConversationLog, knowledge: Sequence[Entry], scan: int = 5000) -> list[Suggestion]:
    """The pending suggestions, most resolved first (then newest), from the newest ``scan`` conversation turns."""
    entries = {e.id: e for e in knowledge}
    rejected = log.rejected_suggestions()
    grouped: dict[tuple[str, str], list[Resolution]] = {}
    for r in resolutions(log.session_turns(scan), entries):
        norm = normalise(r.asked["question"])
        own = {normalise(p) for p in entries[r.entry_id].phrasings}
        if not norm or norm in own or (norm, r.entry_id) in rejected:
            continue
        grouped.setdefault((norm, r.entry_id), []).append(r)
    out = [
        Suggestion(
            entry_id=entry_id,
            entry_query=entries[entry_id].query,
            question=found[-1].asked["question"],
            norm=norm,
            count=len(found),
            sessions=tuple(dict.fromkeys(r.asked["session"] for r in found)),
            turn_ids=tuple(t["id"] for r in found for t in (r.asked, r.resolving)),
            via=tuple(dict.fromkeys(r.via for r in found)),
            latest=found[-1].resolving["time"],
        )
        for (norm, entry_id), found in grouped.items()
    ]
    newest_first = sorted(out, key=lambda s: s.latest, reverse=True)
    return sorted(newest_first, key=lambda s: -s.count)  # stable: the newest first among equal counts


@dataclass(frozen=True)
class LabelledPair:
    """A message traffic labelled with the entry that answers it: through a clarify pick, a yes to a confirmation,
    a clicked (or picked) "did you mean", or a 👍 on the answer (``via``)."""

    question: str
    entry_id: str
    via: str


def labelled_pairs(log: ConversationLog, knowledge: Sequence[Entry], scan: int = 5000) -> list[LabelledPair]:
    """Every (message, entry) pair the newest ``scan`` turns label, once per message and entry (oldest first);
    pairs an admin rejected as suggestions and entries no longer in the knowledge are left out."""
    entries = {e.id: e for e in knowledge}
    rejected = log.rejected_suggestions()
    turns = log.session_turns(scan)
    found: dict[tuple[str, str], LabelledPair] = {}

    def add(question: str, entry_id: str, via: str) -> None:
        norm = normalise(question)
        if norm and entry_id in entries and (norm, entry_id) not in rejected:
            found.setdefault((norm, entry_id), LabelledPair(question, entry_id, via))

    for r in resolutions(turns, entries):
        add(r.asked["question"], r.entry_id, r.via)
    for turn in turns:
        entry_id = _answered_entry(turn)
        # a 👍 on a pick rates the picked entry for the pick ("2"), which the resolution above already labels
        if turn.get("rating") == 1 and entry_id is not None and turn["strategy"] != "chosen":
            add(turn["question"], entry_id, "thumbs-up")
    return list(found.values())
