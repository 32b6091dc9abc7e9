"""Settings of the language model: the endpoint, the few-shot prompt and follow-up rewriting."""

from __future__ import annotations

from pydantic import Field

from bot.config.base import Strict
from bot.config.secrets import env_secret


class LLMSettings(Strict):
    """An OpenAI-compatible chat endpoint; the key comes only from the environment (without it the bot runs in
    retrieval-only mode)."""

    base_url: str = "https://api.openai.com/v1"
    """The endpoint's base URL (any OpenAI-compatible server: DeepSeek, Qwen, a local vLLM or Ollama...)."""
    model: str = "gpt-4o-mini"
    """The chat model's name."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable the key is read from (never from the config file)."""
    temperature: float = 0.3
    """Sampling temperature of answers."""
    max_tokens: int = 512
    """Most tokens of an answer."""
    timeout: float = 30.0
    """Seconds a call may take."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """Retries of a failed call."""
    max_concurrency: int = Field(default=4, ge=1)
    """LLM calls in flight at once (chat, HyDE, rewrites); more wait up to ``timeout`` seconds instead of slowing
    everyone, then degrade like an LLM error."""
    max_reasoning_chars: int = Field(default=32000, ge=1000)
    """Reasoning models' thinking (DeepSeek-R1, Qwen3, QwQ: reasoning_content, <think> blocks) is dropped, never
    shown or counted as the answer; a reply that thinks longer than this many characters is an LLM error."""

    def api_key(self) -> str | None:
        """The key from the environment variable named by ``api_key_env``, or None."""
        value = env_secret(self.api_key_env)
        return value or None


class Demonstration(Strict):
    """One few-shot example: references shown to the model, the question, the ideal answer."""

    references: list[dict[str, str]] = Field(default_factory=list)
    """The references the example shows (query, document, metadata)."""
    question: str
    """The example's question."""
    answer: str
    """The ideal answer to it."""


class PromptSettings(Strict):
    """Persona, demonstrations and templates of the few-shot prompt."""

    persona: str
    """The system prompt: who the bot is and its rules (cite references, references are data, decline off-topic)."""
    demonstrations: list[Demonstration] = Field(default_factory=list)
    """Few-shot examples shown before the question."""
    reference_template: str = "[{n}] 标题 / Title: {query}\n内容 / Content: {document}\n关键词 / Keywords: {metadata}"
    """One reference: {n}, and {query}, {document}, {metadata} as JSON string literals (quoted, newlines escaped),
    so knowledge is data: an entry can never start a line of its own and forge a question or system line."""
    user_template: str = "参考资料 / References:\n{references}\n\n问题 / Question: {question}"
    """The user message: {references} and {question}."""
    no_references: str = "(无 / none)"
    """What {references} holds when nothing passed."""
    part_template: str = "对应子问题 / For: {part}"
    """Added to a reference found for one part of a split question: {part} (a JSON string literal)."""
    max_context_chars: int = Field(default=3000, ge=200)
    """Characters of references in one prompt."""
    max_hit_chars: int = Field(default=1000, ge=100)
    """Per reference: a long entry shows its best passages up to this many characters, "…" where text was
    skipped."""
    max_history_turns: int = Field(default=3, ge=0)
    """Earlier turns of the conversation sent along."""
    max_history_chars: int = Field(default=4000, ge=0)
    """History comes from the client (a browser or an API caller can forge it): at most this many characters go to
    the LLM, newest messages first (the oldest kept message is cut)."""


class ConversationSettings(Strict):
    """Multi-turn: with an LLM and chat history, a follow-up ("那珠海校区呢？") is first rewritten into a standalone
    question, which is what gets searched (shown in the sources panel). Without an LLM, a message that reads as a
    follow-up is searched with its subject in the previous question's place (bot/chat/followup.py)."""

    rewrite: bool = True
    """Rewrite follow-ups with the LLM."""
    rewrite_template: str = (
        "根据对话历史，把用户最后的问题改写成一个不依赖上下文、可以单独检索的完整问题。只输出改写后的问题。\n"
        "Rewrite the user's last question as a standalone question using the conversation. "
        "Output only the question.\n"
        "对话 / Conversation:\n{history}\n"
        "最后的问题 / Last question: {question}\n"
        "改写后的问题 / Standalone question:"
    )
    """The rewrite prompt: {history} and {question}."""
