"""Outcomes: whether visitors got what they came for, judged from the conversation log.

Definitions (docs/operating.md "Outcomes"):

- An answer **from the knowledge** is a turn whose strategy is direct, verbatim, rewrite, translate or chosen
  (clarify, confirm, small talk, fallbacks and hand-offs are not).
- Such an answer is **resolved** unless, in the same conversation and within ``window_minutes``, the visitor asks
  the same thing again (a later question sharing ``reask_similarity`` of its character bigrams), gives it a thumbs
  down or answers "no" to "was this solved?", asks for a person (a hand-off turn), or says it did not help
  ("没用", "不对", "didn't help" ...).
- A **conversation** is the turns of one session; a turn without a session (a single API exchange) is its own.
  Conversations of small talk only count in none of the rates. One is *answered* when the bot answered from the
  knowledge at least once, *resolved* when it was answered and its last answer from the knowledge is resolved,
  *handed off* when a person was asked for (the desk records a hand-off turn for every ticket), and *deflected*
  (独立接待) when it was not handed off.
- The **solved yes-rate** is yes / (yes + no) over the answers to "这个回答解决您的问题了吗？" (a yes is stored as a
  thumbs up with the reason 已解决, a no as a thumbs down with 未解决: it is a miss in the Unanswered inbox).

A conversation counts on the day (UTC) of its first turn in the filtered range.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.config.base import default_of
from bot.config.operating import OutcomeSettings
from bot.conversations.inbox import bigrams, jaccard, normalise, strategy_name
from bot.conversations.log_store import ConversationLog
from bot.conversations.tiles import StatsFilter, Tile
from bot.texts import DOWN_REASONS, NOT_SOLVED_REASON, SOLVED_REASON

KNOWLEDGE_ANSWERS = frozenset({"direct", "verbatim", "rewrite", "translate", "chosen"})
HANDOFFS = frozenset({"handoff", "held"})
SMALL_TALK = frozenset({"chitchat", "refused"})
# Labels older pages stored as reasons, and the fixed reason each counts as now.
LEGACY_REASONS = {"不相关 / Irrelevant": "not_asked", "错误 / Wrong": "wrong"}
REASON_CODES = ("wrong", "outdated", "not_asked", "incomplete", "other", "not_solved", "unspecified")
# What a visitor types to say an answer did not help (compared in the inbox's normal form, short messages only).
DID_NOT_HELP = tuple(
    normalise(p)
    for p in (
        "没用",
        "没有用",
        "没帮助",
        "没有帮助",
        "不对",
        "不是这个",
        "答非所问",
        "没解决",
        "没有解决",
        "不是我要的",
        "not helpful",
        "didn't help",
        "did not help",
        "doesn't help",
        "wrong answer",
        "not what i asked",
    )
)
AROUND = 4  # characters besides the phrase ("这个没用啊") that a mere "that did not help" may have


def reason_code(reason: str | None, rating: int | None = -1) -> str | None:
    """The fixed reason a stored thumbs down counts under (None for a thumbs up or no rating).

    One of :data:`REASON_CODES`; free text the visitor typed is "other", a thumbs down without a reason "unspecified".
    """
    if rating != -1:
        return None
    text = (reason or "").strip()
    if not text:
        return "unspecified"
    if text.startswith(NOT_SOLVED_REASON):
        return "not_solved"
    for code, label in DOWN_REASONS:
        if text.startswith(label):
            return code
    return next((code for label, code in LEGACY_REASONS.items() if text.startswith(label)), "other")


def asks_solved(policy: str, long_answer_chars: int, strategy: str, text: str | None) -> bool:
    """True when "was this solved?" follows this answer (``feedback.ask_solved``: off, every, long)."""
    if policy == "off" or strategy_name(strategy) not in KNOWLEDGE_ANSWERS:
        return False
    return policy == "every" or len(text or "") >= long_answer_chars


def says_it_did_not_help(norm: str) -> bool:
    """True when a (normalised) message is a short "that did not help"."""
    return any(p in norm and len(norm) - len(p) <= AROUND for p in DID_NOT_HELP)


@dataclass(frozen=True)
class TurnFacts:
    """What the outcome of a turn depends on, read from the log."""

    id: int
    time: datetime
    session: str | None
    norm: str
    strategy: str
    rating: int | None
    reason: str | None
    entries: tuple[str, ...] = ()  # the entries its answer used

    @property
    def conversation(self) -> str:
        """The conversation it belongs to: its session, or itself alone."""
        return self.session if self.session is not None else f"turn:{self.id}"

    @property
    def from_knowledge(self) -> bool:
        """True for an answer from the knowledge."""
        return self.strategy in KNOWLEDGE_ANSWERS


@dataclass(frozen=True)
class AnswerOutcome:
    """How one answer from the knowledge went: what followed it within the window, and whether it was resolved."""

    turn: TurnFacts
    reasked: bool
    thumbs_down: bool
    not_solved: bool
    handoff_after: bool
    said_no: bool

    @property
    def resolved(self) -> bool:
        """True when nothing after it says the visitor did not get what they came for."""
        return not (self.reasked or self.thumbs_down or self.handoff_after or self.said_no)


@dataclass(frozen=True)
class ConversationOutcome:
    """One conversation's outcome (``day``: UTC date of its first turn)."""

    key: str
    day: str
    answered: bool
    resolved: bool
    handed_off: bool


