"""``python -m bot eval`` and ``python -m bot calibrate``: the product's own retrieval, measured on a question file."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.settings import DEFAULT_KB, MODES, Settings
from bot.config.variants import update, with_mode
from bot.errors import ConfigError, KnowledgeError
from bot.evaluation import (
    Calibration,
    EvalQuestion,
    Run,
    Split,
    calibrate,
    exact_match,
    f1_score,
    load_questions,
    make_split,
    pool,
    run_questions,
    subsample,
    threshold_key,
)
from bot.evaluation.decisions import Decided, DecisionSummary, decide, summarize, write_details
from bot.evaluation.ladder_tuning import Case
from bot.evaluation.questions import UNANSWERABLE
from bot.evaluation.run import KS
from bot.knowledge.entries import Entry, load_entries, parse_text, write_entries
from bot.texts import ANSWERS_NEED_LLM


def add_eval_arguments(p) -> None:
    """Options of ``eval``."""
    _common(p)
    p.add_argument("--top-k", type=int, default=10, help="hits retrieved per question (recall/MRR depth)")
    p.add_argument("--limit", type=int, default=None, help="a fixed random subset of N questions (seed 0)")
    p.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    p.add_argument("--answers", action="store_true", help="also run the whole bot (needs an LLM) and score EM/F1")
    p.add_argument(
        "--details",
        metavar="FILE",
        default=None,
        help='write one JSON line per question: {"id", "question", "decision", "entries"}',
    )
    p.add_argument(
        "--self-check",
        action="store_true",
        help="no question file: check that every stored question and phrasing retrieves its own entry first",
    )


def add_calibrate_arguments(p) -> None:
    """Options of ``calibrate``."""
    _common(p)
    p.add_argument(
        "--seed",
        default="0",
        help="without unanswerable questions in the file: which random half of the "
        "gold entries is removed; several (0,1,2) = one run each, thresholds chosen on their relevances pooled",
    )
    p.add_argument("--limit", type=int, default=None, help="a fixed random subset of N questions (seed 0)")
    p.add_argument("--write", action="store_true", help="write the chosen thresholds into the --config file")
    p.add_argument("--json", action="store_true", help="print a JSON document instead of the tables")
    p.add_argument(
        "--keep-answer",
        action="store_true",
        help="tune the ladder (answer raise, clarify margin, confirm band) from the configured answer threshold "
        "instead of this file's best-F1 one (e.g. one chosen on several knowledge bases)",
    )


def _common(p) -> None:
    p.add_argument(
        "--questions",
        help='JSON lines: {"question", "gold_ids", "kind"?, "answer"?, "answers"?}; kind is answerable, '
        "unanswerable or chitchat (gold_ids [] for the last two)",
    )
    p.add_argument("--knowledge", help="a knowledge folder or one .json file (default: knowledge.path)")
    p.add_argument("--modes", help="comma-separated modes, e.g. sparse,dense,hybrid (default: the configured one)")
    p.add_argument("--no-split", action="store_true", help="do not split multi-part questions (on by default)")


# -- setting up a knowledge base to measure ----------------------------------------
def read_knowledge(path: Path) -> list[Entry]:
    """Entries of a knowledge folder or of a single knowledge file (ids ``<file stem>:<key>``)."""
    if path.is_dir():
        return load_entries(path)
    if not path.is_file():
        raise ConfigError(f"知识库不存在 / knowledge not found: {path}")
    problems: list = []
    entries = parse_text(path.read_text(encoding="utf-8-sig"), path.stem, str(path), problems)
    if problems:
        raise KnowledgeError(problems)
    return entries


def derived(settings: Settings, knowledge: Path, state: Path, no_split: bool) -> Settings:
    """A copy of ``settings`` that indexes ``knowledge`` (a folder) into ``state``."""
    return update(
        settings,
        {
            "knowledge.path": str(knowledge.resolve()),
            "state_dir": str(state.resolve()),
            "splitting.enabled": settings.splitting.enabled and not no_split,
        },
    )


def eval_settings(settings: Settings, knowledge: str | None, no_split: bool) -> Settings:
    """Settings for measuring ``knowledge``: the user's own state for the configured folder, else a derived one.

    Other knowledge is indexed under ``<state_dir>/eval/<hash of its path>`` so the user's index is untouched
    and a second run reuses the first one's index.
    """
    own = settings.resolve(settings.knowledge.path).resolve()
    path = Path(knowledge).resolve() if knowledge else own
    if path == own:
        return derived(settings, own, settings.resolve(settings.state_dir), no_split)
    state = settings.resolve(settings.state_dir) / "eval" / hashlib.sha1(str(path).encode()).hexdigest()[:12]
    folder = path
    if path.is_file():
        # The index reads folders: link the one file into its own folder, keeping its stem (= the id prefix).
        folder = state / "knowledge"
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / path.name
        if not link.exists():
            try:
                link.symlink_to(path)
            except OSError:
                link.write_bytes(path.read_bytes())
    return derived(settings, folder, state / "state", no_split)


def parse_modes(arg: str | None, settings: Settings) -> list[str]:
    """The modes to run, in the order given (default: the configured mode)."""
    modes = [m.strip() for m in (arg or settings.mode).split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ConfigError(f"未知模式 / unknown mode(s): {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def _bot(settings: Settings, mode: str, llm=None):
    from bot.factory import build_bot

    return build_bot(with_mode(settings, mode), llm=llm)  # parse_modes has checked the mode already


# -- eval ----------------------------------------------------------------------------
@dataclass
class ModeReport:
    """One mode's numbers on one question file (the run plus the thresholds and, optionally, answer scores)."""

    run: Run
    thresholds: dict
    exact_match: float | None = None
    f1: float | None = None
    scored_answers: int = 0
    decided: list[Decided] = field(default_factory=list)

    @property
    def decisions(self) -> DecisionSummary:
        """The ladder's decisions over the questions (retrieval-only: no LLM wording)."""
        return summarize(self.decided)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        r = self.run
        return {
            "mode": r.system,
            "questions": len(r.outcomes),
            "answerable": len(r.ranks),
            "not_answerable": len(r.outcomes) - len(r.ranks),
            "recall": {k: r.recall(k) for k in KS},
            "mrr": r.mrr,
            "pass_rate": r.pass_rate(True),
            "decision_f1": r.decision_f1,
            "not_answerable_pass_rate": r.pass_rate(False),
            "p50_ms": r.p50_ms,
            "p95_ms": r.p95_ms,
            "thresholds": self.thresholds,
            "exact_match": self.exact_match,
            "f1": self.f1,
            "scored_answers": self.scored_answers,
            **self.decisions.to_dict(),
        }


