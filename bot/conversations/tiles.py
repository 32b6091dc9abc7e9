"""What the analytics page shows, as data: the filter, a tile (title, columns, rows) and every tile of one filter."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.conversations.log_store import utc_iso


@dataclass(frozen=True)
class StatsFilter:
    """Which turns the tiles count: ``since`` <= time < ``until`` (UTC), one mode, one front end (web, api, cli)."""

    since: datetime | None = None
    until: datetime | None = None
    mode: str | None = None
    source: str | None = None

    def where(self, alias: str = "") -> tuple[str, list[Any]]:
        """An SQL condition (``1 = 1`` for no filter) and its arguments."""
        parts, args = [], []
        for column, op, value in (
            ("time", ">=", self.since),
            ("time", "<", self.until),
            ("mode", "=", self.mode),
            ("source", "=", self.source),
        ):
            if value is not None:
                parts.append(f"{alias}{column} {op} ?")
                args.append(utc_iso(value) if isinstance(value, datetime) else value)
        return " AND ".join(parts) or "1 = 1", args

    def turn_filters(self) -> dict[str, Any]:
        """The same filter as ConversationLog.recent / unanswered take it."""
        return {"since": self.since, "until": self.until, "mode": self.mode, "source": self.source}


@dataclass(frozen=True)
class Tile:
    """One tile of the page: a title and a table (its chart, CSV and CLI text are drawn from the same rows).

    ``total`` is the whole period's row of a tile whose rows are days; ``note`` says why a tile is empty or what it
    left out (too few questions for topics, questions skipped).
    """

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total: tuple[Any, ...] | None = None
    note: str | None = None

    def csv(self) -> str:
        """The tile as CSV text, header first."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        if self.total is not None:
            writer.writerow(self.total)
        return out.getvalue()

    def to_dict(self) -> dict:
        """JSON-ready form (``total`` and ``note`` only when set)."""
        d: dict[str, Any] = {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows]}
        if self.total is not None:
            d["total"] = list(self.total)
        if self.note is not None:
            d["note"] = self.note
        return d


@dataclass(frozen=True)
class Stats:
    """Every tile for one filter, in page order."""

    filter: StatsFilter
    tiles: tuple[Tile, ...] = field(default=())

    def tile(self, name: str) -> Tile:
        """The tile called ``name``; KeyError if there is none."""
        for t in self.tiles:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict:
        """JSON-ready form: tile name -> tile."""
        return {t.name: t.to_dict() for t in self.tiles}


def parse_time(text: str | None) -> datetime | None:
    """An ISO date or time (naive = UTC) as an aware datetime; None for empty; ValueError for anything else."""
    if not text or not text.strip():
        return None
    moment = datetime.fromisoformat(text.strip())
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
