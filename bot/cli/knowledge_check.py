"""``python -m bot knowledge lint`` and ``python -m bot eval --self-check``: the linter over the product's own index.

Exit status: 0 when nothing is flagged, 1 when something is (so a deployer can run it in CI), 2 on bad input.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

from bot.config.settings import MODES, Settings
from bot.config.variants import with_mode
from bot.errors import ConfigError
from bot.evaluation.knowledge_check import KINDS, Collision, LintReport, alias_notes, lint, self_collisions
from bot.knowledge.assets import AssetStore
from bot.knowledge.validity import Availability

DEFAULT_MODE = "sparse"  # the cheapest searcher: seconds on thousands of entries; --mode picks another


def add_lint_arguments(p) -> None:
    """Options of ``knowledge lint`` (``--mode`` and ``--config`` come from the global options)."""
    p.add_argument("--knowledge", help="a knowledge folder or one .json file (default: knowledge.path)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument(
        "--probes",
        metavar="FILE",
        help="questions to probe magnets with, one a line (default: the conversation log's, else a sample of phrasings)",
    )


def _index(settings: Settings, knowledge: str | None, mode: str):
    """The index of ``knowledge`` (the configured folder: the user's own state) with ``mode`` synced."""
    from bot.cli.measure import eval_settings
    from bot.factory import build_index

    s = with_mode(eval_settings(settings, knowledge, no_split=True), mode)
    index = build_index(s)
    index.load()
    index.sync(mode)
    return s, index


def _log_questions(settings: Settings, knowledge: str | None, limit: int) -> list[str]:
    """The newest questions of the conversation log, when it exists and belongs to the knowledge linted."""
    from bot.conversations.turn_log import TurnLogError, turn_log_from_settings

    own = settings.resolve(settings.knowledge.path).resolve()
    if knowledge and Path(knowledge).resolve() != own:
        return []
    if not settings.log.enabled:
        return []
    path = Path(settings.log.path).expanduser()
    path = path if path.is_absolute() else settings.resolve(settings.state_dir) / path
    if settings.log.backend == "sqlite" and not path.is_file():
        return []  # opening would create an empty log
    try:
        log = turn_log_from_settings(settings, prune_on_open=False)
        if log is None:
            return []
        try:
            return [t["question"] for t in log.recent(limit=limit) if t.get("question")]
        finally:
            log.close()
    except TurnLogError as exc:  # the lint still runs on the knowledge alone
        print(f"warning: cannot read the conversation log ({exc}); its questions are left out", file=sys.stderr)
        return []


def run_lint(settings: Settings, args) -> int:
    """The ``knowledge lint`` command."""
    mode = args.mode or DEFAULT_MODE
    s, index = _index(settings, args.knowledge, mode)
    searcher = index.searcher(mode)
    if args.probes:
        try:
            text = Path(args.probes).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the probe questions {args.probes}: {exc}") from None
        questions = [line.strip() for line in text.splitlines() if line.strip()]
    else:
        questions = _log_questions(settings, args.knowledge, s.knowledge.lint.probe_sample)
    notes = alias_notes(index.aliases())
    tokenize = index.tokenizer.tokenize
    today = Availability(s.knowledge.timezone).today()
    assets = AssetStore(s.resolve(s.knowledge.path), s.knowledge.assets.max_bytes)
    report = lint(
        index.entries, searcher.search, tokenize, s.knowledge.lint, questions, notes, index.rules, today, assets.exists
    )
    if args.json:
        print(json.dumps(dict(report.to_dict(), mode=mode), ensure_ascii=False, indent=2))
    else:
        where = s.knowledge.synonyms or "the synonym file (knowledge.synonyms)"
        print(_table(report, mode, where))
    return 1 if report.findings else 0


def _table(report: LintReport, mode: str, synonym_file: str) -> str:
    lines = [f"[{f.kind}] {' ↔ '.join(f.entry_ids) + ': ' if f.entry_ids else ''}{f.detail}" for f in report.findings]
    if report.aliases:
        lines.append(
            f"aliases the knowledge defines, searched like synonyms ({len(report.aliases)}; a wrong one is dropped by "
            f"a line !<alias> in {synonym_file}):"
        )
        lines += [
            f"  {n.alias.alias} = {n.alias.name} · {n.alias.entry} ({n.alias.how}: {n.alias.evidence})"
            + (" · dropped" if n.dropped else "")
            for n in report.aliases
        ]
    counts = Counter(f.kind for f in report.findings)
    summary = ", ".join(f"{k} {counts[k]}" for k in KINDS if counts[k]) or "nothing flagged"
    lines.append(
        f"{report.entries} entries · mode {mode} · magnets probed with {report.probes} {report.probe_source} "
        f"questions · {report.seconds:.2f}s · {summary}"
        + (f" · {len(report.aliases)} aliases" if report.aliases else "")
    )
    return "\n".join(lines)


def run_self_check(settings: Settings, args) -> int:
    """``eval --self-check``: every stored question and phrasing must retrieve its own entry first."""
    modes = [m.strip() for m in (args.modes or args.mode or settings.mode).split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ConfigError(f"未知模式 / unknown mode(s): {', '.join(bad)}; choose from {', '.join(MODES)}")
    results: dict[str, list[Collision]] = {}
    phrasings = 0
    for mode in modes:
        _, index = _index(settings, args.knowledge, mode)
        phrasings = sum(len(dict.fromkeys(p for p in e.phrasings if p.strip())) for e in index.entries)
        results[mode] = self_collisions(index.entries, index.searcher(mode).search)
    if getattr(args, "json", False):
        doc = {
            m: {"phrasings": phrasings, "collisions": [dataclasses.asdict(c) for c in cs]} for m, cs in results.items()
        }
        print(json.dumps(doc, ensure_ascii=False, indent=2))
    else:
        for mode, collisions in results.items():
            for c in collisions:
                print(f"{mode}: {c.entry_id} {c.phrasing!r} → {c.winner_id} (own rank {c.rank or '>10'})")
            ok = phrasings - len(collisions)
            print(f"{mode}: {ok}/{phrasings} phrasings retrieve their own entry first; {len(collisions)} collide")
    return 1 if any(results.values()) else 0
