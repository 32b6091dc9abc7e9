"""What front ends show besides a turn: the bot's status, every mode's hits for one query, example questions.

``status_of`` and ``example_questions`` only read: they never build or refresh an index, so a page can render them
at any time. ``retrieve_all_modes`` is an explicit request and may build the searchers it needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.chat.answer import Cutoffs
from bot.chat.turn_search import TurnSearch
from bot.errors import BotError
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.search.base import Hit, ModeSearcher
from bot.search.progress import Snapshot
from bot.search.serving import ServedSearcher
from bot.texts import BUILDING_RESULTS, NOT_BUILT

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
    rule_problems: tuple[str, ...] = ()  # the rules of rules.yaml left out, each with its file and line (admins)


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


def status_of(search: TurnSearch, llm: str | None, mode: str | None = None) -> Status:
    """The status for ``mode`` (None: the configured mode now) without building or refreshing anything."""
    configured = search.current_mode()
    mode = mode or configured
    index = search.index
    searcher = index.built(mode)
    notices = searcher_notices(searcher) if searcher is not None else [NOT_BUILT.format(mode=mode)]
    error = index.error
    return Status(
        mode=mode,
        configured=configured,
        modes=tuple(index.modes),
        entries=len(index.entries),
        llm=llm,
        built=searcher is not None,
        notice=" ".join(notices) or None,
        knowledge_error=str(error) if error else None,
        building=tuple(index.building()),
        standing_in=isinstance(searcher, ServedSearcher) and searcher.standing_in,
        config_error=search.current_mode.config_error,
        rule_problems=tuple(str(p) for p in index.rules.problems),
    )


def retrieve_all_modes(search: TurnSearch, query: str, within: EntryFilter | None = None) -> dict[str, ModeRetrieval]:
    """Every mode's hits for ``query`` without the LLM; a mode that cannot run gets its error text.

    Only entries ``within`` admits are searched.
    """
    index = search.index
    index.refresh()
    results: dict[str, ModeRetrieval] = {}
    for mode in index.modes:
        try:
            served = index.searcher(mode)
            if isinstance(served, ServedSearcher) and served.standing_in:
                # a server's index still building: not this mode's hits
                results[mode] = ModeRetrieval([], [], None, BUILDING_RESULTS.format(mode=mode))
                continue
            hits, passed = search.retrieve(query, mode, within=within, unpublished=True)
            results[mode] = ModeRetrieval(hits, passed, search.mode_thresholds(mode))
        except BotError as exc:  # e.g. a mode whose optional package is missing: the message says the fix
            results[mode] = ModeRetrieval([], [], None, str(exc))
        except ImportError as exc:
            results[mode] = ModeRetrieval([], [], None, f"缺少软件包 / missing package: {exc}")
    return results


def question_key(text: str) -> str:
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
    """Up to ``limit`` example questions: the configured ones in the knowledge, then ``popular`` ones.

    Without either, entries' phrasings worded as questions, picked evenly across the knowledge in loading order, so a
    replaced knowledge base shows its own questions.
    """
    known = {question_key(e.query) for e in entries}
    kept = [q for q in configured if question_key(q) in known]
    kept += [q for q in popular if q not in kept][: max(0, limit - len(kept))]
    asked = [q for q in map(example_of, entries) if q]
    if kept or not asked:
        return kept
    step = len(asked) / min(limit, len(asked))
    picked = [asked[int(i * step)] for i in range(min(limit, len(asked)))]
    return list(dict.fromkeys(picked))
