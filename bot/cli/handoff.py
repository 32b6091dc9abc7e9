"""``python -m bot handoff list|hash-password``: the hand-off's tickets, and the password hashes of agents."""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from bot.conversations.log_store import TurnLogError
from bot.conversations.turn_log import turn_log_from_settings
from bot.handoff.hours import utc_now
from bot.handoff.passwords import hash_password
from bot.handoff.store import TicketStore
from bot.handoff.tickets import Status


def add_handoff_arguments(parser: argparse.ArgumentParser, common: list[argparse.ArgumentParser]) -> None:
    """The ``handoff`` sub-commands; ``common`` are the global-option parents (--config, --mode, -v)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sub.add_parser("list", parents=common, help="the tickets, the longest waiting first (or --json)")
    listing.add_argument("--status", choices=[s.value for s in Status], help="only tickets in this status")
    listing.add_argument("--json", action="store_true", help="machine-readable: one object per ticket")
    sub.add_parser(
        "hash-password",
        parents=common,
        help="read a password (twice, not echoed; or one line on stdin) and print its hash for handoff.agents",
    )


def run_handoff(settings, args: argparse.Namespace) -> int:
    """Run one ``handoff`` action; exit 2 when the log (where tickets live) is off or cannot be opened."""
    if args.action == "hash-password":
        return _hash_password()
    try:
        turn_log = turn_log_from_settings(settings, prune_on_open=False)
    except TurnLogError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2
    if turn_log is None:
        print("错误 / error: tickets live in the conversation log, which is off (log.enabled: false)", file=sys.stderr)
        return 2
    try:
        store = TicketStore(turn_log, clock=utc_now)
        status = Status(args.status) if args.status else None
        tickets = store.tickets(status) if status else [*store.tickets(Status.OPEN), *store.tickets(Status.CLAIMED)]
        if status is None:  # then the closed ones, newest first
            tickets += [t for s in (Status.RESOLVED, Status.EXPIRED) for t in store.tickets(s)]
        if args.json:
            print(json.dumps([t.to_dict() for t in tickets], ensure_ascii=False, indent=2))
            return 0
        if not tickets:
            print("没有工单 / no tickets")
        for t in tickets:
            who = f" · {t.agent}" if t.agent else ""
            print(
                f"#{t.id}  {t.status.value:<8} {t.created[:16].replace('T', ' ')}  {t.reason.value}{who}  {t.question}"
            )
    except TurnLogError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 1
    finally:
        turn_log.close()
    return 0


def _hash_password() -> int:
    if sys.stdin.isatty():
        password = getpass.getpass("密码 / Password: ")
        if getpass.getpass("再输一次 / Again: ") != password:
            print("错误 / error: the two passwords differ", file=sys.stderr)
            return 2
    else:
        password = sys.stdin.readline().rstrip("\n")
    if len(password) < 8:
        print("错误 / error: use at least 8 characters", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0
