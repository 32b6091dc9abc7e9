"""HyDE: when no hit passes, search again with the question and a hypothetical answer the LLM wrote."""

from __future__ import annotations

from bot.chat.llm import ChatModel
from bot.config.settings import HydeSettings


class HydeFallback:
    """Asks the LLM for a short hypothetical answer; the bot searches again with question + that answer."""

    def __init__(self, llm: ChatModel, settings: HydeSettings):
        self.llm = llm
        self.settings = settings

    def hypothesize(self, question: str) -> str:
        """The hypothetical answer for ``question`` (raises LLMError if the LLM fails)."""
        prompt = self.settings.template.format(question=question)
        return self.llm.complete([{"role": "user", "content": prompt}], max_tokens=self.settings.max_tokens).strip()

    @staticmethod
    def search_text(question: str, hypothetical: str) -> str:
        """What is searched on the second try."""
        return f"{question}\n{hypothetical}"
