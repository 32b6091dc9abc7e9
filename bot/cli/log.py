"""``python -m bot log purge|mask``: the conversation log's retention and privacy, from the command line."""

from __future__ import annotations

import argparse
import sys

from bot.chat.turn_log import TurnLogError, turn_log_from_settings


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
