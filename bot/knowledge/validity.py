"""When an entry answers visitors: published (not a draft) and today within its ``valid_from`` .. ``valid_until``.

An entry file may mark an entry ``"draft": true`` (saved, searchable in the retrieval test and in replays, but never
an answer to a visitor) and give ``"valid_from"`` / ``"valid_until"`` as ISO dates (``2026-03-01``), both days
included, in ``knowledge.timezone``: outside that window the entry stops answering (this year's 报名时间) without
being deleted. The knowledge linter lists the entries that expire soon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

FIELDS = ("draft", "valid_from", "valid_until")


class Dated(Protocol):
    """What the availability rules read of an entry."""

    @property
    def draft(self) -> bool: ...

    @property
    def valid_from(self) -> str | None: ...

    @property
    def valid_until(self) -> str | None: ...


def parse_day(value: str) -> date:
    """An ISO date ``YYYY-MM-DD``; ValueError for anything else (a time, another format)."""
    if not isinstance(value, str) or len(value.strip()) != 10:
        raise ValueError(f"{value!r} is not an ISO date like 2026-03-01")
    return date.fromisoformat(value.strip())


def field_problems(raw: dict[str, Any]) -> list[str]:
    """What is wrong with the draft and validity fields of a raw entry (empty when they are fine or absent)."""
    problems = []
    if "draft" in raw and not isinstance(raw["draft"], bool):
        problems.append(f"'draft' must be true or false, got {type(raw['draft']).__name__}")
    days: dict[str, date] = {}
    for name in ("valid_from", "valid_until"):
        value = raw.get(name)
        if value is None:
            continue
        try:
            days[name] = parse_day(value)
        except (TypeError, ValueError):
            problems.append(f"{name!r} must be an ISO date like 2026-03-01, got {value!r}")
    if len(days) == 2 and days["valid_from"] > days["valid_until"]:
        problems.append(f"'valid_from' ({raw['valid_from']}) is after 'valid_until' ({raw['valid_until']})")
    return problems


def clean_day(value: Any) -> str | None:
    """A validated ISO date as stored (stripped); None for an absent or empty one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_day(value).isoformat()


def in_window(entry: Dated, day: date) -> bool:
    """True when ``day`` lies within the entry's validity (both ends included; an open end is no limit)."""
    if entry.valid_from is not None and day < parse_day(entry.valid_from):
        return False
    return entry.valid_until is None or day <= parse_day(entry.valid_until)


def answers_on(entry: Dated, day: date) -> bool:
    """True when the entry may answer a visitor on ``day``: published and within its validity."""
    return not entry.draft and in_window(entry, day)


def status_of(entry: Dated, day: date) -> str:
    """ "draft", "not yet" (before valid_from), "expired" (after valid_until) or "live"."""
    if entry.draft:
        return "draft"
    if entry.valid_from is not None and day < parse_day(entry.valid_from):
        return "not yet"
    if entry.valid_until is not None and day > parse_day(entry.valid_until):
        return "expired"
    return "live"


E = TypeVar("E", bound=Dated)


def expiring(entries: Iterable[E], day: date, days: int) -> list[E]:
    """Published entries still valid on ``day`` whose ``valid_until`` falls within the next ``days`` days."""
    last = day + timedelta(days=days)
    return [
        e
        for e in entries
        if not e.draft and e.valid_until is not None and in_window(e, day) and parse_day(e.valid_until) <= last
    ]


@dataclass(frozen=True)
class Publication:
    """An entry's draft flag and validity dates as an edit sets them (ISO dates or None: no limit)."""

    draft: bool = False
    valid_from: str | None = None
    valid_until: str | None = None

    @classmethod
    def of(cls, raw: Any) -> Publication:
        """The publication fields of a raw stored entry (absent ones: published, no limits)."""
        raw = raw if isinstance(raw, dict) else {}
        return cls(bool(raw.get("draft", False)), raw.get("valid_from"), raw.get("valid_until"))

    def problems(self) -> list[str]:
        """What is wrong with the dates (empty when they are fine)."""
        return field_problems({k: v for k, v in self.stored().items() if k != "draft"})

    def stored(self) -> dict[str, Any]:
        """The fields as a file stores them: only those that are set (stripped dates)."""
        values: dict[str, Any] = {
            "draft": True if self.draft else None,
            "valid_from": (self.valid_from or "").strip() or None,
            "valid_until": (self.valid_until or "").strip() or None,
        }
        return {k: v for k, v in values.items() if v is not None}

    def apply(self, raw: dict[str, Any]) -> None:
        """Set these fields on a raw entry, removing the ones that are not set."""
        for name in FIELDS:
            raw.pop(name, None)
        raw.update(self.stored())


@dataclass(frozen=True)
class Availability:
    """Which entries answer visitors today, in the knowledge's time zone (``clock``: now, for tests)."""

    timezone: str = "Asia/Shanghai"
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def today(self) -> date:
        """Today's date in the knowledge's time zone."""
        return self.clock().astimezone(ZoneInfo(self.timezone)).date()

    def answers(self, entry: Dated) -> bool:
        """True when ``entry`` may answer a visitor now."""
        return answers_on(entry, self.today())

    def keep(self, hits: Sequence[Any]) -> list[Any]:
        """The hits (anything with an ``entry``) whose entries may answer now, in their order."""
        day = self.today()
        return [h for h in hits if answers_on(h.entry, day)]
