"""Settings of the admin's week: outcomes, the "was this solved?" question, topics, replays, publishers.

What counts as a resolved conversation, the question after answers, topics of questions, the replay of real
questions before an edit goes live, and who may publish.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bot.config.base import Strict
from bot.config.handoff import AgentAccount


class FeedbackSettings(Strict):
    """What visitors are asked about answers besides the thumbs (docs/operating.md "Outcomes")."""

    ask_solved: Literal["off", "every", "long"] = "off"
    """After an answer from the knowledge, ask "这个回答解决您的问题了吗？ 是 / 否" on the chat page and in the widget:
    off, after every such answer, or only after answers of at least ``long_answer_chars`` characters. A "no" is a miss in the
    Unanswered inbox; the yes-rate is ``solved_yes_rate`` on the analytics page."""
    long_answer_chars: int = Field(default=200, ge=1)
    """The length from which an answer is long (``ask_solved: long``)."""


class OutcomeSettings(Strict):
    """How a conversation's outcome is judged from the log (docs/operating.md "Outcomes")."""

    window_minutes: float = Field(default=30.0, gt=0)
    """An answer from the knowledge is resolved unless, within this many minutes and in the same conversation, the
    visitor asks the same thing again, gives a thumbs down, asks for a person, or says it did not help."""
    reask_similarity: float = Field(default=0.5, gt=0, le=1)
    """A later question is "the same thing again" when it shares at least this share of character bigrams
    (Jaccard) with the answered one."""


class TopicSettings(Strict):
    """Topics: the questions of a period grouped by meaning (e5 vectors, scikit-learn's agglomerative clustering)."""

    distance: float = Field(default=0.015, gt=0, lt=2)
    """Questions whose groups are closer than this cosine distance (average linkage) form one topic
    (BENCHMARKS.md "Topics": chosen on one LCQMC half, measured on the other)."""
    min_questions: int = Field(default=20, ge=2)
    """With fewer distinct questions than this in the period, no topics are formed (the page says so)."""
    max_questions: int = Field(default=100_000, ge=100)
    """At most this many distinct questions (the most asked) are grouped; the rest are counted as skipped."""
    encode_seconds: float = Field(default=15.0, gt=0)
    """New questions are embedded (e5, about 45 a second per core) for at most this long per page view or ``log
    stats``; the rest wait for the next one (the tile says how many). Embedded questions are kept."""


class ReplaySettings(Strict):
    """The replay of real questions against an edited knowledge before it goes live (docs/operating.md)."""

    days: int = Field(default=14, ge=1)
    """The distinct questions of the last this many days of the conversation log are replayed."""
    max_questions: int = Field(default=10_000, ge=1)
    """At most this many distinct log questions (the newest) are replayed; the rest are counted as skipped. Every
    question of every test set is replayed as well."""


class PublisherAccount(AgentAccount):
    """One named publisher (``knowledge.require_approval``): a name and a password hash."""

    name: str
    """The publisher's login name at /publisher/login."""
    password_hash: str
    """``python -m bot handoff hash-password`` prints it (scrypt; the password itself is never stored)."""