@dataclass(frozen=True)
class Judge:
    """Judges answers and conversations by the definitions above (``log.outcomes``)."""

    window_minutes: float = default_of(OutcomeSettings, "window_minutes")
    reask_similarity: float = default_of(OutcomeSettings, "reask_similarity")

    def answers(self, turns: Iterable[TurnFacts]) -> list[AnswerOutcome]:
        """The outcome of every answer from the knowledge among ``turns`` (any order)."""
        window = timedelta(minutes=self.window_minutes)
        out = []
        for conv in _by_conversation(turns).values():
            for i, t in enumerate(conv):
                if not t.from_knowledge:
                    continue
                later = [u for u in conv[i + 1 :] if u.time - t.time <= window]
                asked = bigrams(t.norm)
                code = reason_code(t.reason, t.rating)
                out.append(
                    AnswerOutcome(
                        t,
                        reasked=any(jaccard(asked, bigrams(u.norm)) >= self.reask_similarity for u in later),
                        thumbs_down=t.rating == -1,
                        not_solved=code == "not_solved",
                        handoff_after=any(u.strategy in HANDOFFS for u in later),
                        said_no=any(says_it_did_not_help(u.norm) for u in later),
                    )
                )
        return out

    def conversations(
        self, turns: Sequence[TurnFacts], answers: Sequence[AnswerOutcome] | None = None
    ) -> list[ConversationOutcome]:
        """Every conversation's outcome, but those of small talk only."""
        answers = self.answers(turns) if answers is None else answers
        last: dict[str, AnswerOutcome] = {}
        for a in sorted(answers, key=lambda a: (a.turn.time, a.turn.id)):
            last[a.turn.conversation] = a
        out = []
        for key, conv in _by_conversation(turns).items():
            if all(t.strategy in SMALL_TALK for t in conv):
                continue
            final = last.get(key)
            out.append(
                ConversationOutcome(
                    key,
                    conv[0].time.date().isoformat(),
                    answered=final is not None,
                    resolved=final is not None and final.resolved,
                    handed_off=any(t.strategy in HANDOFFS for t in conv),
                )
            )
        return out


def _by_conversation(turns: Iterable[TurnFacts]) -> dict[str, list[TurnFacts]]:
    groups: dict[str, list[TurnFacts]] = defaultdict(list)
    for t in turns:
        groups[t.conversation].append(t)
    for conv in groups.values():
        conv.sort(key=lambda t: (t.time, t.id))
    return groups


