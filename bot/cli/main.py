"""Command line: ``python -m bot ask|search|index|eval|calibrate|knowledge|log|handoff``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from bot.chat.answer import hit_dict
from bot.cli.calibrate import add_calibrate_arguments, run_calibrate
from bot.cli.eval import add_eval_arguments, run_eval
from bot.cli.handoff import add_handoff_arguments, run_handoff
from bot.cli.knowledge import add_knowledge_arguments, run_knowledge
from bot.cli.log import add_log_arguments, run_log
from bot.cli.testset import add_testset_arguments, run_testset
from bot.config.knowledge_bases import knowledge_base_settings
from bot.config.settings import DEFAULT_KB, MODES, load_settings
from bot.config.variants import with_mode
from bot.errors import BotError, ConfigError, KnowledgeError
from bot.knowledge.filters import entry_filter


def _global_options(defaults: bool) -> argparse.ArgumentParser:
    """--config, --mode and -v; accepted before or after the sub-command (only the top level sets defaults)."""
    p = argparse.ArgumentParser(add_help=False)

    def default(value: Any) -> dict[str, Any]:  # a sub-command must not reset what came before it
        return {"default": value if defaults else argparse.SUPPRESS}

    p.add_argument("--config", help="path to config.yaml (default: ./config.yaml)", **default("config.yaml"))
    p.add_argument(
        "--kb",
        help="the knowledge base to use, of the config's knowledge_bases (default: the top level)",
        **default(None),
    )
    p.add_argument("--mode", choices=MODES, help="override retrieval.mode for this command", **default(None))
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr", **default(False))
    return p


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bot",
        description="知识库问答机器人 / Knowledge-base chatbot",
        parents=[_global_options(defaults=True)],
    )
    sub = p.add_subparsers(dest="command", required=True)
    common = [_global_options(defaults=False)]
    ask = sub.add_parser("ask", help="answer a question (uses the LLM when a key is set)", parents=common)
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the answer, strategy and hits as JSON")
    ask.add_argument("--category", action="append", help="search only entries of this category (repeatable)")
    search = sub.add_parser("search", help="show the hits and scores for a query, without the LLM", parents=common)
    search.add_argument("query")
    search.add_argument("--top-k", type=int, default=None)
    search.add_argument("--json", action="store_true")
    search.add_argument("--category", action="append", help="search only entries of this category (repeatable)")
    index = sub.add_parser("index", help="build or update the index from the knowledge folder", parents=common)
    index.add_argument("--rebuild", action="store_true", help="drop the index and build it from scratch")
    add_eval_arguments(
        sub.add_parser(
            "eval", parents=common, help="measure retrieval (recall, MRR, pass rates, latency) on a question file"
        )
    )
    add_calibrate_arguments(
        sub.add_parser("calibrate", parents=common, help="choose each searcher's threshold from a question file")
    )
    serve = sub.add_parser("serve", parents=common, help="serve the chat in the browser and the API at /v1 (as app.py)")
    serve.add_argument("--host", help="address to bind (default from config: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, help="port (default from config: 7860)")
    serve.add_argument("--share", action="store_true", help="also create a public Gradio share link")
    add_testset_arguments(
        sub.add_parser("testset", parents=common, help="labelled test sets: add, run on the current knowledge, history")
    )
    add_knowledge_arguments(
        sub.add_parser(
            "knowledge",
            parents=common,
            help="add, edit, delete or import entries (locked, validated, with history); history and restore",
        ),
        common,
    )
    add_log_arguments(
        sub.add_parser("log", parents=common, help="the conversation log: purge old turns, mask personal data, stats"),
        common,
    )
    add_handoff_arguments(
        sub.add_parser("handoff", parents=common, help="hand-off tickets (list), agents' password hashes"), common
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 ok, 2 bad knowledge or config, 1 other failure)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings(args.config)
        if args.kb:
            settings = knowledge_base_settings(settings, args.kb)
        if args.mode:
            settings = with_mode(settings, args.mode, "--mode")
        return {
            "ask": _ask,
            "search": _search,
            "index": _index,
            "eval": run_eval,
            "calibrate": run_calibrate,
            "testset": run_testset,
            "serve": _serve,
            "knowledge": run_knowledge,
            "log": run_log,
            "handoff": run_handoff,
        }[args.command](settings, args)
    except KnowledgeError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1


def _serve(settings, args) -> int:
    """``serve``: the browser app and the API on one port; blocks until stopped."""
    from bot.server import run

    # Every knowledge base of the file, each in its configured mode: --kb and --mode do not apply to a server.
    run(load_settings(args.config), args.host, args.port, args.share)
    return 0


def _ask(settings, args) -> int:
    from bot.deployment import Deployment
    from bot.factory import build_knowledge_base

    def build(kb_settings, name, route):
        kb_settings = with_mode(kb_settings, args.mode, "--mode") if args.mode else kb_settings
        return build_knowledge_base(kb_settings, name=name, route=route)

    # the whole deployment, as routing.route_to may ask another knowledge base (built only then)
    kb = Deployment(load_settings(args.config), build).knowledge_base(args.kb or DEFAULT_KB)
    answer = kb.ask(args.question, within=entry_filter(args.category))
    if args.json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
        return 0
    print(answer.text)
    print(
        f"\n[decision: {answer.decision.value} · strategy: {answer.strategy.value} · mode: {answer.mode} · "
        f"{'LLM: ' + answer.llm if answer.llm else 'retrieval-only'}]"
    )
    for i, hit in enumerate(answer.hits, 1):
        band = f", {answer.thresholds.band(hit).value}" if answer.thresholds else ""
        print(f"  [{i}] {hit.entry.query}  (relevance {hit.relevance:.3f}{band}, {hit.searcher}, {hit.entry.id})")
        _print_passages(hit, "      ")
    for i, option in enumerate(answer.options, 1):
        print(f"  option {i}: {option.question}  ({option.id})")
    return 0


def _print_passages(hit, indent: str) -> None:
    """The passages of a long document that matched (number and relevance, best first)."""
    if hit.passages:
        print(indent + "段落 / passages: " + ", ".join(f"§{p.index + 1} {p.relevance:.3f}" for p in hit.passages))


def _search(settings, args) -> int:
    from bot.factory import build_bot

    bot = build_bot(settings, llm=None)
    within = entry_filter(args.category)
    hits, passed = bot.retrieve(args.query, top_k=args.top_k, within=within)
    cutoffs = bot.search.mode_thresholds()
    mode = bot.search.current_mode()
    if args.json:
        print(
            json.dumps(
                {
                    "query": args.query,
                    "mode": mode,
                    "filter": within.to_dict() if within else None,
                    "thresholds": cutoffs.to_dict(),
                    "hits": [dict(hit_dict(h), passed=h in passed) for h in hits],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    if not hits:
        print("没有结果 / no hits")
    for i, hit in enumerate(hits, 1):
        mark = "✓" if hit in passed else "·"
        signals = " ".join(f"{k} {v:.3g}" for k, v in hit.signals.items())
        print(f"{mark} {i}. {hit.relevance:.3f}  {hit.entry.query}  [{hit.entry.id}]  ({signals})")
        _print_passages(hit, "     ")
    print(f"(mode {mode}, relevance threshold {cutoffs.describe()}; ✓ = passes)")
    return 0


class BarProgress:
    """A tqdm bar as a sync's Progress: each index's announced total restarts it, reports advance it."""

    def __init__(self, bar):
        self.bar = bar

    def start(self, total: int) -> None:
        """A new index's sync writes ``total`` texts."""
        self.bar.reset(total=total)

    def __call__(self, n: int) -> None:
        self.bar.update(n)


def _index(settings, args) -> int:
    from tqdm import tqdm

    from bot.factory import build_index

    index = build_index(settings)
    index.load()
    mode = settings.mode
    # Counted in indexed texts (an entry, or a passage of a long one), the unit the searchers report; the total is what
    # this sync writes (the changed entries), announced by each index it syncs (a hybrid mode: sparse, then dense).
    desc = f"indexing {mode} ({len(index.entries)} entries, {len(index.units)} texts)"
    with tqdm(total=0, desc=desc, unit="text", file=sys.stderr) as bar:
        report = index.sync(mode, progress=BarProgress(bar), rebuild=args.rebuild)
    encoders = [getattr(leaf, "encoder", None) for leaf in index.searcher(mode).leaves()]
    cached = "".join(
        f" · {e.name}: {e.encoded} text(s) encoded, the rest from the embedding cache"
        for e in encoders
        if e is not None and hasattr(e, "encoded")
    )
    print(
        f"{len(index.entries)} entries · mode {mode} · added {report.added}, updated {report.updated}, "
        f"removed {report.removed}{' (rebuilt)' if report.rebuilt else ''} · {report.seconds:.2f}s{cached}"
    )
    return 0
