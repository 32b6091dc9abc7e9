"""Retrieval evaluation: recall@k and MRR of a searcher over questions with known gold entries."""

from __future__ import annotations

import json
import random
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from bot.errors import KnowledgeError
from bot.knowledge import Entry, parse_text

Search = Callable[[str, int], list[str]]  # question, k -> entry ids, best first


@dataclass(frozen=True)
class EvalQuestion:
    """One question and the ids of the entries that answer it."""

    question: str
    gold: frozenset[str]
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalSet:
    """A knowledge base in the bot's own entry form plus its questions."""

    name: str
    entries: list[Entry]
    questions: list[EvalQuestion]


@dataclass
class RetrievalResult:
    """One system's numbers on one eval set."""

    system: str
    dataset: str
    questions: int
    recall: dict[int, float]
    mrr: float
    index_seconds: float
    p50_ms: float
    p95_ms: float
    note: str = ""
    ranks: list[int | None] = field(default_factory=list, repr=False)


def load_eval_set(folder: str | Path, name: str | None = None) -> EvalSet:
    """Read ``knowledge.json`` with the project's loader (ids ``knowledge:<key>``) and ``eval.jsonl`` gold indices."""
    folder = Path(folder)
    file = folder / "knowledge.json"
    problems: list = []
    entries = parse_text(file.read_text(encoding="utf-8"), file.stem, str(file), problems)
    if problems:
        raise KnowledgeError(problems)
    questions = []
    with open(folder / "eval.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                d = json.loads(line)
                questions.append(EvalQuestion(d["question"], frozenset(f"{file.stem}:{g}" for g in d["gold_ids"])))
    return EvalSet(name or folder.name, entries, questions)


def subsample(questions: Sequence[EvalQuestion], limit: int | None, seed: int = 0) -> list[EvalQuestion]:
    """A fixed random subset of ``limit`` questions (all of them when limit is None or larger)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    return random.Random(seed).sample(list(questions), limit)


def first_gold_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    """1-based rank of the first gold id in ``ranked``, or None."""
    gold = set(gold)
    return next((i for i, r in enumerate(ranked, start=1) if r in gold), None)


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    """Share of questions with a gold entry in the top ``k``."""
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0


def mrr_at(ranks: Sequence[int | None], depth: int = 10) -> float:
    """Mean reciprocal rank, counting only ranks within ``depth``."""
    return sum(1.0 / r for r in ranks if r is not None and r <= depth) / len(ranks) if ranks else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on sorted values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def evaluate(system: str, dataset: str, search: Search, questions: Sequence[EvalQuestion],
             index_seconds: float = 0.0, ks: Sequence[int] = (1, 3, 5), depth: int = 10, note: str = "") -> RetrievalResult:
    """Run ``search`` over every question (top ``depth``) and compute recall@ks, MRR@depth and latency."""
    ranks: list[int | None] = []
    times: list[float] = []
    for q in questions:
        start = time.perf_counter()
        ranked = search(q.question, depth)
        times.append((time.perf_counter() - start) * 1000)
        ranks.append(first_gold_rank(ranked, q.gold))
    return RetrievalResult(
        system=system, dataset=dataset, questions=len(questions),
        recall={k: recall_at(ranks, k) for k in ks}, mrr=mrr_at(ranks, depth),
        index_seconds=index_seconds, p50_ms=statistics.median(times) if times else 0.0,
        p95_ms=percentile(times, 95), note=note, ranks=ranks,
    )


def markdown_table(results: Sequence[RetrievalResult], ks: Sequence[int] = (1, 3, 5)) -> str:
    """The results as one markdown table."""
    head = ["dataset", "system", "questions", *(f"recall@{k}" for k in ks), "MRR@10", "index s", "p50 ms", "p95 ms", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        row = [r.dataset, r.system, str(r.questions), *(f"{r.recall[k]:.3f}" for k in ks), f"{r.mrr:.3f}",
               f"{r.index_seconds:.1f}", f"{r.p50_ms:.2f}", f"{r.p95_ms:.2f}", r.note]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class ScoreSplit:
    """Top-1 scores when the gold entry is present vs. the best score once it is taken away."""

    answerable: list[float]
    unanswerable: list[float]

    def best_threshold(self) -> tuple[float, float]:
        """(threshold, accuracy) that best separates the two lists (scores >= threshold count as answerable)."""
        labelled = sorted([(s, 1) for s in self.answerable] + [(s, 0) for s in self.unanswerable])
        total = len(labelled)
        if not total:
            return 0.0, 0.0
        best = (labelled[0][0], len(self.answerable) / total)
        below_neg = below_pos = 0
        for i, (score, label) in enumerate(labelled):
            below_neg += label == 0
            below_pos += label == 1
            nxt = labelled[i + 1][0] if i + 1 < total else score + 1e-6
            accuracy = (below_neg + (len(self.answerable) - below_pos)) / total
            if accuracy > best[1] and nxt > score:
                best = ((score + nxt) / 2, accuracy)
        return best


def score_split(search_hits: Callable[[str, int], list[tuple[str, float]]], questions: Sequence[EvalQuestion],
                depth: int = 10) -> ScoreSplit:
    """Scores of answerable questions (gold ranked first) and of the same questions with the gold removed.

    Removing an entry does not change other entries' cosine scores, so "best non-gold score" is what the
    searcher would return if the knowledge lacked the answer (for BM25 it is close: idf shifts slightly).
    """
    answerable, unanswerable = [], []
    for q in questions:
        hits = search_hits(q.question, depth)
        if hits and hits[0][0] in q.gold:
            answerable.append(hits[0][1])
        rest = [s for i, s in hits if i not in q.gold]
        unanswerable.append(rest[0] if rest else 0.0)
    return ScoreSplit(answerable, unanswerable)


def resolve_gold(gold: object, ids: set[str], stems: Sequence[str]) -> str:
    """A gold id as an entry id: full ids ("stem:key") are kept, bare keys/indices get the knowledge file's stem."""
    text = str(gold)
    if text in ids:
        return text
    matches = [f"{stem}:{text}" for stem in stems if f"{stem}:{text}" in ids]
    if len(matches) == 1 or (not matches and len(stems) == 1):
        return matches[0] if matches else f"{stems[0]}:{text}"
    # Unknown or ambiguous: keep it as written so it simply never matches (a miss, not a crash).
    return text


def load_questions(path: str | Path, entries: Sequence[Entry]) -> list[EvalQuestion]:
    """Read a JSON-lines file of {"question", "gold_ids", "answer"?, "answers"?}, gold ids resolved against ``entries``."""
    ids = {e.id for e in entries}
    stems = sorted({e.id.split(":", 1)[0] for e in entries})
    questions = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                text, gold = d["question"], d.get("gold_ids") or []
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{n}: 每行须为含 question 和 gold_ids 的 JSON / each line must be JSON with "
                                 f"question and gold_ids ({exc})") from None
            refs = d.get("answers") or ([d["answer"]] if d.get("answer") else [])
            questions.append(EvalQuestion(str(text), frozenset(resolve_gold(g, ids, stems) for g in gold),
                                          tuple(str(a) for a in refs)))
    return questions


# -- answer quality, CMRC 2018 style -------------------------------------------
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def answer_tokens(text: str) -> list[str]:
    """Lower-cased tokens with punctuation dropped: each Chinese character alone, other letters/digits as words."""
    return _TOKEN.findall(text.lower())


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 when the prediction equals any reference once punctuation, spaces and case are ignored."""
    pred = answer_tokens(prediction)
    return float(any(answer_tokens(ref) == pred for ref in references))


def f1_score(prediction: str, references: Sequence[str]) -> float:
    """Max over references of the F1 of the longest common token run (the official CMRC 2018 metric)."""
    pred, best = answer_tokens(prediction), 0.0
    for ref in references:
        gold = answer_tokens(ref)
        common = _longest_common_run(gold, pred)
        if common:
            precision, recall = common / len(pred), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