def evaluate_mode(bot, mode: str, questions: list[EvalQuestion], top_k: int, answers: bool) -> ModeReport:
    """Run ``bot.retrieve`` (and with ``answers`` ``bot.answer``) over every question in ``mode``."""
    bot.index.searcher(mode)  # build/sync before the clock starts
    run = run_questions(lambda q: bot.retrieve(q, mode=mode, top_k=top_k), questions, mode)
    decided = decide(bot, questions, mode)  # the whole ladder (with the LLM only under --answers)
    em, f1 = [], []
    for q in questions if answers else []:
        if q.answers:
            text = bot.answer(q.question, mode=mode).text
            em.append(exact_match(text, q.answers))
            f1.append(f1_score(text, q.answers))
    return ModeReport(
        run,
        bot.mode_thresholds(mode).to_dict(),
        _mean(em) if answers else None,
        _mean(f1) if answers else None,
        len(em),
        decided,
    )


def _mean(values: list) -> float:
    return sum(values) / len(values) if values else 0.0


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def eval_table(reports: list[ModeReport]) -> str:
    """The reports side by side as a markdown table."""
    head = [
        "mode",
        "questions",
        *(f"recall@{k}" for k in KS),
        "MRR@10",
        "pass rate",
        "not-answerable pass rate",
        "p50 ms",
        "p95 ms",
        "threshold",
        "wrong /100",
        "right or resolved",
        "answer / clarify / confirm / chit-chat / hand-off / fallback",
    ]
    answers = any(r.exact_match is not None for r in reports)
    head += ["EM", "F1"] if answers else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for report in reports:
        r, t = report.run, report.thresholds
        row = [
            r.system,
            f"{len(r.ranks)} + {len(r.outcomes) - len(r.ranks)} not answerable",
            *(_pct(r.recall(k)) for k in KS),
            _pct(r.mrr),
            _pct(r.pass_rate(True)),
            _pct(r.pass_rate(False)),
            f"{r.p50_ms:.2f}",
            f"{r.p95_ms:.2f}",
            f"{t['system']} ≥ {t['answer']:g}",
            f"{report.decisions.per_100(report.decisions.wrong):.1f}",
            _pct(
                report.decisions.right_or_resolved / report.decisions.answerable
                if report.decisions.answerable
                else None
            ),
            " / ".join(str(v) for v in report.decisions.mix.values()),
        ]
        row += [_pct(report.exact_match), _pct(report.f1)] if answers else []
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _load(settings: Settings, args) -> tuple[Settings, list[EvalQuestion], list[Entry]]:
    if not args.questions:
        raise ConfigError("--questions FILE is required (eval --self-check needs none)")
    s = eval_settings(settings, args.knowledge, args.no_split)
    entries = read_knowledge(Path(args.knowledge) if args.knowledge else s.resolve(s.knowledge.path))
    try:
        questions = load_questions(args.questions, entries)
    except OSError as exc:
        raise ConfigError(f"无法读取问题文件 / cannot read the questions file: {exc}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return s, subsample(questions, args.limit), entries


def run_eval(settings: Settings, args) -> int:
    """The ``eval`` command."""
    from bot.factory import build_llm

    if args.self_check:
        from bot.cli.lint import run_self_check

        return run_self_check(settings, args)

    modes = parse_modes(args.modes, settings)
    s, questions, entries = _load(settings, args)
    llm = build_llm(s) if args.answers else None
    if args.answers and llm is None:
        print(ANSWERS_NEED_LLM.format(env=s.llm.api_key_env), file=sys.stderr)
        return 2
    bot = _bot(s, modes[0], llm)  # one bot: hybrid reuses the sparse and dense indexes built for the other modes
    reports = [evaluate_mode(bot, m, questions, args.top_k, args.answers) for m in modes]
    if args.details:
        write_details(args.details, {r.run.system: r.decided for r in reports})
    if args.json:
        doc = {
            "questions_file": str(args.questions),
            "knowledge": args.knowledge or s.knowledge.path,
            "state_dir": s.state_dir,
            "entries": len(entries),
            "split": s.splitting.enabled,
            "top_k": args.top_k,
            "modes": [r.to_dict() for r in reports],
        }
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    print(
        f"{len(entries)} entries · {len(questions)} questions · top-k {args.top_k} · "
        f"splitting {'on' if s.splitting.enabled else 'off'}\n"
    )
    print(eval_table(reports))
    print(
        "\nrecall/MRR over questions with gold; pass rate = share whose hits pass the threshold "
        "(not-answerable pass rate: questions nothing answers that wrongly pass)."
        + (" EM/F1: CMRC 2018 style, over questions with reference answers." if args.answers else "")
    )
    return 0


# -- calibrate ---------------------------------------------------------------------
def run_calibrate(settings: Settings, args) -> int:
    """The ``calibrate`` command: each mode's answer threshold, for the configured encoder."""
    modes = parse_modes(args.modes, settings)
    try:
        seeds = [int(x) for x in str(args.seed).split(",") if x.strip()] or [0]
    except ValueError:
        raise ConfigError(
            f"--seed 须为整数或逗号分隔的整数 / --seed must be an integer or a comma-separated list: {args.seed}"
        ) from None
    s, questions, entries = _load(settings, args)
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
                functools.partial(bot.retrieve, mode=mode, top_k=10), [*split.answerable, *split.unanswerable]
            ).outcomes
            best = {o.question.question: o.best_relevance for o in outcomes}
            cases = [Case(tuple(zip(o.ranked, o.relevances)), o.question.gold) for o in outcomes]
            results.append(
                calibrate(
                    system,
                    [best[q.question] for q in split.answerable],
                    [best[q.question] for q in split.unanswerable],
                    cases,
                    ladder_base=bot.cutoffs(system).answer if keep_answer else None,
                )
            )
        return results

    if not split.removed:
        return measure(_bot(s, modes[0], llm=None))
    kept = [e for e in entries if e.id not in split.removed]
    with tempfile.TemporaryDirectory(prefix="kbbot-calibrate-") as tmp:
        write_entries(kept, Path(tmp) / "knowledge")
        state = s.resolve(s.state_dir)
        for cache in ("jieba", "embeddings"):  # the dictionary and embedding caches save minutes per run
            if (state / cache).is_dir():
                shutil.copytree(state / cache, Path(tmp) / "state" / cache)
        return measure(_bot(derived(s, Path(tmp) / "knowledge", Path(tmp) / "state", no_split), modes[0], llm=None))


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
