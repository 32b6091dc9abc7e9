"""Clarify and confirm questions as text, and a reply to one read back from the previous assistant message alone.

The API is stateless (the client sends the history), so the offer must be recoverable from what the bot said:
the clarify question lists its options as numbered lines under ``CLARIFY_HEAD`` (a near miss with several
candidates under ``UNSURE_HEAD``), the confirm question quotes one entry question in 「」, and a reply that offers a
person holds ``HANDOFF_OFFER``. A reply is a pick (a number, 第二个, the option's text, or "是" to a confirmation), a "no"
(不是, 都不是, none), or neither: then it is a new question and goes down the ladder as usual.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from bot.chat.prompt import normalize_history
from bot.messages import History
from bot.search.script import folded
from bot.texts import CLARIFY_HEAD, CLARIFY_TAIL, CONFIRM_TEMPLATE, HANDOFF_OFFER, UNSURE_HEAD

CONFIRM_HEAD = "您是想问"
_OPTION_LINE = re.compile(r"^\s*(\d{1,2})[.．、)]\s*(.+?)\s*$")
_CONFIRMED = re.compile(re.escape(CONFIRM_HEAD) + r"「(.+?)」吗？")
_YES = frozenset(
    [
        "是",
        "是的",
        "是啊",
        "是呀",
        "对",
        "对的",
        "对啊",
        "对呀",
        "没错",
        "嗯",
        "嗯嗯",
        "好",
        "好的",
        "可以",
        "就是",
        "就是这个",
        "是这个",
        "对就是这个",
        "正确",
        "yes",
        "y",
        "yeah",
        "yep",
        "yup",
        "correct",
        "right",
        "sure",
        "ok",
        "okay",
        "exactly",
    ]
)
_NO = frozenset(
    [
        "不是",
        "不",
        "不对",
        "不是的",
        "都不是",
        "都不对",
        "没有",
        "否",
        "错了",
        "不是这个",
        "不是这些",
        "不用",
        "不用了",
        "不需要",
        "不要",
        "算了",
        "no",
        "n",
        "nope",
        "neither",
        "none",
        "wrong",
        "nothing",
        "nothanks",
    ]
)
_CN_NUMBERS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_PICK = re.compile(r"^(?:选|选择|第|#|no\.?|number|option)?\s*([0-9]{1,2}|[一二两三四五六七八九])\s*(?:个|项|条|号)?$")


@dataclass(frozen=True)
class Offer:
    """What the previous assistant message offered: ``kind`` "clarify" or "confirm" (and the entry questions), or
    "person" (no questions: a yes hands off)."""

    kind: str
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Reply:
    """A message read as a reply to an offer: a pick (``index`` into the offer's questions) or a "no"."""

    index: int | None  # None: "no" / none of these


OPTION_HEADS = (CLARIFY_HEAD, UNSURE_HEAD)  # the heads of a numbered list of options


def clarify_text(questions: Sequence[str], head: str = CLARIFY_HEAD) -> str:
    """The clarify question (or, with ``UNSURE_HEAD``, the near miss's): the head, one numbered line per entry
    question, the tail."""
    lines = [f"{n}. {_one_line(q)}" for n, q in enumerate(questions, 1)]
    return "\n".join([head, *lines, "", CLARIFY_TAIL])


def option_head(text: str) -> str | None:
    """The head of the numbered options in ``text`` (clarify or near miss), or None."""
    return next((head for head in OPTION_HEADS if head in text), None)


def confirm_text(question: str) -> str:
    """The confirm question for one entry question."""
    return CONFIRM_TEMPLATE.format(question=_one_line(question).replace("」", "”"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def previous_offer(history: History | None) -> Offer | None:
    """The offer made by the last assistant message of ``history``: a clarify or confirm question, or a person."""
    turns = normalize_history(history, 1000)
    if not turns or turns[-1]["role"] != "assistant":
        return None
    return read_offer(turns[-1]["content"])


def read_offer(text: str) -> Offer | None:
    """The offer in one assistant message's text, or None."""
    if HANDOFF_OFFER in text:
        return Offer("person", ())
    head = option_head(text)
    if head is not None:
        after = text.split(head, 1)[1].splitlines()
        found = [m for m in (_OPTION_LINE.match(line) for line in after) if m]
        numbered = [m.group(2) for n, m in enumerate(found, 1) if int(m.group(1)) == n]
        return Offer("clarify", tuple(numbered)) if len(numbered) >= 2 else None
    confirmed = _CONFIRMED.search(text)
    return Offer("confirm", (confirmed.group(1),)) if confirmed else None


def squeeze(text: str) -> str:
    """Letters and digits only, NFKC, lower-case, traditional Chinese as simplified: the form replies and options
    are compared in."""
    text = folded(text)
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def read_reply(message: str, offer: Offer) -> Reply | None:
    """``message`` as a reply to ``offer``; None when it is a question of its own."""
    said = squeeze(message)
    if not said:
        return None
    if said in _NO:
        return Reply(None)
    if offer.kind in ("confirm", "person") and said in _YES:
        return Reply(0)
    if offer.kind == "person":
        return None
    number = _number(unicodedata.normalize("NFKC", message).strip().strip("。.!！").lower())
    if number is not None:
        return Reply(number - 1) if 1 <= number <= len(offer.questions) else None
    options = [squeeze(q) for q in offer.questions]
    if said in options:
        return Reply(options.index(said))
    inside = [i for i, o in enumerate(options) if len(said) >= 2 and said in o]
    return Reply(inside[0]) if len(inside) == 1 else None


def _number(text: str) -> int | None:
    found = _PICK.match(text)
    if not found:
        return None
    digit = found.group(1)
    return int(digit) if digit.isdigit() else _CN_NUMBERS[digit]
