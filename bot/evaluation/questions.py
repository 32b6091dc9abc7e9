"""Evaluation questions: who asks what, which entries answer it, and whether anything in the knowledge does."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.errors import KnowledgeError
from bot.knowledge.entries import Entry, parse_text
from bot.knowledge.entry_ids import entry_id, stem_of

ANSWERABLE, UNANSWERABLE, CHITCHAT = "answerable", "unanswerable", "chitchat"
KINDS = (ANSWERABLE, UNANSWERABLE, CHITCHAT)


@dataclass(frozen=True)
class EvalQuestion:
    """One question, the ids of the entries that answer it, and its kind.

    ``kind`` is "answerable" (gold entries exist), "unanswerable" (on-topic, but nothing in the knowledge
    answers it) or "chitchat" (greetings, thanks, off-topic); a file without kinds gets "answerable" for
    questions with gold and "chitchat" for those without.
    """

    question: str
    gold: frozenset[str]
    answers: tuple[str, ...] = ()
    kind: str = ANSWERABLE
    id: str = ""  # the file's "id", else the line number

    @property
    def answerable(self) -> bool:
        """True when some entry answers the question."""
        return bool(self.gold)


@dataclass(frozen=True)
class EvalSet:
    """A knowledge base in the bot's own entry form plus its questions."""

    name: str
    entries: list[Entry]
    questions: list[EvalQuestion]


def resolve_gold(gold: object, ids: set[str], stems: Sequence[str]) -> str:
    """A gold id as an entry id: full ids ("stem:key") are kept, bare keys/indices get the knowledge file's stem."""
    text = str(gold)
    if text in ids:
        return text
    matches = [entry_id(stem, text) for stem in stems if entry_id(stem, text) in ids]
    if len(matches) == 1 or (not matches and len(stems) == 1):
        return matches[0] if matches else f"{stems[0]}:{text}"
    # Unknown or ambiguous: keep it as written so it simply never matches (a miss, not a crash).
    return text


def load_questions(path: str | Path, entries: Sequence[Entry]) -> list[EvalQuestion]:
    """Read JSON lines of {"question", "gold_ids", "kind"?, "answer"?, "answers"?}, gold resolved against ``entries``."""
    ids = {e.id for e in entries}
    stems = sorted({stem_of(e.id) for e in entries})
    questions = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                text, gold = d["question"], d.get("gold_ids") or []
                kind = d.get("kind") or (ANSWERABLE if gold else CHITCHAT)
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(
                    f"{path}:{n}: 每行须为含 question 和 gold_ids 的 JSON / each line must be JSON with "
                    f"question and gold_ids ({exc})"
                ) from None
            if kind not in KINDS or (kind == ANSWERABLE) != bool(gold):
                raise ValueError(
                    f"{path}:{n}: kind {kind!r} 与 gold_ids 不符 / does not fit gold_ids {gold!r} "
                    f"(answerable needs gold ids; {UNANSWERABLE} and {CHITCHAT} have none)"
                )
            refs = d.get("answers") or ([d["answer"]] if d.get("answer") else [])
            questions.append(
                EvalQuestion(
                    str(text),
                    frozenset(resolve_gold(g, ids, stems) for g in gold),
                    tuple(str(a) for a in refs),
                    kind,
                    str(d.get("id") or n),
                )
            )
    return questions


def load_eval_set(folder: str | Path, name: str | None = None) -> EvalSet:
    """Read ``knowledge.json`` with the project's loader (ids ``knowledge:<key>``) and ``eval.jsonl``."""
    folder = Path(folder)
    file = folder / "knowledge.json"
    problems: list = []
    entries = parse_text(file.read_text(encoding="utf-8"), file.stem, str(file), problems)
    if problems:
        raise KnowledgeError(problems)
    return EvalSet(name or folder.name, entries, load_questions(folder / "eval.jsonl", entries))


def subsample(questions: Sequence[EvalQuestion], limit: int | None, seed: int = 0) -> list[EvalQuestion]:
    """A fixed random subset of ``limit`` questions (all of them when limit is None or larger)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    return random.Random(seed).sample(list(questions), limit)
