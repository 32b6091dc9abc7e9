"""Which language a message and the knowledge are written in: Chinese or English, from the script used."""

from __future__ import annotations

from collections.abc import Sequence

from bot.knowledge.entries import Entry
from bot.search.language import language_of

LANGUAGE_NAMES = {"zh": "简体中文 (Simplified Chinese)", "en": "English"}
LANGUAGE_TIP = {
    "zh": (
        "提示：本知识库主要是中文内容，用中文提问更容易找到答案。/ Tip: this knowledge base is written in Chinese; "
        "asking in Chinese finds more."
    ),
    "en": (
        "提示：本知识库主要是英文内容，用英文提问更容易找到答案。/ Tip: this knowledge base is written in English; "
        "asking in English finds more."
    ),
}
SAMPLE = 200  # entries looked at to tell the knowledge's language


class KnowledgeLanguage:
    """The knowledge's main language, recomputed when the loaded entries change (a cheap sample of questions)."""

    def __init__(self) -> None:
        self._entries: Sequence[Entry] | None = None  # the loaded knowledge the language was read from
        self._language: str | None = None

    def of(self, entries: Sequence[Entry]) -> str | None:
        """The language most entry questions are in (None for empty knowledge)."""
        if entries is not self._entries:  # the loaded knowledge changed: a new list object
            step = max(1, len(entries) // SAMPLE)
            votes = [language_of(e.query) for e in entries[::step]]
            zh, en = votes.count("zh"), votes.count("en")
            self._language = None if zh + en == 0 else "zh" if zh >= en else "en"
            self._entries = entries
        return self._language

    def mismatch(self, question: str, entries: Sequence[Entry]) -> str | None:
        """The knowledge's language when ``question`` is written in another one, else None."""
        knowledge, asked = self.of(entries), language_of(question)
        return knowledge if knowledge and asked and asked != knowledge else None
