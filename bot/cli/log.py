"""``python -m bot log purge|mask|stats``: the conversation log's retention, privacy and analytics, from the CLI."""

from __future__ import annotations

import argparse
import json
import sys

from bot.conversations.analytics import analytics_from_settings
from bot.conversations.log_store import ConversationLog, TurnLogError
from bot.conversations.tiles import Stats, StatsFilter, Tile, parse_time
from bot.conversations.topics import topic_finder_from_settings, with_topics
from bot.conversations.turn_log import turn_log_from_settings
from bot.errors import KnowledgeError
from bot.handoff.hours import utc_now
from bot.handoff.stats import with_handoffs
from bot.handoff.store import TicketStore


def add_log_arguments(parser: argparse.ArgumentParser, common: list[argparse.ArgumentParser]) -> None:
    """The ``log`` sub-commands; ``common`` are the global-option parents (--config, --mode, -v)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser(
        "purge",
        parents=common,
        help="delete turns past log.retention_days / log.retention_rows now (runs on its own too)",
    )
    sub.add_parser(
        "mask",
        parents=common,
        help="mask personal data in turns stored before privacy.mask was on (or with other kinds)",
    )
    stats = sub.add_parser(
        "stats",
        parents=common,
        help="every analytics tile as text tables (or --json); --mode filters by retrieval mode",
    )
    stats.add_argument("--json", action="store_true", help="machine-readable: tile name -> title, columns, rows")
    stats.add_argument("--since", help="only turns at or after this ISO date/time (UTC unless it says otherwise)")
    stats.add_argument("--until", help="only turns before this ISO date/time")
    stats.add_argument(
        "--source", choices=["web", "api", "widget", "wecom", "feishu", "cli"], help="only turns from this front end"
    )


def render_tile(tile: Tile) -> str:
    """A tile as a plain-text table: its title, then aligned columns."""
    cells = [list(tile.columns), *[["" if v is None else str(v) for v in row] for row in tile.rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(tile.columns))]
    if tile.total is not None:
        cells.append(["" if v is None else str(v) for v in tile.total])
        widths = [max(len(r[i]) for r in cells) for i in range(len(tile.columns))]
    lines = [tile.title, *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)]
    if not tile.rows:
        lines.append("(none)")
    if tile.note:
        lines.append(tile.note)
    return "\n".join(lines)


def _stats(settings, turn_log: ConversationLog, args: argparse.Namespace) -> int:
    try:
        flt = StatsFilter(parse_time(args.since), parse_time(args.until), args.mode, args.source)
    except ValueError as exc:
        print(f"错误 / error: --since/--until must be ISO dates or times: {exc}", file=sys.stderr)
        return 2
    try:  # the loaded knowledge's ids, for the entries never hit
        from bot.knowledge.entries import load_entries

        titles = {e.id: e.query for e in load_entries(settings.resolve(settings.knowledge.path))}
    except (KnowledgeError, OSError) as exc:
        print(f"warning: cannot read the knowledge ({exc}); entries never hit left empty", file=sys.stderr)
        titles = {}
    stats: Stats = analytics_from_settings(turn_log, settings).compute(flt, list(titles), titles=titles)
    stats = with_topics(stats, topic_finder_from_settings(settings), turn_log, settings.log.analytics_top)
    store = TicketStore(turn_log, clock=utc_now) if settings.handoff.enabled else None
    stats = with_handoffs(stats, store, turn_log)
    if args.json:
        print(json.dumps(stats.to_dict(), ensure_ascii=False, indent=2))
    else:
        print("\n\n".join(render_tile(t) for t in stats.tiles))
    return 0


def run_log(settings, args: argparse.Namespace) -> int:
    """Run one ``log`` action; exit 2 when the log is off or cannot be opened."""
    try:
        turn_log = turn_log_from_settings(settings, prune_on_open=False)  # the purge below reports it
    except TurnLogError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2
    if turn_log is None:
        print("错误 / error: the conversation log is off (log.enabled: false in the config)", file=sys.stderr)
        return 2
    try:
        if args.action == "stats":
            return _stats(settings, turn_log, args)
        if args.action == "purge":
            removed = turn_log.prune()
            print(
                f"removed {removed} turns; kept {turn_log.count()} "
                f"(retention: {turn_log.retention_days or 'no'} days, {turn_log.retention_rows or 'no'} rows limit)"
            )
        else:
            if not turn_log.masking:
                print("错误 / error: privacy.mask is false in the config; nothing to mask with", file=sys.stderr)
                return 2
            print(f"masked personal data in {turn_log.mask_stored()} turns")
    finally:
        turn_log.close()
    return 0
