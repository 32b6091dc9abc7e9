"""Multi-query rewrite, a fallback step: the LLM writes alternative phrasings of the question, each is searched."""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.chat.llm import ChatModel
from bot.config.settings import RewriteSettings
from bot.errors import LLMError
from bot.search.base import Found, Hit

log = logging.getLogger(__name__)

# "1. ", "2) ", "- ", "• ", "（1）", "Q1:" — list markers models put before each line.
_MARKER = re.compile(r"^\s*(?:[-*•·]+|[(（]?\d+[.)）、](?!\d)|[qQ]\d+[:：]|问题?\d*[:：])\s*")
_QUOTES = "\"'“”‘’「」`"


@dataclass(frozen=True)
class Rewrites:
    """The phrasings written for a question, the merged hits they found (each names its phrasing) and what answered
    each phrasing's search (its system, notices, a failure)."""

    phrasings: tuple[str, ...] = ()
    hits: list[Hit] = field(default_factory=list)
    found: tuple[Found, ...] = ()


def parse_phrasings(reply: str, question: str, count: int) -> list[str]:
    """Up to ``count`` distinct phrasings from the LLM's reply, one a line, list markers and quotes removed."""
    seen: list[str] = []
    limit = 4 * len(question) + 200  # a runaway line is not a phrasing
    for line in reply.splitlines():
        text = _MARKER.sub("", line).strip().strip(_QUOTES).strip()
        if not text or len(text) > limit or text.endswith((":", "：")):
            continue
        if text.casefold() != question.casefold() and text not in seen:
            seen.append(text)
        if len(seen) >= count:
            break
    return seen


def merge_by_entry(lists: Sequence[tuple[str, Sequence[Hit]]], top_k: int) -> list[Hit]:
    """One hit per entry with its best relevance over all lists, labelled with the phrasing that found it so."""
    best: dict[str, Hit] = {}
    for phrasing, hits in lists:
        for hit in hits:
            old = best.get(hit.entry.id)
            if old is None or hit.relevance > old.relevance:
                best[hit.entry.id] = dataclasses.replace(hit, subquestion=phrasing)
    return sorted(best.values(), key=lambda h: -h.relevance)[:top_k]


class MultiQueryRewrite:
    """Asks the LLM for ``count`` alternative phrasings in one call and searches each of them."""

    def __init__(self, llm: ChatModel, settings: RewriteSettings):
        self.llm = llm
        self.settings = settings

    def phrasings(self, question: str) -> list[str]:
        """The alternative phrasings of ``question`` (raises LLMError if the LLM fails)."""
        prompt = self.settings.template.format(question=question, count=self.settings.count)
        reply = self.llm.complete([{"role": "user", "content": prompt}], max_tokens=self.settings.max_tokens)
        return parse_phrasings(reply, question, self.settings.count)

    def run(
        self,
        question: str,
        find: Callable[[str], Found],
        top_k: int,
        timings: dict[str, float],
    ) -> Rewrites:
        """Write the phrasings and search each with ``find`` (the turn's one search call, which says what answered);
        nothing (a log line) if the LLM fails or writes none."""
        t = time.perf_counter()
        try:
            phrasings = self.phrasings(question)
        except LLMError as exc:
            log.warning("multi-query rewrite skipped: %s", exc)
            phrasings = []
        timings["rewrite_phrasings"] = (time.perf_counter() - t) * 1000
        if not phrasings:
            return Rewrites()
        t = time.perf_counter()
        found = [find(p) for p in phrasings]
        hits = merge_by_entry([(p, f.hits) for p, f in zip(phrasings, found, strict=True)], top_k)
        timings["retrieve_rewrite"] = (time.perf_counter() - t) * 1000
        return Rewrites(tuple(phrasings), hits, tuple(found))
