"""Traditional Chinese read as simplified, so a message in either script matches knowledge in the other.

A visitor from Hong Kong, Macau or Taiwan writes 中山大學的校訓是甚麼; jieba's dictionary and the knowledge are in
simplified characters (or, for a Hong Kong deployer's FAQ, the other way round). Every form the bot matches on
(tokens, agreement signals, chit-chat and hand-off phrasings, type-ahead, e5 input) folds both sides to
simplified with OpenCC's ``t2s`` conversion (characters and phrases: 乾隆 stays, 乾燥 becomes 干燥), the standard
converter of the field. What is shown is never changed.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import opencc

# OpenCC's own configuration: traditional (OpenCC standard, which includes the Hong Kong and Taiwan variants'
# common characters) to simplified, phrases first.
CONVERSION = "t2s"


@functools.cache
def _converter() -> opencc.OpenCC:
    # read once (3 ms); OpenCC's converter is immutable once loaded, so threads share it
    return opencc.OpenCC(CONVERSION)


def simplified(text: str) -> str:
    """``text`` with its traditional Chinese characters and phrases in simplified form; other text unchanged."""
    if text.isascii():
        return text
    try:
        return _converter().convert(text)
    except UnicodeEncodeError:  # a lone surrogate cannot cross into OpenCC: fold the text around it
        return _SURROGATE.sub(
            lambda m: m.group() if _is_surrogate(m.group()) else _converter().convert(m.group()), text
        )


def folded(text: str) -> str:
    """``text`` as the bot compares it: full-width to half-width (NFKC), lower-case, traditional as simplified."""
    return simplified(unicodedata.normalize("NFKC", text).lower())


_SURROGATE = re.compile("[\ud800-\udfff]|[^\ud800-\udfff]+")


def _is_surrogate(part: str) -> bool:
    return "\ud800" <= part[0] <= "\udfff"
