"""kbbot: a knowledge-base chatbot that answers from retrieved entries and falls back (HyDE, last resort).

The public API, for programs that ask the bot in process (an avatar, a script)::

    from bot import build_bot, load_settings
    bot = build_bot(load_settings("config.yaml"))
    answer = bot.answer("怎么添加知识？")
    print(answer.text, [hit.entry.id for hit in answer.hits])

Layers, lowest first: ``config`` → ``storage`` → ``serving`` → ``knowledge`` → ``search`` → ``conversations`` →
``handoff`` → ``chat`` (the turn) → ``editing`` → ``factory`` / ``knowledge_base`` → front ends ``ui``, ``api`` →
``server`` → ``cli`` (docs/development.md "Layout"). Lower layers never import higher ones, nor front ends
(tests/test_architecture.py). Names are imported lazily so ``import bot.errors`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Answer": "bot.chat.answer",
    "Strategy": "bot.chat.answer",
    "Cutoffs": "bot.chat.answer",
    "Bot": "bot.chat.bot",
    "Hit": "bot.search.base",
    "Entry": "bot.knowledge.entries",
    "Settings": "bot.config.settings",
    "load_settings": "bot.config.settings",
    "build_bot": "bot.factory",
    "build_store": "bot.factory",
    "build_knowledge_base": "bot.factory",
    "KnowledgeBase": "bot.knowledge_base",
    "BotError": "bot.errors",
    "ConfigError": "bot.errors",
    "KnowledgeError": "bot.errors",
    "LLMError": "bot.errors",
    "SearchBackendError": "bot.errors",
}
__all__ = [
    "Answer",
    "Bot",
    "BotError",
    "ConfigError",
    "Cutoffs",
    "Entry",
    "Hit",
    "KnowledgeBase",
    "KnowledgeError",
    "LLMError",
    "SearchBackendError",
    "Settings",
    "Strategy",
    "build_bot",
    "build_knowledge_base",
    "build_store",
    "load_settings",
]

if TYPE_CHECKING:
    from bot.chat.answer import Answer, Cutoffs, Strategy
    from bot.chat.bot import Bot
    from bot.config.settings import Settings, load_settings
    from bot.errors import BotError, ConfigError, KnowledgeError, LLMError, SearchBackendError
    from bot.factory import build_bot, build_knowledge_base, build_store
    from bot.knowledge.entries import Entry
    from bot.knowledge_base import KnowledgeBase
    from bot.search.base import Hit


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bot' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
