"""Which language a text is written in, Chinese or English, from the script it uses."""

from __future__ import annotations

from functools import lru_cache

CROSS_LANGUAGE = "cross_language"  # the signal of a pair scored by the dense side alone (two languages)
LANGUAGE_CACHE = 65_536  # texts whose language is remembered: hybrid asks it of every candidate of every search
CROSS_LANGUAGE = "cross_language"  # the signal of a candidate whose question is in another language than the message


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


@lru_cache(maxsize=LANGUAGE_CACHE)
def language_of(text: str) -> str | None:
    """ "zh" when CJK characters make up at least a fifth of the letters, "en" when Latin letters dominate, else None."""
    cjk = sum(_is_cjk(ch) for ch in text)
    latin = sum(ch.isascii() and ch.isalpha() for ch in text)
    if cjk + latin == 0:
        return None
    # One Chinese character carries about a word: compare characters with words (~5 letters each).
    return "zh" if cjk >= (latin / 5) else "en"
