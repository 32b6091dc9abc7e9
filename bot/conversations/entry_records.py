"""Every entry's record: how often it answered, how those answers went, what visitors said, and its trend.

Built from the same judged answers as the outcome tiles (bot/conversations/outcomes.py): an answer counts for every
entry it used. ``failures`` adds the answers that were not resolved because of the visitor's signal about this
answer (a thumbs down or "no", the same question again, a person asked for, "that did not help"); "Entries that
fail visitors most" ranks by it.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.conversations.outcomes import REASON_CODES, AnswerOutcome, TurnFacts, reason_code
from bot.conversations.tiles import Tile
from bot.knowledge.csv_io import neutralise

TREND_DAYS = 7
COLUMNS = (
    "entry",
    "question",
    "hits",
    "resolution_rate",
    "up",
    "down",
    *(f"down_{code}" for code in REASON_CODES),
    "reasked",
    "handoffs_after",
    "failures",
    "last_hit",
    "last_edit",
    "hits_last_7_days",
    "hits_previous_7_days",
    "trend",
)
# The page's table: the reasons in one column and times to the minute, so it fits a screen; exports keep COLUMNS.
PAGE_COLUMNS = (
    "entry",
    "question",
    "hits",
    "failures",
    "resolution_rate",
    "up",
    "down",
    "down_reasons",
    "reasked",
    "handoffs_after",
    "last_hit",
    "last_edit",
    "trend",
)
SORTS = {  # column -> key of the sort, largest first unless named otherwise
    "failures": lambda r: (r.failures, r.hits),
    "hits": lambda r: (r.hits, r.failures),
    "resolution_rate": lambda r: (-1.0 if r.resolution_rate is None else r.resolution_rate, r.hits),
    "down": lambda r: (r.down, r.hits),
    "reasked": lambda r: (r.reasked, r.hits),
    "handoffs_after": lambda r: (r.handoffs, r.hits),
    "trend": lambda r: (r.recent - r.earlier, r.hits),
    "last_edit": lambda r: (r.last_edit or "", r.hits),
}


@dataclass(frozen=True)
class EntryRecord:
    """One entry's record over a period."""

    id: str
    query: str
    hits: int = 0  # answers from the knowledge that used it
    resolved: int = 0
    up: int = 0
    down: int = 0
    reasons: Mapping[str, int] = field(default_factory=dict)  # thumbs-down reason code -> count
    reasked: int = 0
    handoffs: int = 0
    said_no: int = 0
    last_hit: str | None = None
    last_edit: str | None = None
    recent: int = 0  # hits in the last TREND_DAYS days
    earlier: int = 0  # hits in the TREND_DAYS before

    @property
    def resolution_rate(self) -> float | None:
        """Resolved answers / answers (None without answers)."""
        return round(self.resolved / self.hits, 4) if self.hits else None

    @property
    def failures(self) -> int:
        """Answers from it that the visitor signalled did not help."""
        return self.hits - self.resolved

    @property
    def trend(self) -> str:
        """The change of hits, last TREND_DAYS days against the ones before: "↑ 3", "↓ 2" or "→"."""
        change = self.recent - self.earlier
        return f"↑ {change}" if change > 0 else f"↓ {-change}" if change < 0 else "→"

    def row(self) -> tuple:
        """The record as a table row in :data:`COLUMNS` order."""
        return (
            self.id,
            self.query,
            self.hits,
            self.resolution_rate,
            self.up,
            self.down,
            *(self.reasons.get(code, 0) for code in REASON_CODES),
            self.reasked,
            self.handoffs,
            self.failures,
            self.last_hit,
            self.last_edit,
            self.recent,
            self.earlier,
            self.trend,
        )


def _minute(stamp: str | None) -> str | None:
    """An ISO time as "YYYY-MM-DD HH:MM" (None stays None)."""
    return stamp[:16].replace("T", " ") if stamp else None


def page_row(record: EntryRecord) -> tuple:
    """The record as a row of the page's table, in :data:`PAGE_COLUMNS` order."""
    reasons = " · ".join(f"{code} {record.reasons[code]}" for code in REASON_CODES if record.reasons.get(code))
    return (
        record.id,
        record.query,
        record.hits,
        record.failures,
        record.resolution_rate,
        record.up,
        record.down,
        reasons,
        record.reasked,
        record.handoffs,
        _minute(record.last_hit),
        _minute(record.last_edit),
        record.trend,
    )


