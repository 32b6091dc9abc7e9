"""Names that become file paths, entry ids and log lines: no control or invisible formatting characters, no deep
folders. A newline in an entry id forges log lines; a right-to-left override shows ``gpj.exe`` as
``exe.jpg``; 60 nested folders are nobody's knowledge layout."""

from __future__ import annotations

import unicodedata

MAX_FOLDERS = 8  # folders a knowledge file may sit in, below the knowledge folder


def unsafe_characters(text: str) -> str | None:
    """Why ``text`` is refused as a name (its first control or formatting character named), or None when fine."""
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):  # newline, tab, U+202E, zero-width, U+2028
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            return (
                f"名称中不能有控制字符或不可见的格式字符 / no control or invisible formatting characters "
                f"(found {name}, U+{ord(char):04X})"
            )
    return None


def unsafe_path(parts: tuple[str, ...]) -> str | None:
    """Why a relative path of ``parts`` is refused (characters, or over MAX_FOLDERS folders deep), or None."""
    if len(parts) - 1 > MAX_FOLDERS:
        return f"文件夹层级过深 / at most {MAX_FOLDERS} folders deep (found {len(parts) - 1})"
    return unsafe_characters("/".join(parts))
