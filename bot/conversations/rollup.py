"""Running totals of the conversation log per hour and per day, kept in the same transaction as each turn.

The analytics page sums these few thousand rows instead of scanning a million turns: ``hourly`` counts turns and
thumbs per (hour, source, mode, strategy), ``daily_relevance`` the top hit's relevance bin per day, ``daily_hits``
the turns whose answer used an entry (not split by source and mode: with thousands of entries that would be as
big as the log; a filtered page reads the ``used`` table's indexes instead). Missing source or mode is stored as '' so the upserts' keys match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.conversations.log_store import Dialect

BINS = 20  # relevance histogram: 0.05 wide
SCHEMA = """
CREATE TABLE IF NOT EXISTS hourly (
    hour TEXT NOT NULL, source TEXT NOT NULL, mode TEXT NOT NULL, strategy TEXT NOT NULL,
    turns INTEGER NOT NULL, up INTEGER NOT NULL, down INTEGER NOT NULL,
    PRIMARY KEY (hour, source, mode, strategy)){without_rowid};
CREATE TABLE IF NOT EXISTS daily_relevance (
    day TEXT NOT NULL, source TEXT NOT NULL, mode TEXT NOT NULL, bin INTEGER NOT NULL, turns INTEGER NOT NULL,
    PRIMARY KEY (day, source, mode, bin)){without_rowid};
CREATE TABLE IF NOT EXISTS daily_hits (
    day TEXT NOT NULL, entry_id TEXT NOT NULL, hits INTEGER NOT NULL, PRIMARY KEY (day, entry_id)){without_rowid};
"""  # {without_rowid}: SQLite's clustered form; PostgreSQL has no such clause
# The turns column whose values are the decisions the page counts (any values, never a fixed list). Only here: when
# the decision ladder stores its own column, this name changes and the rollup is rebuilt by a migration.
DECISION = "strategy"
UP, DOWN = "CASE WHEN rating = 1 THEN 1 ELSE 0 END", "CASE WHEN rating = -1 THEN 1 ELSE 0 END"  # counts by SUM


def bin_sql(dialect: Dialect) -> str:
    """The histogram bin of ``top_relevance`` in SQL (NULL for no hit), rounding down as :func:`relevance_bin`."""
    low = dialect.floor.format(x=f"top_relevance * {BINS}")
    return f"CASE WHEN top_relevance >= 1 THEN {BINS - 1} WHEN top_relevance <= 0 THEN 0 ELSE {low} END"


def relevance_bin(relevance: float | None) -> int | None:
    """The histogram bin of a relevance (None: no hit)."""
    return None if relevance is None else min(max(int(relevance * BINS), 0), BINS - 1)


def add_turn(c: Any, row: dict, entries: list[str], dialect: Dialect) -> None:
    """Count one new turn (``row`` as stored in turns) and the entries its answer used."""
    source, mode = row["source"] or "", row["mode"] or ""
    c.execute(
        "INSERT INTO hourly VALUES (?, ?, ?, ?, 1, 0, 0) "
        "ON CONFLICT (hour, source, mode, strategy) DO UPDATE SET turns = hourly.turns + 1",
        (row["time"][:13], source, mode, row[DECISION]),
    )
    b = relevance_bin(row["top_relevance"])
    if b is not None:
        c.execute(
            "INSERT INTO daily_relevance VALUES (?, ?, ?, ?, 1) "
            "ON CONFLICT (day, source, mode, bin) DO UPDATE SET turns = daily_relevance.turns + 1",
            (row["time"][:10], source, mode, b),
        )
    c.executemany(
        "INSERT INTO daily_hits VALUES (?, ?, 1) ON CONFLICT (day, entry_id) DO UPDATE SET hits = daily_hits.hits + 1",
        [(row["time"][:10], e) for e in entries],
    )


TURN_SQL = f"SELECT time, source, mode, {DECISION} AS decision, rating FROM turns WHERE id = ?"


def rate(c: Any, turn: Any, rating: int) -> None:
    """Move a turn's thumbs from its old ``turn["rating"]`` to ``rating`` (``turn``: a row of :data:`TURN_SQL`)."""
    up = (rating == 1) - (turn["rating"] == 1)
    down = (rating == -1) - (turn["rating"] == -1)
    c.execute(
        "UPDATE hourly SET up = up + ?, down = down + ? WHERE hour = ? AND source = ? AND mode = ? AND strategy = ?",
        (up, down, turn["time"][:13], turn["source"] or "", turn["mode"] or "", turn["decision"]),
    )


def rebuild(c: Any, dialect: Dialect, day: str = "", end: str = "~") -> None:
    """Recount the days from ``day`` up to ``end`` from the turns ('' and '~': all): after a purge, migration or load.

    ``end`` compares as text ('~' sorts after every digit and 'T'), so ``day + '~'`` ends with that day.
    """
    hour = day
    c.execute("DELETE FROM hourly WHERE hour >= ? AND hour < ?", (hour, end))
    c.execute(
        f"INSERT INTO hourly SELECT substr(time, 1, 13), coalesce(source, ''), coalesce(mode, ''), {DECISION}, COUNT(*), "
        f"SUM({UP}), SUM({DOWN}) FROM turns WHERE time >= ? AND time < ? GROUP BY 1, 2, 3, 4",
        (hour, end),
    )
    c.execute("DELETE FROM daily_relevance WHERE day >= ? AND day < ?", (day, end))
    c.execute(
        f"INSERT INTO daily_relevance SELECT substr(time, 1, 10), coalesce(source, ''), coalesce(mode, ''), "
        f"{bin_sql(dialect)}, "
        "COUNT(*) FROM turns WHERE time >= ? AND time < ? AND top_relevance IS NOT NULL GROUP BY 1, 2, 3, 4",
        (day, end),
    )
    c.execute("DELETE FROM daily_hits WHERE day >= ? AND day < ?", (day, end))
    c.execute(
        "INSERT INTO daily_hits SELECT substr(time, 1, 10), entry_id, COUNT(*) FROM used "
        "WHERE time >= ? AND time < ? GROUP BY 1, 2",
        (day, end),
    )


def trim(c: Any, dialect: Dialect) -> None:
    """After turns were deleted from the oldest end: drop totals before the oldest turn left, recount its day."""
    oldest = c.execute("SELECT MIN(time) FROM turns").fetchone()[0]
    if oldest is None:
        for table in ("hourly", "daily_relevance", "daily_hits"):
            c.execute(f"DELETE FROM {table}")
        return
    c.execute("DELETE FROM hourly WHERE hour < ?", (oldest[:13],))
    c.execute("DELETE FROM daily_relevance WHERE day < ?", (oldest[:10],))
    c.execute("DELETE FROM daily_hits WHERE day < ?", (oldest[:10],))
    rebuild(c, dialect, oldest[:10], oldest[:10] + "~")
