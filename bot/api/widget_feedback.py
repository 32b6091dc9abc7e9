"""The widget's 👍 / 👎 (with the page's fixed 👎 reasons) and its "这个回答解决您的问题了吗？ 是 / 否", stored on the
widget's own turn in the conversation log the page's go to.

A widget reply names its recorded turn; a rating names it back with the widget's session, and is stored only when
that turn was asked from the widget in that same session (the session is the conversation's secret): no page can
rate turns it did not ask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.chat.answer import Answer
from bot.chat.recorder import TurnRecorder, with_reason
from bot.config.operating import FeedbackSettings
from bot.conversations.outcomes import asks_solved
from bot.texts import ASK_SOLVED, DOWN_REASONS, SOLVED_NO, SOLVED_YES, THANKS

MAX_REASON_CHARS = 500  # what a visitor may type after a thumbs down
REASONS = dict(DOWN_REASONS)


@dataclass(frozen=True)
class Rating:
    """One widget rating: a thumbs up or down (with a fixed reason and text), or a reply to "was this solved?"."""

    session: str
    token: str
    turn: int
    up: bool | None = None  # a thumbs up (True) or down (False); None: a reply to "was this solved?"
    reason: str | None = None  # the key of a fixed 👎 reason (DOWN_REASONS)
    text: str = ""  # what the visitor typed after a thumbs down
    solved: bool | None = None


def feedback_offer(answer: Answer, settings: FeedbackSettings) -> dict[str, Any] | None:
    """What a widget reply offers to rate: its turn, the fixed 👎 reasons and, when the setting asks for it, the
    "was this solved?" question (None: the turn was not recorded, nothing to rate)."""
    if answer.turn_id is None:
        return None
    ask = asks_solved(settings.ask_solved, settings.long_answer_chars, answer.strategy.value, answer.text)
    return {
        "turn": answer.turn_id,
        "reasons": [{"key": key, "label": label} for key, label in DOWN_REASONS],
        "solved": {"question": ASK_SOLVED, "yes": SOLVED_YES, "no": SOLVED_NO} if ask else None,
        "thanks": THANKS,
    }


def parse_rating(data: dict[str, Any], session: str, token: str) -> Rating:
    """The rating of a ``/widget/feedback`` request's object, or ValueError saying what is wrong."""
    turn = data.get("turn")
    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
        raise ValueError("'turn' must be the positive integer a reply's 'feedback.turn' gave")
    rating, solved = data.get("rating"), data.get("solved")
    if (rating is None) == (solved is None):
        raise ValueError("send either 'rating' ('up' or 'down') or 'solved' (true or false)")
    if solved is not None:
        if not isinstance(solved, bool):
            raise ValueError("'solved' must be true or false")
        return Rating(session, token, turn, solved=solved)
    if rating not in ("up", "down"):
        raise ValueError("'rating' must be 'up' or 'down'")
    reason, text = data.get("reason"), data.get("text") or ""
    if reason is not None and (rating == "up" or reason not in REASONS):
        raise ValueError(f"'reason' goes with a thumbs down and is one of: {', '.join(REASONS)}")
    if not isinstance(text, str) or len(text) > MAX_REASON_CHARS:
        raise ValueError(f"'text' must be a string of at most {MAX_REASON_CHARS} characters")
    return Rating(session, token, turn, up=rating == "up", reason=reason, text=text.strip())


def store_rating(recorder: TurnRecorder, rating: Rating) -> bool | None:
    """Store ``rating`` on its turn: True stored, False the log failed, None no such widget turn of this session."""
    turn = recorder.recorded(rating.turn)
    if turn is None or turn.get("source") != "widget" or turn.get("session") != rating.session:
        return None
    if rating.solved is not None:
        return recorder.solved(rating.turn, rating.solved)
    if rating.up:
        return recorder.rate(rating.turn, "Like")
    label = REASONS.get(rating.reason or "")
    if rating.text:
        return recorder.feedback(rating.turn, -1, with_reason(label, rating.text))
    return recorder.rate(rating.turn, label or "Dislike")
