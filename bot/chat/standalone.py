"""Follow-up questions: rewrite them into standalone questions (LLM), or combine with the last question."""

from __future__ import annotations

from bot.chat.llm import ChatModel
from bot.chat.prompt import normalize_history
from bot.config.settings import PromptSettings, default_of
from bot.messages import History


def last_user_message(history: History | None) -> str | None:
    """The most recent user message in ``history``, if any."""
    for message in reversed(normalize_history(history, 1000)):
        if message["role"] == "user":
            return message["content"]
    return None


class QueryRewriter:
    """Asks the LLM to turn a follow-up ("那珠海校区呢？") into a standalone question for retrieval."""

    def __init__(
        self,
        llm: ChatModel,
        template: str,
        max_turns: int = default_of(PromptSettings, "max_history_turns"),
        max_tokens: int = 100,
    ):
        self.llm = llm
        self.template = template
        self.max_turns = max_turns
        self.max_tokens = max_tokens

    def rewrite(self, question: str, history: History) -> str:
        """The standalone question (raises LLMError if the LLM fails; the caller keeps the original)."""
        turns = normalize_history(history, self.max_turns)
        if not turns:
            return question
        transcript = "\n".join(f"{m['role']}: {m['content'][:500]}" for m in turns)
        prompt = self.template.format(history=transcript, question=question)
        rewritten = self.llm.complete([{"role": "user", "content": prompt}], max_tokens=self.max_tokens).strip()
        # Models sometimes echo a label or quotes; a blank or runaway reply is worse than the original.
        rewritten = rewritten.splitlines()[0].strip().strip('"“”') if rewritten else ""
        return rewritten if 0 < len(rewritten) <= 4 * len(question) + 200 else question
