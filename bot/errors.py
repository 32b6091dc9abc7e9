"""The project's own errors: each message says what went wrong and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


class BotError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(BotError):
    """config.yaml is missing, malformed or holds an unknown key."""


@dataclass(frozen=True)
class KnowledgeProblem:
    """One bad entry (or file) in the knowledge folder."""

    file: str
    entry: str | None
    problem: str

    def __str__(self) -> str:
        where = self.file if self.entry is None else f"{self.file} entry {self.entry!r}"
        return f"{where}: {self.problem}"


class KnowledgeError(BotError):
    """The knowledge folder holds one or more invalid entries; lists every one of them."""

    def __init__(self, problems: list[KnowledgeProblem]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"{len(self.problems)} problem(s) in the knowledge files; fix them and the index "
            f"updates on the next message (the last good index keeps serving meanwhile):\n{lines}"
        )


class SearchBackendError(BotError):
    """A search backend failed (index unreadable, server unreachable, ...)."""


class LLMError(BotError):
    """The LLM endpoint failed; the message says what to check."""


class LLMTimeoutError(LLMError):
    """The LLM did not answer within llm.timeout."""


class LLMStreamBroken(LLMError):
    """The LLM stream stopped mid-answer; ``partial`` holds what arrived before the break."""

    def __init__(self, message: str, partial: str):
        super().__init__(message)
        self.partial = partial