def read_turns(log: ConversationLog, flt: StatsFilter) -> list[TurnFacts]:
    """The turns ``flt`` selects, with the entries each answer used."""
    where, args = flt.where("t.")
    used: dict[int, list[str]] = defaultdict(list)
    for turn_id, entry in log.query(
        f"SELECT u.turn_id, u.entry_id FROM used u JOIN turns t ON t.id = u.turn_id WHERE {where}", args
    ):
        used[int(turn_id)].append(entry)
    rows = log.query(
        f"SELECT t.id, t.time, t.session, t.norm, t.strategy, t.rating, t.reason FROM turns t WHERE {where}", args
    )
    return [
        TurnFacts(
            int(i),
            datetime.fromisoformat(time),
            session,
            norm or "",
            strategy_name(strategy),
            rating,
            reason,
            tuple(sorted(used.get(int(i), ()))),
        )
        for i, time, session, norm, strategy, rating, reason in rows
    ]


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _series(name: str, title: str, what: str, days: dict[str, tuple[int, int]]) -> Tile:
    rows = tuple((d, n, k, _rate(k, n)) for d, (n, k) in sorted(days.items()))
    total_n, total_k = sum(n for n, _ in days.values()), sum(k for _, k in days.values())
    return Tile(
        name,
        title,
        ("day", "conversations", what, "rate"),
        rows,
        total=("total", total_n, total_k, _rate(total_k, total_n)),
    )


def outcome_tiles(
    turns: Sequence[TurnFacts], judge: Judge, answers: Sequence[AnswerOutcome] | None = None
) -> tuple[Tile, ...]:
    """The outcome tiles over ``turns``: resolution, answered, hand-off and solved yes-rates per day, and reasons.

    ``answers``: their judged answers, when already at hand.
    """
    answers = judge.answers(turns) if answers is None else answers
    convs = judge.conversations(turns, answers)
    per_day: dict[str, Counter] = defaultdict(Counter)
    for c in convs:
        day = per_day[c.day]
        day["n"] += 1
        day["answered"] += c.answered
        day["resolved"] += c.resolved
        day["handed_off"] += c.handed_off

    def series(what: str) -> dict[str, tuple[int, int]]:
        return {d: (c["n"], c[what]) for d, c in per_day.items()}

    solved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    reasons: Counter = Counter()
    for t in turns:
        code = reason_code(t.reason, t.rating)
        if code is not None:
            reasons[code] += 1
        if code == "not_solved" or (t.rating == 1 and (t.reason or "").startswith(SOLVED_REASON)):
            replied = solved[t.time.date().isoformat()]
            replied[0] += 1
            replied[1] += code != "not_solved"
    replies, yes = sum(v[0] for v in solved.values()), sum(v[1] for v in solved.values())
    downs = sum(reasons.values())
    return (
        _series(
            "resolution_rate",
            "解决率（每个对话）/ Resolution rate (per conversation)",
            "resolved",
            series("resolved"),
        ),
        _series(
            "answered_rate",
            "知识库作答率（每个对话）/ Answered from the knowledge (per conversation)",
            "answered",
            series("answered"),
        ),
        _series(
            "handoff_rate",
            "转人工率（每个对话；1 − 独立接待率）/ Hand-off rate (per conversation; 1 − deflection)",
            "handed_off",
            series("handed_off"),
        ),
        Tile(
            "solved_yes_rate",
            '“解决了吗”答“是”的比例 / "Was this solved?" yes-rate',
            ("day", "replies", "yes", "rate"),
            tuple((d, n, y, _rate(y, n)) for d, (n, y) in sorted(solved.items())),
            total=("total", replies, yes, _rate(yes, replies)),
        ),
        Tile(
            "down_reasons",
            "点踩原因 / Thumbs-down reasons",
            ("reason", "turns", "share"),
            tuple((code, reasons[code], _rate(reasons[code], downs)) for code in REASON_CODES if reasons[code]),
        ),
    )
