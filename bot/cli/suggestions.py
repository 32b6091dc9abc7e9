"""``python -m bot knowledge suggestions``: phrasings suggested by traffic, to accept or reject (bot/conversations/suggestions.py)."""

from __future__ import annotations

import json
import sys


def add_suggestions_arguments(p) -> None:
    """Options of ``knowledge suggestions``."""
    p.add_argument("--json", action="store_true", help="print the suggestions as JSON")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--accept", type=int, metavar="N", help="add suggestion N (as listed) as a phrasing of its entry")
    what.add_argument("--reject", type=int, metavar="N", help="never suggest N (its question for its entry) again")


def run_suggestions(settings, args) -> int:
    """List the pending suggestions, or accept / reject one; 2 when the log is off or N is not listed."""
    from bot.conversations.suggestions import suggestions
    from bot.conversations.turn_log import turn_log_from_settings
    from bot.editing.editor import KnowledgeEditor
    from bot.factory import build_index, build_store

    log = turn_log_from_settings(settings, prune_on_open=False)
    if log is None:
        print("错误 / error: the conversation log is off (log.enabled in config.yaml)", file=sys.stderr)
        return 2
    index = build_index(settings)
    index.load()
    pending = suggestions(log, index.entries)
    chosen = args.accept if args.accept is not None else args.reject
    if chosen is None:
        if args.json:
            print(json.dumps([s.to_dict() for s in pending], ensure_ascii=False, indent=2))
            return 0
        for n, s in enumerate(pending, 1):
            print(f"{n}. {s.question}  →  {s.entry_id} ({s.entry_query})  ×{s.count}, via {', '.join(s.via)}")
        print(f"{len(pending)} suggestion(s); --accept N adds one as a phrasing, --reject N hides it for good")
        return 0
    if not 1 <= chosen <= len(pending):
        print(f"错误 / error: no suggestion {chosen} (there are {len(pending)})", file=sys.stderr)
        return 2
    s = pending[chosen - 1]
    if args.reject is not None:
        log.reject_suggestion(s.norm, s.entry_id)
        print(f"已拒绝 / Rejected: {s.question} → {s.entry_id}")
        return 0
    result = KnowledgeEditor(index, build_store(settings)).add_phrasing(s.entry_id, s.question)
    print(f"已采纳 / Accepted: {s.question} → {s.entry_id} ({result.done})")
    return 0
