"""What a mode serves now: its own searcher, or a stand-in with a notice while its index builds or heals."""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.errors import ConfigError
from bot.knowledge.filters import EntryFilter
from bot.search.base import Composite, Found, Hit, ModeSearcher, Searcher
from bot.texts import HEALING_ALONE

log = logging.getLogger(__name__)


class ServedSearcher(Composite):
    """What a mode serves now: its own searcher, or a stand-in (another mode's searcher, or none) with a notice.

    Resolved once per request and never changed after: :meth:`find` reports each search's facts (the system whose
    thresholds apply, the notices, a failure) in a :class:`Found`. A search error is reported through ``on_error``
    (which schedules the healing) and answered with no hits.
    """

    def __init__(
        self,
        mode: str,
        target: ModeSearcher | None,
        notice: str | None = None,
        on_error: Callable[[ModeSearcher, BaseException], None] | None = None,
    ):
        self.mode, self.target, self.notice, self._on_error = mode, target, notice, on_error
        self.name = target.name if target is not None else "none"
        self.system = target.system if target is not None else "sparse"

    @property
    def standing_in(self) -> bool:
        """True when this is not the mode's own searcher (building, healing or missing)."""
        return self.notice is not None

    def notices(self) -> tuple[str, ...]:
        """The stand-in notice and those its indexes were built with (e.g. Elasticsearch down), once each."""
        built = [self.target, *self.leaves()] if self.target is not None else []
        found = [self.notice, *(s.notice for s in built)]
        return tuple(n for n in dict.fromkeys(found) if n)

    def find(self, query: str, top_k: int, within: EntryFilter | None = None) -> Found:
        """The target's hits and what answered them; no hits and ``failed`` (healing scheduled) when it raised."""
        if self.target is None:
            return Found((), self.system, self.name, self.notices())
        try:
            hits = self.target.search(query, top_k, within)
        except (KeyboardInterrupt, SystemExit, ConfigError):
            raise
        except BaseException as exc:
            if self._on_error is None:  # nothing heals it (scripts, the CLI): the caller sees the error
                raise
            log.error(
                "search failed in mode %s (%s): %s; healing the index in the background",
                self.mode,
                type(exc).__name__,
                exc,
            )
            self._on_error(self.target, exc)
            return Found((), self.system, self.name, (*self.notices(), HEALING_ALONE), failed=True)
        return Found(tuple(hits), self.system, self.name, self.notices())

    def search(self, query: str, top_k: int, within: EntryFilter | None = None) -> list[Hit]:
        """The hits of :meth:`find` (for callers that only rank, e.g. the linter)."""
        return list(self.find(query, top_k, within).hits)

    def leaves(self) -> list[Searcher]:
        """The target's leaves (their notices show too)."""
        return self.target.leaves() if self.target is not None else []

    def check(self) -> str | None:
        """The target's (no searcher: none can serve)."""
        return self.target.check() if self.target is not None else "no searcher"
