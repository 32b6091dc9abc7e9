"""The chat LLM: ``complete`` and ``stream`` over an OpenAI-compatible endpoint, and a cap on calls in flight."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

from bot.chat.reasoning import SHOWN_CHARS, ThinkFilter, Thought
from bot.config.settings import LLMSettings
from bot.errors import LLMError, LLMStreamBroken, LLMTimeoutError
from bot.messages import Message
from bot.openai_compat import Endpoint, advice, is_timeout, openai_client
from bot.texts import BUSY

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger(__name__)


class ChatModel(ABC):
    """A chat LLM: subclasses implement ``stream``; ``complete`` joins it."""

    name: str = "llm"
    # ``complete`` reads at most this many characters (None: all): text the bot reuses (HyDE, rewrites, grades)
    # must not cost more because an endpoint ignores max_tokens (limits.max_step_chars).
    max_chars: int | None = None

    @abstractmethod
    def stream(self, messages: Sequence[Message], max_tokens: int | None = None) -> Iterator[str]:
        """Yield the reply in pieces as they arrive; raise LLMError subclasses on failure."""

    def complete(self, messages: Sequence[Message], max_tokens: int | None = None) -> str:
        """The whole reply as one string, cut at ``max_chars`` (the stream is closed there, the rest never read)."""
        return read_capped(self.stream(messages, max_tokens=max_tokens), self.max_chars)


def read_capped(pieces: Iterator[str], max_chars: int | None) -> str:
    """The pieces joined, reading no further than ``max_chars`` characters (then the stream is closed)."""
    if max_chars is None:
        return "".join(p for p in pieces if not isinstance(p, Thought))
    out: list[str] = []
    size = 0
    for piece in pieces:
        if isinstance(piece, Thought):  # a reasoning model's thinking is never part of the text
            continue
        out.append(piece)
        size += len(piece)
        if size > max_chars:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()
            log.warning("LLM text cut at %d characters (the endpoint ignored max_tokens?)", max_chars)
            return "".join(out)[:max_chars]
    return "".join(out)


class OpenAIChat(ChatModel):
    """Any OpenAI-compatible chat endpoint (OpenAI, DeepSeek, Qwen, vLLM, Ollama) through the ``openai`` package."""

    def __init__(self, settings: LLMSettings, api_key: str):
        """The endpoint, model and budgets of the ``llm`` block; ``api_key`` read from its environment variable."""
        self.base_url = settings.base_url
        self.model = settings.model
        self.name = settings.model
        self.temperature = settings.temperature
        self.max_tokens = settings.max_tokens
        self.timeout = settings.timeout
        self.max_reasoning_chars = settings.max_reasoning_chars
        self.endpoint = Endpoint(
            settings.base_url, settings.model, settings.timeout, settings.max_retries, settings.api_key_env, "llm"
        )
        self._client = openai_client(self.endpoint, api_key)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIChat(base_url={self.base_url!r}, model={self.model!r})"

    def _translate(self, exc: Exception) -> LLMError:
        text = advice(exc, self.endpoint, "the LLM")
        return LLMTimeoutError(text) if is_timeout(exc) else LLMError(text)

    def stream(self, messages: Sequence[Message], max_tokens: int | None = None) -> Iterator[str]:
        """Stream the reply over SSE; a break after some text raises LLMStreamBroken carrying that text."""
        import openai

        try:
            response = self._client.chat.completions.create(
                model=self.model,
                # our {"role", "content"} dicts are the SDK's message TypedDicts, which a plain dict type cannot express
                messages=cast("list[ChatCompletionMessageParam]", list(messages)),
                temperature=self.temperature,
                max_tokens=max_tokens or self.max_tokens,
                stream=True,
            )
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        try:
            yield from self._answer(response)
        finally:
            response.close()

    def _answer(self, response) -> Iterator[str]:
        """The content pieces of ``response`` without reasoning; an empty answer is an error, not a blank bubble."""
        received: list[str] = []
        think = ThinkFilter()
        reasoning = shown = 0  # characters of reasoning_content (or reasoning) seen; of thinking passed on
        try:
            for chunk in response:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                separate = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None) or ""
                reasoning += len(separate)
                piece = think.feed(delta.content or "")
                thought = (separate + think.take_thought())[: max(0, SHOWN_CHARS - shown)]
                if thought:  # for the sources panel, folded; never answer text
                    shown += len(thought)
                    yield Thought(thought)
                if reasoning + think.reasoning_chars > self.max_reasoning_chars:
                    raise LLMError(
                        f"the LLM at {self.base_url} (model {self.model}) thought for over "
                        f"{self.max_reasoning_chars} characters; raise llm.max_reasoning_chars or llm.timeout"
                    )
                if piece:
                    received.append(piece)
                    yield piece
            piece = think.finish()
        except LLMError as exc:
            if received:
                raise LLMStreamBroken(f"the answer stream broke: {exc}", "".join(received)) from exc
            raise
        except Exception as exc:  # httpx read errors, timeouts, malformed SSE mid-answer
            err = self._translate(exc)
            if received:
                raise LLMStreamBroken(f"the answer stream broke: {err}", "".join(received)) from exc
            raise err from exc
        if piece:
            received.append(piece)
            yield piece
        if not received:
            thought = reasoning + think.reasoning_chars
            where = f"the LLM at {self.base_url} (model {self.model})"
            if thought:
                raise LLMError(f"{where} reasoned ({thought} characters) but gave no answer; raise llm.max_tokens")
            kind = response.response.headers.get("content-type", "?")
            raise LLMError(
                f"{where} answered HTTP {response.response.status_code} ({kind}) without any answer text; is "
                "llm.base_url the API (it usually ends in /v1), not a web page or a proxy's error page?"
            )


class BoundedChatModel(ChatModel):
    """A ChatModel with at most ``limit`` calls in flight; a call that waits longer than ``wait`` s fails as a timeout.

    The slot is held while the reply streams and released when the stream ends, fails or is closed, so slow calls
    queue here instead of starving every worker, and the waiting caller degrades like any LLM failure.
    """

    def __init__(self, inner: ChatModel, limit: int, wait: float, max_chars: int | None = None):
        """``max_chars``: what :meth:`complete` reads at most (ChatModel.max_chars)."""
        self.inner = inner
        self.max_chars = max_chars
        self.name = inner.name
        self.limit = limit
        self.wait = wait
        self._slots = threading.BoundedSemaphore(limit)

    def __repr__(self) -> str:
        return f"BoundedChatModel({self.inner!r}, limit={self.limit})"

    def stream(self, messages: Sequence[Message], max_tokens: int | None = None) -> Iterator[str]:
        """The inner model's stream, once a slot is free (LLMTimeoutError after ``wait`` s)."""
        if not self._slots.acquire(timeout=self.wait):
            raise LLMTimeoutError(BUSY.format(limit=self.limit, waited=self.wait))
        try:
            yield from self.inner.stream(messages, max_tokens=max_tokens)
        finally:
            self._slots.release()
