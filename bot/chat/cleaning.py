"""Making user text safe to search: valid UTF-8, no control characters, a length limit."""

from __future__ import annotations

import unicodedata
from typing import Any

from bot.texts import TRUNCATED_NOTICE


def clean_message(message: Any, limit: int) -> tuple[str, str | None]:
    """Make user text safe to search: valid UTF-8, no control characters, at most ``limit`` characters."""
    text = "" if message is None else str(message)
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch)[0] != "C").strip()
    if len(text) > limit:
        return text[:limit], TRUNCATED_NOTICE.format(n=limit)
    return text, None
