"""Limits shared by the browser app and the API: LLM calls in flight, and the configured chat rate."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from bot.chat.llm import ChatModel, Message
from bot.config.settings import Settings
from bot.errors import LLMTimeoutError
from bot.texts import BUSY


def chat_per_minute(settings: Settings) -> int:
    """Chat messages per client and minute: the deprecated ``ui.rate_limit_per_minute`` when set, else ``limits``."""
    old = settings.ui.rate_limit_per_minute
    return old if old is not None else settings.limits.chat_per_minute


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
