"""``python -m bot calibrate``: each mode's answer threshold (and the ladder's, and on request the agreement weights)
chosen on a question file and the pairs traffic labelled, optionally written into the config file unless it makes a
guard set (``--test`` files, the held-out half of the traffic pairs) worse."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

from bot.chat.answer import Cutoffs
from bot.chat.several import asks_for_several
from bot.cli.measure import (
    Measured,
    add_measure_arguments,
    bot_for,
    derived,
    eval_settings,
    load_measured,
    parse_modes,
    read_knowledge,
)
from bot.config.retrieval import AgreementWeights
from bot.config.settings import DEFAULT_KB, Settings
from bot.errors import ConfigError
from bot.evaluation import (
    Calibration,
    EvalQuestion,
    Outcome,
    Split,
    calibrate,
    make_split,
    pool,
    run_questions,
    threshold_key,
)
from bot.evaluation.calibration import LadderChoice, worse_sets
from bot.evaluation.ladder_tuning import Case, Rungs
from bot.evaluation.questions import ANSWERABLE, UNANSWERABLE, load_questions
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
        "--traffic",
        action="store_true",
        help="also tune on the (message, entry) pairs the conversation log labels (clarify picks, yes to a "
        "confirmation, clicked did-you-mean, 👍); half of them, by message, are held out as a guard set",
    )
    p.add_argument(
        "--test",
        action="append",
        default=[],
        metavar="FILE",
        help="a question file (as --questions) the retuned values must not make worse; repeat for several",
    )
    p.add_argument("--weights", action="store_true", help="retune the agreement weights (retrieval.agreement) too")
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
    measured = _measured(settings, args)
    s, questions, entries = measured.settings, measured.questions, measured.entries
    guards: dict[str, list[EvalQuestion]] = {}
    for path in args.test:
        try:
            guards[path] = load_questions(path, entries)
        except OSError as exc:
            raise ConfigError(f"无法读取测试集 / cannot read the test set: {exc}") from None
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if args.traffic:
        tuning, held = traffic_questions(s, entries)
        questions += tuning
        guards["traffic (held out)"] = held
        print(f"traffic: {len(tuning) + len(held)} labelled pairs, {len(held)} held out", file=sys.stderr)
    if not questions:
        raise ConfigError("没有可用的问题 / nothing to tune on: give --questions FILE or --traffic with labelled pairs")
    # Entries' negative questions are questions nothing should answer: calibration counts them as unanswerable.
    questions += [
        EvalQuestion(q, frozenset(), (), UNANSWERABLE, f"negative:{e.id}")
        for e in entries
        for q in e.negative_questions
    ]
    runs, summaries = [], []
    for seed in seeds:
        split = make_split(questions, seed)
        runs.append(_calibrate_once(s, entries, split, modes, args.no_split, args.keep_answer, args.weights))
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
    if guards:
        refused = _guard(s, modes, results, guards)
        if refused:
            return 1
    if args.write:
        return _write(args.config, results, getattr(args, "kb", None))
    return 0


def _measured(settings: Settings, args) -> Measured:
    """The knowledge and the question file; without ``--questions`` (``--traffic`` alone) no questions."""
    if args.questions or not args.traffic:
        return load_measured(settings, args)
    s = eval_settings(settings, args.knowledge, args.no_split)
    return Measured(s, [], read_knowledge(Path(args.knowledge) if args.knowledge else s.resolve(s.knowledge.path)))


def traffic_questions(settings: Settings, entries: list[Entry]) -> tuple[list[EvalQuestion], list[EvalQuestion]]:
    """The labelled pairs of the conversation log as answerable questions: (to tune on, held out), split by the
    message so that the same message is never on both sides."""
    from bot.conversations.inbox import normalise
    from bot.conversations.suggestions import labelled_pairs
    from bot.conversations.turn_log import turn_log_from_settings

    log = turn_log_from_settings(settings, prune_on_open=False)
    if log is None:
        raise ConfigError("--traffic: 对话日志已关闭 / the conversation log is off (log.enabled in config.yaml)")
    try:
        pairs = labelled_pairs(log, entries)
    finally:
        log.close()
    tuning: list[EvalQuestion] = []
    held: list[EvalQuestion] = []
    for pair in pairs:
        question = EvalQuestion(pair.question, frozenset({pair.entry_id}), (), ANSWERABLE, f"traffic:{pair.via}")
        (held if zlib.crc32(normalise(pair.question).encode()) % 2 else tuning).append(question)
    return tuning, held


def _replayable(outcome: Outcome) -> Case:
    """One question's ranked hits, gold and signals as the ladder's replay reads them."""
    question = outcome.question
    pairs = tuple(zip(outcome.ranked, outcome.relevances))
    return Case(pairs, question.gold, outcome.signals, asks_for_several(question.question))


def kept_rungs(cutoffs: Cutoffs) -> Rungs:
    """The rungs calibrate does not retune, as ``cutoffs`` configures them."""
    c = cutoffs
    return Rungs(c.settle, c.settle_dense, c.contrast, c.together, c.translated)


def _guard(s: Settings, modes: list[str], results: list[Calibration], guards: dict[str, list[EvalQuestion]]) -> bool:
    """Print how each guard set fares with the configured and the retuned values; True (refused, a message naming
    each set and figure on stderr) when the retune makes one of them worse."""
    refused = False
    for mode, r in zip(modes, results):
        bot = bot_for(s, mode)
        system = bot.index.searcher(mode).system
        cutoffs = bot.search.cutoffs(system)
        weights = s.retrieval.agreement.get(system, AgreementWeights())
        # the rungs calibrate does not retune decide as configured on both sides of the comparison
        current = LadderChoice(cutoffs.answer, cutoffs.clarify, cutoffs.confirm, weights, kept_rungs(cutoffs))
        ladder = r.ladder
        retuned = (
            dataclasses.replace(
                current, answer=ladder.answer, margin=ladder.margin, band=ladder.band, weights=r.weights or weights
            )
            if ladder
            else dataclasses.replace(current, answer=r.chosen.threshold, margin=None, band=None)
        )
        sets = {
            name: [
                _replayable(o)
                for o in run_questions(functools.partial(bot.search.retrieve, mode=mode, top_k=10), questions).outcomes
            ]
            for name, questions in guards.items()
        }
        worse = worse_sets(sets, current, retuned)
        for w in worse:
            print(f"拒绝 / refused ({system}): the retuned values make {w.describe()}", file=sys.stderr)
        if not worse:
            held = ", ".join(f"{name} ({len(cases)})" for name, cases in sets.items())
            print(f"{system}: no guard set gets worse: {held}", file=sys.stderr)
        refused = refused or bool(worse)
    if refused:
        print("未写入 / nothing written: the configured values stay", file=sys.stderr)
    return refused


def _calibrate_once(
    s: Settings,
    entries: list[Entry],
    split: Split,
    modes: list[str],
    no_split: bool,
    keep_answer: bool = False,
    weights: bool = False,
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
            cases = [_replayable(o) for o in outcomes]
            configured = s.retrieval.agreement.get(system, AgreementWeights())
            cutoffs = bot.search.cutoffs(system)
            results.append(
                calibrate(
                    system,
                    [best[q.question] for q in split.answerable],
                    [best[q.question] for q in split.unanswerable],
                    cases,
                    ladder_base=cutoffs.answer if keep_answer else None,
                    weights_from=configured if weights else None,
                    rungs=kept_rungs(cutoffs),
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
                text = put_scalar(text, key_of(r.system, "unsure"), r.unsure)
            for name, value in (r.weights.model_dump() if r.weights else {}).items():
                text = put_scalar(text, (*within, "retrieval", "agreement", r.system, name), value)
    except YamlEditError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    for r in results:
        answer = r.ladder.answer if r.ladder else r.chosen.threshold
        print(f"已写入 / wrote {'.'.join(key_of(r.system))} = {answer:g} → {config}", file=sys.stderr)
    return 0
