"""``python -m bot calibrate``: each mode's answer threshold (and the ladder's) chosen on a question file, and
optionally written into the config file."""

from __future__ import annotations

import functools
import json
import shutil
import sys
import tempfile
from pathlib import Path

from bot.cli.measure import add_measure_arguments, bot_for, derived, load_measured, parse_modes
from bot.config.settings import DEFAULT_KB, Settings
from bot.errors import ConfigError
from bot.evaluation import Calibration, EvalQuestion, Split, calibrate, make_split, pool, run_questions, threshold_key
from bot.evaluation.ladder_tuning import Case
from bot.evaluation.questions import UNANSWERABLE
from bot.knowledge.entries import Entry, write_entries


def add_calibrate_arguments(p) -> None:
    """Options of ``calibrate``."""
    add_measure_arguments(p)
    p.add_argument(
        "--seed",
        default="0",
        help="without unanswerable questions in the file: which random half of the "
        "gold entries is removed; several (0,1,2) = one run each, thresholds chosen on their relevances pooled",
    )
    p.add_argument("--write", action="store_true", help="write the chosen thresholds into the --config file")
    p.add_argument("--json", action="store_true", help="print a JSON document instead of the tables")
    p.add_argument(
        "--keep-answer",
        action="store_true",
        help="tune the ladder (answer raise, clarify margin, confirm band) from the configured answer threshold "
        "instead of this file's best-F1 one (e.g. one chosen on several knowledge bases)",
    )


def run_calibrate(settings: Settings, args) -> int:
    """The ``calibrate`` command: each mode's answer threshold, for the configured encoder."""
    modes = parse_modes(args.modes, settings)
    try:
        seeds = [int(x) for x in str(args.seed).split(",") if x.strip()] or [0]
    except ValueError:
        raise ConfigError(
            f"--seed 须为整数或逗号分隔的整数 / --seed must be an integer or a comma-separated list: {args.seed}"
        ) from None
    measured = load_measured(settings, args)
    s, questions, entries = measured.settings, measured.questions, measured.entries
    # Entries' negative questions are questions nothing should answer: calibration counts them as unanswerable.
    questions += [
        EvalQuestion(q, frozenset(), (), UNANSWERABLE, f"negative:{e.id}")
        for e in entries
        for q in e.negative_questions
    ]
    runs, summaries = [], []
    for seed in seeds:
        split = make_split(questions, seed)
        runs.append(_calibrate_once(s, entries, split, modes, args.no_split, args.keep_answer))
        summaries.append(
            f"{split.how}: {len(entries) - len(split.removed)} of {len(entries)} entries indexed · "
            f"{len(split.answerable)} answerable, {len(split.unanswerable)} not"
            + (f", {split.dropped} dropped (gold partly removed)" if split.dropped else "")
        )
        if not split.removed:
            break  # real negatives: the same every seed
    results = runs[0] if len(runs) == 1 else pool(runs)
    if args.json:
        print(
            json.dumps(
                {
                    "seeds": seeds[: len(runs)],
                    "summary": summaries,
                    "results": [r.to_dict() for r in results],
                    "per_seed": [[r.to_dict() for r in run] for run in runs] if len(runs) > 1 else None,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        print("\n".join(summaries))
        if len(runs) > 1:
            print(
                "\nper seed:\n"
                + "\n".join(f"  seed {seed}: {r.headline()}" for seed, run in zip(seeds, runs) for r in run)
            )
            print(f"\npooled over seeds {','.join(map(str, seeds))}:")
        for r in results:
            print(f"\n{r.headline()}\n{r.table()}")
    if args.write:
        return _write(args.config, results, getattr(args, "kb", None))
    return 0


def _calibrate_once(
    s: Settings, entries: list[Entry], split: Split, modes: list[str], no_split: bool, keep_answer: bool = False
) -> list[Calibration]:
    """Index the knowledge without ``split.removed`` (in a temporary state when anything is removed) and calibrate."""

    def measure(bot) -> list[Calibration]:
        results = []
        for mode in modes:
            system = bot.index.searcher(mode).system
            outcomes = run_questions(
                functools.partial(bot.search.retrieve, mode=mode, top_k=10), [*split.answerable, *split.unanswerable]
            ).outcomes
            best = {o.question.question: o.best_relevance for o in outcomes}
            cases = [Case(tuple(zip(o.ranked, o.relevances)), o.question.gold) for o in outcomes]
            results.append(
                calibrate(
                    system,
                    [best[q.question] for q in split.answerable],
                    [best[q.question] for q in split.unanswerable],
                    cases,
                    ladder_base=bot.search.cutoffs(system).answer if keep_answer else None,
                )
            )
        return results

    if not split.removed:
        return measure(bot_for(s, modes[0], llm=None))
    kept = [e for e in entries if e.id not in split.removed]
    with tempfile.TemporaryDirectory(prefix="kbbot-calibrate-") as tmp:
        write_entries(kept, Path(tmp) / "knowledge")
        state = s.resolve(s.state_dir)
        for cache in ("jieba", "embeddings"):  # the dictionary and embedding caches save minutes per run
            if (state / cache).is_dir():
                shutil.copytree(state / cache, Path(tmp) / "state" / cache)
        return measure(bot_for(derived(s, Path(tmp) / "knowledge", Path(tmp) / "state", no_split), modes[0], llm=None))


def _write(config: str, results: list[Calibration], kb: str | None = None) -> int:
    """Put every chosen threshold into the config file (all or none; only the numbers change): under
    ``knowledge_bases.<kb>`` for a knowledge base other than the default (``--kb``)."""
    from bot.config.yaml_edit import YamlEditError, put_scalar

    within = ("knowledge_bases", kb) if kb and kb != DEFAULT_KB else ()

    def key_of(system: str, which: str = "answer") -> tuple[str, ...]:
        return (*within, *threshold_key(system, which))

    path = Path(config)
    text = path.read_text(encoding="utf-8")
    try:
        for r in results:
            text = put_scalar(text, key_of(r.system), r.ladder.answer if r.ladder else r.chosen.threshold)
            if r.ladder is not None:
                text = put_scalar(text, key_of(r.system, "clarify"), r.ladder.margin)
                text = put_scalar(text, key_of(r.system, "confirm"), r.ladder.band)
    except YamlEditError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    for r in results:
        answer = r.ladder.answer if r.ladder else r.chosen.threshold
        print(f"已写入 / wrote {'.'.join(key_of(r.system))} = {answer:g} → {config}", file=sys.stderr)
    return 0
