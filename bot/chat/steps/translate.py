"""The translate rung: a question in another language than the knowledge's is translated by the LLM and searched
again ("What is the motto of Sun Yat-sen University?" over a Chinese campus guide)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from bot.chat.answer import Answer, Strategy
from bot.chat.generate import ms
from bot.chat.language import LANGUAGE_NAMES, KnowledgeLanguage
from bot.chat.llm import ChatModel
from bot.chat.respond import Responder
from bot.chat.steps.base import Turn
from bot.chat.steps.fallbacks import Research
from bot.chat.steps.knowledge import answer_from
from bot.config.settings import TranslateSettings
from bot.errors import LLMError
from bot.knowledge.entries import Entry

log = logging.getLogger(__name__)


class Translator:
    """Asks the LLM for a translation of a question into the knowledge's language (one line, capped)."""

    def __init__(self, llm: ChatModel, settings: TranslateSettings):
        self.llm = llm
        self.settings = settings

    def translate(self, question: str, language: str) -> str:
        """The translation (raises LLMError if the LLM fails; the caller goes on without it)."""
        prompt = self.settings.template.format(question=question, language=LANGUAGE_NAMES.get(language, language))
        reply = self.llm.complete([{"role": "user", "content": prompt}], max_tokens=self.settings.max_tokens)
        line = next((part.strip().strip('"“”') for part in reply.splitlines() if part.strip()), "")
        return line[: 4 * len(question) + 200]


class TranslateStep:
    """Search a translation into the knowledge's language when the question is in another one."""

    name = "translate"

    def __init__(
        self,
        translator: Translator,
        research: Research,
        responder: Responder,
        entries: Callable[[], list[Entry]],
        language: KnowledgeLanguage,
    ):
        self.translator = translator
        self.research = research
        self.responder = responder
        self.entries = entries
        self.language = language

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer from what the translation found, if anything passes; pass when the languages agree."""
        target = self.language.mismatch(turn.search_text, self.entries())
        if target is None:
            return
        t = time.perf_counter()
        try:
            translated = self.translator.translate(turn.search_text, target)
        except LLMError as exc:
            log.warning("translation skipped: %s", exc)
            return
        finally:
            turn.timings["translate"] = ms(t)
        if not translated or translated == turn.search_text:
            return
        passed = self.research.search_again(turn, translated)
        if passed:
            base = turn.replace(hits=passed, strategy=Strategy.TRANSLATE, rewritten=translated, parts=())
            yield from answer_from(self.responder, turn, base)
