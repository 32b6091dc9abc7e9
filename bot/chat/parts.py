"""What a Bot is assembled from besides its index and prompt (bot/factory.py builds them from the settings)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.chat.conversation import QueryRewriter
from bot.chat.dont_know import DontKnowDetector
from bot.chat.expensive import ExpensiveGate
from bot.chat.fallback import HydeFallback
from bot.chat.grading import RelevanceGrader
from bot.chat.negatives import NegativeExamples
from bot.chat.rewrite import MultiQueryRewrite
from bot.chat.splitter import QuestionSplitter
from bot.chat.steps.translate import Translator
from bot.conversations.popular import PopularEntries
from bot.knowledge.validity import Availability


@dataclass(frozen=True)
class TurnLimits:
    """How much work one turn may do: hits per search, the message, answer and searched text lengths, and the
    gate long messages queue at (``limits.*`` and ``retrieval.top_k``)."""

    top_k: int
    max_message_chars: int
    max_answer_chars: int
    max_search_chars: int | None = None
    expensive: ExpensiveGate | None = None


@dataclass(frozen=True)
class LLMSteps:
    """What the LLM does besides answering; each part is None without an LLM or when switched off."""

    hyde: HydeFallback | None = None
    rewriter: QueryRewriter | None = None  # follow-ups made standalone
    multi_query: MultiQueryRewrite | None = None  # the "rewrite" fallback step
    grader: RelevanceGrader | None = None
    translator: Translator | None = None  # the "translate" fallback step
    dont_know: DontKnowDetector | None = None  # tells a reply that declines to answer


@dataclass(frozen=True)
class KnowledgeAids:
    """What the knowledge adds to a search: splitting a message that asks several things, entries' negative
    examples, the most used entries (examples, "did you mean"), and which entries may answer today (drafts and
    entries outside their validity never do)."""

    splitter: QuestionSplitter | None = None
    negatives: NegativeExamples | None = None
    popular: PopularEntries | None = None
    availability: Availability = field(default_factory=Availability)
