"""The decision ladder as rungs (steps) assembled from config: ``ladder.steps`` then ``fallback.chain``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.chat.chitchat import ChitChat
from bot.chat.hyde import HydeFallback
from bot.chat.language import KnowledgeLanguage
from bot.chat.respond import Responder
from bot.chat.steps.base import Retrieval, Step, Turn
from bot.chat.steps.fallbacks import HydeStep, LastResortStep, Research, RewriteStep
from bot.chat.steps.knowledge import AnswerStep, ClarifyStep, ConfirmStep
from bot.chat.steps.talk import ChitChatStep, ChoiceStep, HandoffStep
from bot.chat.steps.translate import TranslateStep, Translator
from bot.config.base import default_of
from bot.config.ladder import LadderSettings
from bot.config.settings import LADDER_STEPS
from bot.handoff.desk import Desk
from bot.knowledge.entries import Entry

__all__ = ["Ladder", "Retrieval", "Step", "Turn", "build_steps"]


@dataclass(frozen=True)
class Ladder:
    """The rungs before the fallback chain, the chain, and what they need (small talk and hand-off are off without
    theirs)."""

    steps: tuple[str, ...] = LADDER_STEPS
    chain: tuple[str, ...] = ("hyde", "last_resort")  # fallback.chain
    chitchat: ChitChat | None = None
    desk: Desk | None = None  # the hand-off to a person (None: off)
    max_options: int = default_of(LadderSettings, "max_options")


def build_steps(
    ladder: Ladder,
    chain: Sequence[str],
    responder: Responder,
    research: Research,
    entries: Callable[[], list[Entry]],
    hyde: HydeFallback | None = None,
    rewrite: bool = False,
    translator: Translator | None = None,
    popular: Callable[[int], list[Entry]] | None = None,
) -> list[Step]:
    """The steps named by ``ladder.steps`` then ``chain``; a rung whose part is not configured (no LLM for HyDE,
    no chit-chat set) is left out, and the last resort always ends the ladder."""
    language = KnowledgeLanguage()
    made: dict[str, Callable[[], Step | None]] = {
        "choice": lambda: ChoiceStep(entries, responder, ladder.desk),
        "handoff": lambda: HandoffStep(ladder.desk) if ladder.desk is not None else None,
        "chitchat": lambda: ChitChatStep(ladder.chitchat) if ladder.chitchat is not None else None,
        "clarify": lambda: ClarifyStep(ladder.max_options),
        "answer": lambda: AnswerStep(responder),
        "confirm": lambda: ConfirmStep(ladder.max_options),
        "translate": lambda: (
            TranslateStep(translator, research, responder, entries, language) if translator is not None else None
        ),
        "rewrite": lambda: RewriteStep(research, responder) if rewrite else None,
        "hyde": lambda: HydeStep(hyde, research, responder) if hyde is not None else None,
        "last_resort": lambda: LastResortStep(responder, ladder.desk, entries, language, popular),
    }
    fallbacks = list(chain)[: list(chain).index("last_resort")] if "last_resort" in chain else list(chain)
    names = [*ladder.steps, *fallbacks, "last_resort"]  # steps listed after last_resort never run
    return [step for step in (made[name]() for name in names) if step is not None]
