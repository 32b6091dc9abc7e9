"""Routing between knowledge bases: what one finds nothing for is asked of another (``routing.route_to``).

The other one's answer is labelled as coming from it (docs/knowledge-bases.md). One hop: the other one answers from
its own ladder only, so A -> B -> A cannot loop. The factory's KnowledgeBase applies :func:`routed` to a turn.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from bot.chat.answer import Answer, Strategy
from bot.knowledge.filters import EntryFilter
from bot.messages import History
from bot.texts import ROUTED

log = logging.getLogger(__name__)


class Answering(Protocol):
    """What routing needs of the other knowledge base's Bot: its own ladder (routing wraps it, not the Bot)."""

    def stream(
        self, message: str, history: History | None = None, *, mode: str | None = None, within: EntryFilter | None
    ) -> Iterator[Answer]:
        """Snapshots of its own answer."""
        ...


@dataclass(frozen=True)
class Route:
    """Where a knowledge base sends what it finds nothing for: the other one's name, label and Bot (built lazily)."""

    name: str
    label: str
    bot: Callable[[], Answering]


def found_nothing(answer: Answer) -> bool:
    """True for a finished answer that is the ladder's last resort (nothing in the knowledge passed)."""
    return answer.finished and answer.strategy is Strategy.LAST_RESORT


def routed(
    snapshots: Iterator[Answer],
    route: Route | None,
    message: str,
    history: History | None,
    within: EntryFilter | None,
) -> Iterator[Answer]:
    """``snapshots`` as they come, a last resort replaced by ``route``'s answer when that one finds something.

    The routed answer is labelled with the other knowledge base's name; when it finds nothing too, the last resort
    stands.
    """
    for snapshot in snapshots:
        if route is None or not found_nothing(snapshot):
            yield snapshot
            continue
        try:
            last = deque(route.bot().stream(message, history, within=within), maxlen=1)  # its finished answer
        except Exception:  # the other knowledge base failing must not cost this one its own reply
            log.exception("routing to knowledge base %r failed; giving this one's last resort", route.name)
            last = deque()
        other = last[0] if last else None
        if other is None or found_nothing(other):
            yield snapshot
            return
        notice = ROUTED.format(label=route.label)
        yield dataclasses.replace(
            other, text=f"{notice}\n\n{other.text}", question=snapshot.question, knowledge_base=route.name
        ).noted(notice)
        return
