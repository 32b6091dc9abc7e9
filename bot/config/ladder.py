"""Settings of the decision ladder and the fallback chain: small talk, splitting, rewrites, last resort (the
hand-off's are in bot/config/handoff.py)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Strict, check_template


class HydeSettings(Strict):
    """HyDE: the LLM writes a hypothetical answer that is searched together with the question."""

    template: str
    """The HyDE prompt: {question}."""
    max_tokens: int = 200
    """Most tokens of the hypothetical answer."""


DEFAULT_TRANSLATE_TEMPLATE = (
    "Translate the question into {language}. Reply with the translation only, on one line.\nQuestion: {question}"
)


class TranslateSettings(Strict):
    """The translate step: a question in another language than the knowledge's (English on a Chinese knowledge
    base) is translated by the LLM and the translation searched."""

    template: str = DEFAULT_TRANSLATE_TEMPLATE
    """The translation prompt: {question} and {language}."""
    max_tokens: int = Field(default=120, ge=10)
    """Most tokens of the translation."""

    @field_validator("template")
    @classmethod
    def _fields(cls, value: str) -> str:
        return check_template(value, question="q", language="l")


class LastResortSettings(Strict):
    """What the bot says when no knowledge matched."""

    mode: Literal["fixed", "llm"] = "fixed"
    """fixed = ``reply`` (plus "did you mean" suggestions); llm = the LLM alone, with ``notice`` shown first."""
    reply: str
    """The fixed reply."""
    notice: str
    """Shown before an answer from the LLM alone (mode llm)."""
    suggestions: int = Field(default=3, ge=0, le=10)
    """"Did you mean" options offered with the fixed reply."""
    suggestions_source: Literal["candidates", "popular", "both"] = "candidates"
    """"Did you mean" options: the closest entries (candidates), the most used ones (popular, from the conversation
    log), or both (the closer half of the slots, then popular ones, then the other closest)."""
    suggestions_reach: float = Field(default=0.35, ge=0, le=1)
    """A close entry is offered as "did you mean" only when its relevance reaches this share of the answer
    threshold; further ones are unrelated (an entry at a fifth of the cut shared one word), and no suggestion beats
    a wrong one. 0 offers the closest whatever their relevance. Popular entries are offered as before."""


DEFAULT_REWRITE_TEMPLATE = (
    "用{count}种不同的说法改写下面的问题，便于检索；每行一个，只输出改写后的问题。\n"
    "Rephrase the question below in {count} different ways for a search; one per line, output only the questions.\n"
    "问题 / Question: {question}"
)


class RewriteSettings(Strict):
    """Multi-query rewrite: the LLM writes up to ``count`` other phrasings of the question in one call; each is
    searched, the hits merged by entry (best relevance), and passing ones answer (strategy "rewrite")."""

    count: int = Field(default=3, ge=1, le=10)
    """Phrasings asked for."""
    template: str = DEFAULT_REWRITE_TEMPLATE
    """The rewrite prompt: {question} and {count}; the reply is read one phrasing per line (list markers and quotes
    removed)."""
    max_tokens: int = Field(default=200, ge=20)
    """Most tokens of the reply."""

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        return check_template(value, question="", count=3)


FALLBACK_STEPS = ("translate", "rewrite", "hyde", "last_resort")


def _unique_known(value: list[str], known: tuple[str, ...], what: str) -> list[str]:
    """``value`` when every step is one of ``known`` and none repeats, else a ValueError naming them."""
    unknown = [step for step in value if step not in known]
    if unknown:
        raise ValueError(f"unknown {what} step(s) {', '.join(map(repr, unknown))}; use: {', '.join(known)}")
    repeated = sorted({step for step in value if value.count(step) > 1})
    if repeated:
        raise ValueError(f"{what} step(s) {', '.join(repeated)} listed more than once")
    return value


class FallbackSettings(Strict):
    """The ordered fallback chain run when no hit passes the threshold."""

    chain: list[str] = Field(default_factory=lambda: ["translate", "hyde", "last_resort"])
    """Steps in order, each at most once: translate, rewrite, hyde, last_resort (anything after last_resort is
    never reached). translate, rewrite and hyde need an LLM and are skipped without one."""
    translate: TranslateSettings = Field(default_factory=TranslateSettings)
    rewrite: RewriteSettings = Field(default_factory=RewriteSettings)
    hyde: HydeSettings
    last_resort: LastResortSettings

    @field_validator("chain")
    @classmethod
    def _steps(cls, value: list[str]) -> list[str]:
        return _unique_known(value, FALLBACK_STEPS, "fallback")


# The rungs before the fallback chain, in order: a reply to the previous clarify/confirm question, a request for a
# person, small talk, close candidates, the answer, a near miss.
LADDER_STEPS = ("choice", "handoff", "chitchat", "clarify", "answer", "confirm")


class LadderSettings(Strict):
    """The decision ladder before the fallback chain (bot/chat/steps/): which rungs run, in which order.
    docs/retrieval-and-decision.md "The decision ladder"."""

    steps: list[str] = Field(default_factory=lambda: list(LADDER_STEPS))
    """Rungs in order: a reply to the previous clarify/confirm question (choice), a request for a person (handoff),
    small talk (chitchat), close candidates (clarify), the answer (answer, required), a near miss (confirm)."""
    max_options: int = Field(default=3, ge=2, le=9)
    """At most this many entries are offered by a clarify question (and by a near miss's "我不太确定，您是想问：")."""
    dont_know_patterns: list[str] = Field(default_factory=list)
    """Extra regular expressions (case-insensitive) for an LLM reply that says it cannot answer from the references;
    such a reply is a miss and the ladder goes on (bot/chat/dont_know.py has the shipped ones)."""

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: list[str]) -> list[str]:
        _unique_known(value, LADDER_STEPS, "ladder")
        if "answer" not in value:
            raise ValueError("ladder.steps must include 'answer' (the rung that answers from the knowledge)")
        return value

    @field_validator("dont_know_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"dont_know_patterns: {pattern!r} is not a regular expression: {exc}") from None
        return value


class SplittingSettings(Strict):
    """Messages that ask several things ("图书馆几点开门，食堂在哪里？") are searched as a whole and as each part; the
    results are merged."""

    enabled: bool = True
    """Split messages into parts."""
    conjunctions: list[str] = Field(default_factory=lambda: ["还有", "以及", "另外", "顺便问一下", "and also"])
    """Words that join two questions."""
    min_part_chars: int = Field(default=3, ge=1)
    """Shorter parts are not searched on their own."""
    max_parts: int = Field(default=4, ge=2)
    """Most parts searched."""


class ChitChatSettings(Strict):
    """Small talk ("你好", "谢谢", "你是机器人吗") answered with a fixed persona reply before the knowledge is searched,
    only when the WHOLE message is small talk (bot/chat/chitchat.py; ~100 scenarios in bot/chat/data/chitchat.json)."""

    enabled: bool = True
    """Answer small talk."""
    threshold: float = Field(default=0.78, ge=0.0, le=1.0)
    """Score in [0, 1] a whole message needs to be read as small talk (1 = a known phrasing, less = a typo of one).
    Calibrated on tests/data/chitchat_labelled.jsonl, split "train"; checked on its "heldout" split."""
    path: str | None = None
    """A JSON file of {scenario: {"reply": ..., "phrasings": [...]}} used instead of the shipped one (null =
    shipped); relative to the config file."""
    replies: dict[str, str] = Field(default_factory=dict)
    """Per-scenario reply overrides, e.g. ``greeting: "你好！我是XX大学的校园助手。"``; "" turns that scenario off."""
