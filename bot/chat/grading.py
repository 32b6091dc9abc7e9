"""Optional LLM relevance grading: the best candidates graded 0-1 in one call, mixed into their relevance.

relevance' = (1 - weight) x retrieval relevance + weight x grade, before the threshold. Any failure (the LLM
errs, the reply is not JSON, a grade is missing or out of range) keeps the retrieval relevances, with a warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence

from bot.chat.answer import Cutoffs, Part
from bot.chat.llm import ChatModel
from bot.chat.prompt import quoted
from bot.config.settings import GradingSettings
from bot.errors import LLMError
from bot.knowledge.markup import plain_text
from bot.search.base import Hit
from bot.search.passages import excerpt

log = logging.getLogger(__name__)

GRADE_SIGNAL = "llm_grade"
RETRIEVAL_SIGNAL = "retrieval"


class GradingFailed(ValueError):
    """The grader's reply could not be used."""


def first_json_object(text: str, key: str | None = None) -> dict:
    """The first JSON object in ``text`` (with ``key``, when given); chatter and code fences around it are ignored."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and (key is None or key in value):
            return value
        start = text.find("{", start + 1)
    raise GradingFailed(f"no JSON object{f' with {key!r}' if key else ''} in the reply: {text[:200]!r}")


def parse_grades(text: str, count: int) -> list[float]:
    """Grades 1..``count`` from ``{"grades": [{"n": 1, "grade": 0.8}, ...]}`` (or a plain list of numbers)."""
    grades = first_json_object(text, "grades")["grades"]
    if not isinstance(grades, list):
        raise GradingFailed('the reply has no "grades" list')
    found: dict[int, float] = {}
    for i, item in enumerate(grades, 1):
        n, grade = (item.get("n"), item.get("grade")) if isinstance(item, dict) else (i, item)
        if (
            isinstance(n, bool)
            or not isinstance(n, int)
            or isinstance(grade, bool)
            or not isinstance(grade, (int, float))
        ):
            raise GradingFailed(f'grade {item!r} is not {{"n": <int>, "grade": <number>}}')
        if not 0.0 <= grade <= 1.0:
            raise GradingFailed(f"grade {grade} of reference {n} is outside [0, 1]")
        found[n] = float(grade)
    missing = [n for n in range(1, count + 1) if n not in found]
    if missing:
        raise GradingFailed(f"no grade for reference(s) {missing}")
    return [found[n] for n in range(1, count + 1)]


@dataclasses.dataclass(frozen=True)
class Graded:
    """Hits after grading, best first, those that pass the thresholds, and the split message's parts regraded."""

    hits: list[Hit]
    passed: list[Hit]
    parts: tuple[Part, ...]


class RelevanceGrader:
    """Grades the top ``candidates`` hits for one question in one LLM call and re-weighs their relevance."""

    def __init__(self, llm: ChatModel, settings: GradingSettings):
        self.llm = llm
        self.settings = settings

    def prompt(self, question: str, hits: Sequence[Hit]) -> str:
        """The grading request: the question and the numbered candidates (as JSON string literals: data only)."""
        limit = self.settings.document_chars
        # a long document is represented by its best passages (the ones its search matched)
        lines = [
            f"[{n}] {quoted(h.entry.query)}: {quoted(plain_text(excerpt(h, limit)))}" for n, h in enumerate(hits, 1)
        ]
        return self.settings.template.format(question=quoted(question), candidates="\n".join(lines))

    def grades(self, question: str, hits: Sequence[Hit]) -> list[float]:
        """One grade in [0, 1] per hit (raises LLMError or GradingFailed)."""
        reply = self.llm.complete(
            [{"role": "user", "content": self.prompt(question, hits)}], max_tokens=self.settings.max_tokens
        )
        return parse_grades(reply, len(hits))

    def grade(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` with the top candidates' relevance mixed with their grade, best first; unchanged on failure."""
        top = list(hits[: self.settings.candidates])
        if not top:
            return list(hits)
        try:
            grades = self.grades(question, top)
        except (LLMError, GradingFailed) as exc:
            log.warning("relevance grading failed, keeping the retrieval relevances: %s", exc)
            return list(hits)
        w = self.settings.weight
        graded = [
            dataclasses.replace(
                h,
                relevance=(1 - w) * h.relevance + w * g,
                signals={**h.signals, RETRIEVAL_SIGNAL: h.relevance, GRADE_SIGNAL: g},
            )
            for h, g in zip(top, grades)
        ]
        return sorted(graded + list(hits[len(top) :]), key=lambda h: -h.relevance)

    def apply(self, question: str, hits: Sequence[Hit], parts: Sequence[Part], cutoffs: Cutoffs) -> Graded:
        """The graded hits, those that pass ``cutoffs``, and ``parts`` with their hit regraded or dropped if it fails."""
        graded = self.grade(question, hits)
        by_id = {h.entry.id: h for h in graded}
        new_parts = []
        for part in parts:
            hit = part.hit
            if hit is not None and hit.entry.id in by_id:
                hit = dataclasses.replace(by_id[hit.entry.id], subquestion=hit.subquestion)
                hit = hit if cutoffs.passes(hit) else None
            new_parts.append(Part(part.question, hit))
        return Graded(graded, [h for h in graded if cutoffs.passes(h)], tuple(new_parts))
