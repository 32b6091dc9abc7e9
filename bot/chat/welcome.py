"""The welcome card: the questions a page or widget offers before the first message, per knowledge base and
category filter.

``ui.pinned`` first; then the entries most asked in the last ``ui.welcome_days`` days (at least
``ui.welcome_min_count`` answers, no 👎 majority), each shown as the phrasing visitors asked most, never a phrasing
that holds personal data or a mask label (the entry's own question instead); a fresh deployment, with nothing
asked yet, shows ``ui.examples``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from bot.chat.related import question_of
from bot.chat.status import EXAMPLES, example_questions, question_key
from bot.config.serving import UISettings
from bot.conversations.asking import AskedEntry, MostAsked
from bot.conversations.privacy import PersonalData
from bot.knowledge.entries import Entry
from bot.knowledge.filters import EntryFilter
from bot.knowledge.validity import Availability

MAX_PHRASING_CHARS = 60  # a longer question is a story, not a button
# What masking left in a stored question ("[mobile]", a configured pattern's "[student_id]")
MASK_LABEL = re.compile(r"\[[A-Za-z_][\w-]*\]")


def shows_personal_data(text: str, detect: PersonalData) -> bool:
    """True when ``text`` holds personal data, or a label masking put in its place."""
    return bool(MASK_LABEL.search(text)) or detect.contains(text)


def phrasing_of(entry: Entry, asked: AskedEntry, detect: PersonalData) -> str:
    """The phrasing visitors asked most for ``entry`` that can be shown, else the entry's own question."""
    for question, _ in asked.phrasings:
        question = " ".join(question.split())
        if question and len(question) <= MAX_PHRASING_CHARS and not shows_personal_data(question, detect):
            return question
    return question_of(entry)


class WelcomeCard:
    """The welcome card's questions from the loaded ``entries``, ``ui`` settings and the log's most asked."""

    def __init__(
        self,
        entries: Callable[[], Sequence[Entry]],
        ui: UISettings,
        most_asked: MostAsked,
        detect: PersonalData,
        availability: Availability | None = None,
    ):
        self.entries = entries
        self.ui = ui
        self.most_asked = most_asked
        self.detect = detect
        self.availability = availability or Availability()

    def questions(self, within: EntryFilter | None = None) -> list[str]:
        """Up to ``ui.welcome_size`` questions for a visitor searching ``within`` (None: the whole knowledge)."""
        shown = [
            e
            for e in self.entries()
            if (within is None or within.admits(e)) and self.availability.answers(e) and not e.draft
        ]
        limit = self.ui.welcome_size
        pinned, pinned_ids = self._pinned(shown)
        source = self.ui.examples_source
        asked = self._asked(shown, pinned_ids) if source != "fixed" else []
        examples = self.ui.examples if source != "popular" else []
        # Without examples in the knowledge, a few of its own questions (EXAMPLES), spread over it.
        rest = asked or example_questions(shown, examples, min(limit, max(len(examples), EXAMPLES)))
        return list(dict.fromkeys([*pinned, *rest]))[:limit]

    def _pinned(self, entries: Sequence[Entry]) -> tuple[list[str], set[str]]:
        """The pinned questions that are a phrasing of one of ``entries``, and those entries' ids."""
        by_phrasing = {question_key(p): e.id for e in entries for p in e.phrasings}
        kept = [(q, by_phrasing[question_key(q)]) for q in self.ui.pinned if question_key(q) in by_phrasing]
        return [q for q, _ in kept], {entry_id for _, entry_id in kept}

    def _asked(self, entries: Sequence[Entry], skip: set[str]) -> list[str]:
        """The most asked of ``entries`` (not in ``skip``) that qualify, as their most asked phrasings."""
        counts = self.most_asked.entries()
        ranked = sorted(
            (e for e in entries if e.id in counts and e.id not in skip),
            key=lambda e: (-counts[e.id].turns, e.id),
        )
        return [
            phrasing_of(e, counts[e.id], self.detect)
            for e in ranked
            if counts[e.id].turns >= self.ui.welcome_min_count and not counts[e.id].down_majority
        ]
