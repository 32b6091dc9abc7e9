"""``python -m bot eval``: the product's own retrieval and ladder, measured on a question file, as a table or JSON."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from bot.cli.measure import add_measure_arguments, bot_for, load_measured, parse_modes
from bot.config.settings import Settings
from bot.evaluation import EvalQuestion, Run, exact_match, f1_score, run_questions
from bot.evaluation.decisions import Decided, DecisionSummary, decide, summarize, write_details
from bot.evaluation.run import KS
from bot.texts import ANSWERS_NEED_LLM


def add_eval_arguments(p) -> None:
    """Options of ``eval``."""
    add_measure_arguments(p)
    p.add_argument("--top-k", type=int, default=10, help="hits retrieved per question (recall/MRR depth)")
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
        bot.search.mode_thresholds(mode).to_dict(),
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


def run_eval(settings: Settings, args) -> int:
    """The ``eval`` command."""
    from bot.factory import build_llm

    if args.self_check:
        from bot.cli.knowledge_check import run_self_check

        return run_self_check(settings, args)

    modes = parse_modes(args.modes, settings)
    measured = load_measured(settings, args)
    s, questions, entries = measured.settings, measured.questions, measured.entries
    llm = build_llm(s) if args.answers else None
    if args.answers and llm is None:
        print(ANSWERS_NEED_LLM.format(env=s.llm.api_key_env), file=sys.stderr)
        return 2
    bot = bot_for(s, modes[0], llm)  # one bot: hybrid reuses the sparse and dense indexes built for the other modes
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
