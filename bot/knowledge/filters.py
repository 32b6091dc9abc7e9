"""Restricting a search to some entries: the categories an entry lists (``"categories"`` in its file).

A filter is applied inside every searcher, on the engine's ranking and before any rank-based relevance
(bot/search/base.py ``top_within``): the hits are the unfiltered ranking's admitted entries, in its order, with the
whole knowledge's word statistics (as an Elasticsearch filter context keeps them), and no hit outside the filter is
ever returned. The thresholds apply unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.errors import BotError
from bot.knowledge.entries import Entry, parse_keywords

MAX_CATEGORIES = 50  # a filter naming more is a mistake or an attack, never a real selection


class FilterError(BotError, ValueError):
    """A filter that cannot be applied (wrong shape, too many categories); the message says what to send."""


@dataclass(frozen=True)
class EntryFilter:
    """Admits the entries that list at least one of ``categories``."""

    categories: frozenset[str]

    def admits(self, entry: Entry) -> bool:
        """True when ``entry`` lists one of the filter's categories."""
        return not self.categories.isdisjoint(entry.categories)

    def to_dict(self) -> dict[str, list[str]]:
        """The JSON form the API, the CLI and ``Answer.to_dict`` report (and the API accepts)."""
        return {"categories": sorted(self.categories)}

    def describe(self) -> str:
        """The categories, sorted and comma-separated (for logs, notices and the sources panel)."""
        return ", ".join(sorted(self.categories))


def entry_filter(categories: Iterable[str] | str | None) -> EntryFilter | None:
    """A filter on ``categories`` (a list, or a comma-separated string); None when there are none (no filter)."""
    if categories is None:
        return None
    if isinstance(categories, str):
        names = parse_keywords(categories)
    else:
        values = list(categories)
        if not all(isinstance(c, str) for c in values):
            raise FilterError('filter categories must be strings, e.g. {"categories": ["招生"]}')
        names = parse_keywords(values)
    if len(names) > MAX_CATEGORIES:
        raise FilterError(f"a filter may name at most {MAX_CATEGORIES} categories, got {len(names)}")
    return EntryFilter(frozenset(names)) if names else None


def parse_filter(value: object) -> EntryFilter | None:
    """The filter of an API request's ``filter`` field: ``{"categories": [...]}``, a list, or a string."""
    if value is None or isinstance(value, (str, list)):
        return entry_filter(value)  # type: ignore[arg-type]
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"categories"})
        if unknown:
            raise FilterError(f'unknown filter field(s) {unknown}; use {{"categories": ["..."]}}')
        return entry_filter(value.get("categories"))
    raise FilterError(f'filter must be {{"categories": ["..."]}}, got {type(value).__name__}')


def categories_of(entries: Iterable[Entry]) -> list[str]:
    """Every category the entries list, sorted (what a category selector offers)."""
    return sorted({c for e in entries for c in e.categories})
