"""What front ends show besides a turn: the bot's status, every mode's hits for one query, example questions.

``status`` and ``example_questions`` only read: they never build or refresh an index, so a page can render them
at any time. ``retrieve_all_modes`` is an explicit request and may build the searchers it needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.chat.answer import Cutoffs
from bot.errors import BotError
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, ModeSearcher
from bot.search.healing import ServedSearcher
from bot.search.progress import Snapshot
from bot.texts import BUILDING_RESULTS, NOT_BUILT

if TYPE_CHECKING:
    from bot.chat.bot import Bot

EXAMPLES = 4  # example questions picked from the knowledge when none of the configured ones is in it


@dataclass(frozen=True)
class Status:
    """The bot as a page shows it before a turn: the mode a message would use, what is loaded, what is wrong."""

    mode: str
    configured: str
    modes: tuple[str, ...]
    entries: int
    llm: str | None
    built: bool
    notice: str | None
    knowledge_error: str | None
    building: tuple[Snapshot, ...] = ()  # index syncs running now: texts done / total, time left
    standing_in: bool = False  # the mode's own index is not serving yet: another mode answers meanwhile
    config_error: str | None = None  # why the last edit of the config file was not taken (the old mode serves)


@dataclass(frozen=True)
class ModeRetrieval:
    """One mode's retrieval for a query: all hits, those that pass, the thresholds, or the error text."""

    hits: list[Hit]
    passed: list[Hit]
    thresholds: Cutoffs | None
    error: str | None = None


def searcher_notices(searcher: ModeSearcher | None) -> list[str]:
    """Notices a built searcher carries (e.g. Elasticsearch down, the embedded engine serving instead)."""
    if searcher is None:
        return []
    found = [s.notice for s in [searcher, *searcher.leaves()]]
    return [n for n in dict.fromkeys(found) if n]


def status(bot: Bot, mode: str | None = None) -> Status:
    """The status for ``mode`` (None: the configured mode now) without building or refreshing anything."""
    configured = bot.current_mode()
    mode = mode or configured
    searcher = bot.index.built(mode)
    notices = searcher_notices(searcher) if searcher is not None else [NOT_BUILT.format(mode=mode)]
    error = bot.index.error
    return Status(
        mode=mode,
        configured=configured,
        modes=tuple(bot.index.modes),
        entries=len(bot.index.entries),
        llm=bot.llm_name,
        built=searcher is not None,
        notice=" ".join(notices) or None,
        knowledge_error=str(error) if error else None,
        building=tuple(bot.index.building()),
        standing_in=isinstance(searcher, ServedSearcher) and searcher.standing_in,
        config_error=getattr(bot.mode_source, "error", None),
    )


def retrieve_all_modes(bot: Bot, query: str, within: EntryFilter | None = None) -> dict[str, ModeRetrieval]:
    """Every mode's hits for ``query`` (among the entries ``within`` admits; no LLM); a mode that cannot run gets
    its error text instead."""
    bot.index.refresh()
    results: dict[str, ModeRetrieval] = {}
    for mode in bot.index.modes:
        try:
            served = bot.index.searcher(mode)
            if (
                isinstance(served, ServedSearcher) and served.standing_in
            ):  # a server's index still building: not this mode's hits
                results[mode] = ModeRetrieval([], [], None, BUILDING_RESULTS.format(mode=mode))
                continue
            hits, passed = bot.retrieve(query, mode, within=within, unpublished=True)
            results[mode] = ModeRetrieval(hits, passed, bot.mode_thresholds(mode))
        except BotError as exc:  # e.g. a mode whose optional package is missing: the message says the fix
            results[mode] = ModeRetrieval([], [], None, str(exc))
        except ImportError as exc:
            results[mode] = ModeRetrieval([], [], None, f"缺少软件包 / missing package: {exc}")
    return results


def _key(text: str) -> str:
    """A question compared loosely: case, spaces and trailing punctuation do not matter."""
    return re.sub(r"[\s?？!！。.]+", "", text.casefold())


# What a question reads like: a question mark, a Chinese question word, or an English question's first word. An
# entry titled like a heading ("中山大学的1925年历史") is no example of what to ask.
_QUESTION = re.compile(
    r"[?？]\s*$|吗|什么|怎么|怎样|如何|哪|几|多少|为什么|为何|是否|能否|可否|可以.{0,8}吗|有没有"
    r"|^\s*(how|what|when|where|why|who|which|can|could|do|does|did|is|are|should|may|will)\b",
    re.IGNORECASE,
)


def reads_as_question(text: str) -> bool:
    """True when ``text`` is worded as a question (see _QUESTION)."""
    return bool(_QUESTION.search(text or ""))


def example_of(entry: Entry) -> str | None:
    """The entry's first phrasing worded as a question (its query, else one of its ``questions``), or None."""
    return next((p for p in entry.phrasings if reads_as_question(p)), None)


def example_questions(
    entries: Sequence[Entry], configured: Sequence[str], limit: int = EXAMPLES, popular: Sequence[str] = ()
) -> list[str]:
    """The configured examples that are questions of loaded entries, then ``popular`` ones (most used entries'
    questions) up to ``limit``; when there are none, up to ``limit`` entries' phrasings worded as questions.

    Picked evenly across the knowledge in loading order, so a replaced knowledge base shows its own questions.
    """
    known = {_key(e.query) for e in entries}
    kept = [q for q in configured if _key(q) in known]
    kept += [q for q in popular if q not in kept][: max(0, limit - len(kept))]
    asked = [q for q in map(example_of, entries) if q]
    if kept or not asked:
        return kept
    step = len(asked) / min(limit, len(asked))
    picked = [asked[int(i * step)] for i in range(min(limit, len(asked)))]
    return list(dict.fromkeys(picked))
