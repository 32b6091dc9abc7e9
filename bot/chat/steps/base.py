"""A turn on its way down the ladder, and the one method every rung has."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat.answer import Answer, Cutoffs, Part
from bot.handoff.tickets import Conversation
from bot.messages import History
from bot.search.base import Hit


@dataclass(frozen=True)
class Retrieval:
    """What the knowledge search found for a turn: every hit, those that pass, a split message's parts."""

    candidates: list[Hit]
    passed: list[Hit]
    parts: tuple[Part, ...]
    cutoffs: Cutoffs


class Turn:
    """One message going down the ladder: the working state the rungs share (not a result; Answer is).

    ``base`` is the answer so far (question, mode, notices, and after the search its candidates); the search runs
    at most once, when the first rung that needs it asks (:meth:`retrieved`): small talk and hand-off never pay it.
    """

    def __init__(
        self,
        base: Answer,
        history: History | None,
        timings: dict[str, float],
        start: float,
        search: Callable[[Turn], Retrieval],
        conversation: Conversation | None = None,
    ):
        self.base = base
        self.conversation = conversation  # where the visitor talks, for a hand-off (None: no ticket can be opened)
        self.history = history
        self.timings = timings
        self.start = start
        self._search = search
        self._retrieval: Retrieval | None = None
        self.declined = False  # the LLM said the references do not answer (a miss; the ladder goes on)

    @property
    def question(self) -> str:
        """The message as cleaned (and masked when privacy.mask_llm is on)."""
        return self.base.question

    @property
    def search_text(self) -> str:
        """What the knowledge is searched with: the standalone rewrite of a follow-up, else the message."""
        return self.base.rewritten or self.base.question

    def retrieved(self) -> Retrieval:
        """The knowledge search for this turn (run on the first call)."""
        if self._retrieval is None:
            self._retrieval = self._search(self)
        return self._retrieval

    def replace(self, **changes: Any) -> Answer:
        """``base`` with ``changes`` (and remembered as the new base)."""
        self.base = dataclasses.replace(self.base, **changes)
        return self.base


class Step(Protocol):
    """One rung: yields the answer's snapshots (the last one finished) when it answers, nothing when it passes."""

    name: str

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer ``turn`` or pass (yield nothing, or only unfinished snapshots a later rung replaces)."""
        ...
