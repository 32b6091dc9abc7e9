"""The hand-off's analytics tiles, beside the conversation log's (whose ``handoff_rate`` is the share of
conversations handed off, per day): tickets per conversation with their reasons, the time to a person's first
reply, and tickets per day, for the same filter (time range in UTC; a ticket counts by when it opened; the mode and
front-end filters apply to the turns and, for the front end, to the tickets' channel)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from bot.conversations.log_store import ConversationLog, utc_iso
from bot.conversations.tiles import Stats, StatsFilter, Tile
from bot.handoff.store import TicketStore
from bot.handoff.tickets import Reason, Status, Ticket


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return round(ordered[int(rank) - 1], 1)


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def handoff_tiles(store: TicketStore, turns: ConversationLog, flt: StatsFilter) -> tuple[Tile, ...]:
    """The three hand-off tiles for ``flt``."""
    since = utc_iso(flt.since) if flt.since else None
    until = utc_iso(flt.until) if flt.until else None
    tickets: list[Ticket] = [
        t for t in store.created_between(since, until) if flt.source is None or t.channel == flt.source
    ]
    where, args = flt.where()
    total, chats = turns.query(f"SELECT COUNT(*), COUNT(DISTINCT session) FROM turns WHERE {where}", args)[0]
    reasons = Counter(t.reason for t in tickets)
    rate = Tile(
        "handoff_tickets",
        "转人工工单（每个对话）/ Hand-off tickets (per conversation)",
        ("turns", "conversations", "tickets", "rate", "asked", "offer_accepted"),
        (
            (
                int(total),
                int(chats),
                len(tickets),
                round(len(tickets) / int(chats), 4) if chats else 0.0,
                reasons[Reason.ASKED],
                reasons[Reason.OFFER_ACCEPTED] + reasons[Reason.MISSES],
            ),
        ),
    )
    waits = [_seconds(t.created, t.first_reply_at) for t in tickets if t.first_reply_at]
    first = Tile(
        "handoff_first_reply",
        "人工首次回复用时（秒）/ Time to a person's first reply (s)",
        ("tickets", "replied", "p50_s", "p95_s", "never_replied"),
        ((len(tickets), len(waits), _percentile(waits, 50), _percentile(waits, 95), len(tickets) - len(waits)),),
    )
    days: dict[str, Counter] = {}
    for t in tickets:
        day = days.setdefault(t.created[:10], Counter())
        day["tickets"] += 1
        day[t.status.value] += 1
    per_day = Tile(
        "handoff_per_day",
        "每日转人工工单 / Hand-off tickets per day (UTC)",
        ("day", "tickets", "resolved", "expired", "waiting"),
        tuple(
            (
                d,
                c["tickets"],
                c[Status.RESOLVED.value],
                c[Status.EXPIRED.value],
                c[Status.OPEN.value] + c[Status.CLAIMED.value],
            )
            for d, c in sorted(days.items())
        ),
    )
    return rate, first, per_day


def with_handoffs(stats: Stats, store: TicketStore | None, turns: ConversationLog) -> Stats:
    """``stats`` with the hand-off tiles after its own (unchanged without tickets)."""
    if store is None:
        return stats
    return Stats(filter=stats.filter, tiles=stats.tiles + handoff_tiles(store, turns, stats.filter))