def entry_records(
    turns: Sequence[TurnFacts],
    answers: Sequence[AnswerOutcome],
    entries: Iterable[tuple[str, str]],
    *,
    now: datetime,
    last_edits: Mapping[str, str] | None = None,
) -> list[EntryRecord]:
    """The record of each of ``entries`` ((id, question) of the loaded knowledge) over ``turns``.

    ``answers`` are the turns' judged answers; trends end at ``now``. Entries the log knows but the knowledge no
    longer has are left out.
    """
    count: dict[str, Counter] = {}
    reasons: dict[str, Counter] = {}
    last_hit: dict[str, str] = {}
    mid, start = now - timedelta(days=TREND_DAYS), now - timedelta(days=2 * TREND_DAYS)
    for a in answers:
        for e in a.turn.entries:
            c = count.setdefault(e, Counter())
            c["hits"] += 1
            c["resolved"] += a.resolved
            c["reasked"] += a.reasked
            c["handoffs"] += a.handoff_after
            c["said_no"] += a.said_no
            c["recent"] += a.turn.time >= mid
            c["earlier"] += start <= a.turn.time < mid
            stamp = a.turn.time.isoformat()
            last_hit[e] = max(last_hit.get(e, stamp), stamp)
    for t in turns:
        if t.rating is None:
            continue
        code = reason_code(t.reason, t.rating)
        for e in t.entries:
            c = count.setdefault(e, Counter())
            c["up" if t.rating == 1 else "down"] += 1
            if code is not None:
                reasons.setdefault(e, Counter())[code] += 1
    edits = last_edits or {}
    return [
        EntryRecord(
            id=i,
            query=q,
            hits=count.get(i, Counter())["hits"],
            resolved=count.get(i, Counter())["resolved"],
            up=count.get(i, Counter())["up"],
            down=count.get(i, Counter())["down"],
            reasons=dict(reasons.get(i, {})),
            reasked=count.get(i, Counter())["reasked"],
            handoffs=count.get(i, Counter())["handoffs"],
            said_no=count.get(i, Counter())["said_no"],
            last_hit=last_hit.get(i),
            last_edit=edits.get(i),
            recent=count.get(i, Counter())["recent"],
            earlier=count.get(i, Counter())["earlier"],
        )
        for i, q in entries
    ]


def sort_records(records: Iterable[EntryRecord], by: str = "failures", ascending: bool = False) -> list[EntryRecord]:
    """``records`` sorted by one of :data:`SORTS` (largest first unless ``ascending``), then by id."""
    if by not in SORTS:
        raise ValueError(f"unknown sort {by!r}; use one of: {', '.join(SORTS)}")
    key = SORTS[by]
    ordered = sorted(records, key=lambda r: r.id)
    return sorted(ordered, key=key, reverse=not ascending)


def records_tile(records: Sequence[EntryRecord]) -> Tile:
    """Every record as a tile (for CSV, XLSX and the CLI)."""
    return Tile("entry_records", "条目记录 / Every entry's record", COLUMNS, tuple(r.row() for r in records))


def failing_tile(records: Sequence[EntryRecord], top: int) -> Tile:
    """ "Entries that fail visitors most": the ``top`` records with the most failures (at least one)."""
    worst = [r for r in sort_records(records, "failures") if r.failures > 0][:top]
    return Tile(
        "failing_entries",
        "最让访客失望的条目 / Entries that fail visitors most",
        ("entry", "question", "hits", "failures", "resolution_rate", "down", "reasked", "handoffs_after"),
        tuple((r.id, r.query, r.hits, r.failures, r.resolution_rate, r.down, r.reasked, r.handoffs) for r in worst),
    )


def records_csv(records: Sequence[EntryRecord]) -> str:
    """The records as CSV text, header first (Excel reads it with a BOM: write it utf-8-sig)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    writer.writerows(
        [neutralise(v) if isinstance(v, str) else "" if v is None else v for v in r.row()] for r in records
    )
    return out.getvalue()


def records_xlsx(records: Sequence[EntryRecord]) -> bytes:
    """The records as an Excel workbook (one sheet, header first)."""
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell

    book = Workbook(write_only=True)
    sheet = book.create_sheet("entries")
    sheet.append(list(COLUMNS))
    for r in records:
        cells = []
        for value in r.row():
            cell = WriteOnlyCell(sheet, value)
            if isinstance(value, str):
                cell.data_type = "s"  # text stays text: "=..." is never a formula
            cells.append(cell)
        sheet.append(cells)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
