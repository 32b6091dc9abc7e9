"""Whether a message asks for several things of a kind (珠海校区食堂有哪些, what kinds of rooms are there)."""

from __future__ import annotations

import re

# Chinese words that ask for the members of a kind rather than one of them: which ones, what is there, all of,
# how many (the answer names them), one by one, a list of. "有什么" also asks "what difference / use": the rung
# that reads this answers together only candidates that each say everything the message asks about.
_CHINESE = (
    "哪些",
    "有什么",
    "有啥",
    "都有",
    "哪几",
    "几个",
    "几家",
    "几种",
    "分别",
    "列举",
    "列出",
    "所有",
    "全部",
    "哪里有",
    "哪儿有",
)
_ENGLISH = r"\b(?:list|all the|are there|which ones|what (?:kinds?|types?|sorts?) of)\b"
_CUE = re.compile("|".join([*map(re.escape, _CHINESE), _ENGLISH]), re.IGNORECASE)


def asks_for_several(message: str) -> bool:
    """True when the message asks for the members of a kind (有哪些, 有什么, 分别, "are there", "list")."""
    return _CUE.search(message) is not None
