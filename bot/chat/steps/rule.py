"""The rung of the knowledge folder's exact-match rules: a message a rule pins to an entry gets that entry's text."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from bot.chat.answer import Answer, Strategy
from bot.chat.generate import finish
from bot.chat.steps.base import Turn
from bot.knowledge.entries import Entry
from bot.knowledge.rules import RuleSet
from bot.search.base import Hit

log = logging.getLogger(__name__)

RULE_SEARCHER = "rule"  # the searcher a rule's hit names (the sources panel, the API's sources)


class RuleStep:
    """The first rule (bot/knowledge/rules.py) the message matches answers with its entry's text as written (the
    channel's variant when it has one): no search, no LLM. A regex that runs out of time is skipped and logged."""

    name = "rule"

    def __init__(self, rules: Callable[[], RuleSet], entries: Callable[[], list[Entry]], timeout: float):
        self.rules = rules
        self.entries = entries
        self.timeout = timeout  # seconds every regex rule together may take on one message

    def run(self, turn: Turn) -> Iterator[Answer]:
        """Answer with the matched rule's entry; pass when none matches (or its entry is outside the filter)."""
        found = self.rules().match(turn.question, self.timeout)
        for rule in found.timed_out:
            log.warning(
                "rule timed out and was skipped (regex rules get %g s per message together): %s",
                self.timeout,
                rule.describe(),
            )
        if found.rule is None:
            return
        entry = next((e for e in self.entries() if e.id == found.rule.entry_id), None)
        within = turn.base.within
        if entry is None or (within is not None and not within.admits(entry)):
            return  # the knowledge changed under the rule, or this page keeps to other categories
        hit = Hit(entry, 1.0, 1.0, RULE_SEARCHER)
        text = entry.document_for(turn.base.channel)
        answer = turn.replace(text=text, strategy=Strategy.RULE, hits=[hit], rule=found.rule)
        yield finish(answer, turn.timings, turn.start)
