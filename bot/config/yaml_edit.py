"""Changing one scalar in a YAML file in place, keeping every comment and the layout (no YAML round trip)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

_KEY = re.compile(r"""^(?P<key>[A-Za-z0-9_][\w.\-]*|"[^"]*"|'[^']*')[ \t]*:(?:[ \t]+(?P<rest>.*))?$""")
# A plain or quoted scalar followed by an optional comment; flow collections, anchors and tags are refused.
_SCALAR = re.compile(
    r"""^(?P<value>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#{}\[\]&*!|>'"][^#]*?)(?P<tail>[ \t]+#.*)?[ \t]*$"""
)


class YamlEditError(ValueError):
    """The key could not be found exactly once as a plain scalar, so the file was left alone."""


def format_scalar(value: object) -> str:
    """``value`` as YAML text: numbers as numbers (floats keep a decimal point), strings double-quoted."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    return json.dumps(str(value), ensure_ascii=False)


def _keys(lines: Sequence[str]):
    """Yield (line index, key path, text after the colon) for every block-mapping key, skipping block scalars."""
    stack: list[tuple[int, str]] = []
    block_indent: int | None = None
    for i, line in enumerate(lines):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if not stripped.strip() or stripped.startswith("#"):
            continue
        if block_indent is not None:
            if indent > block_indent:
                continue  # inside a literal/folded block: text, not keys
            block_indent = None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        # "- key: v" opens a list item whose keys sit two columns further in; the "-" keeps them off our paths.
        while stripped.startswith("- ") or stripped.rstrip() == "-":
            stack.append((indent, "-"))
            rest = stripped[1:]
            stripped = rest.lstrip(" ")
            indent += 1 + len(rest) - len(stripped)
        match = _KEY.match(stripped.rstrip("\r\n"))
        if not match:
            continue
        key = match["key"].strip("\"'")
        rest = match["rest"] or ""
        yield i, tuple(k for _, k in stack) + (key,), rest
        if rest[:1] in ("|", ">"):
            block_indent = indent
        stack.append((indent, key))


def set_scalar(text: str, path: Sequence[str], value: object) -> str:
    """``text`` with the scalar at ``path`` (e.g. ("retrieval", "dense", "threshold")) replaced by ``value``."""
    path = tuple(path)
    lines = text.splitlines(keepends=True)
    found = [(i, rest) for i, keys, rest in _keys(lines) if keys == path]
    dotted = ".".join(path)
    if len(found) != 1:
        raise YamlEditError(
            f"在 YAML 中找到 {len(found)} 处 {dotted}（需要恰好一处，未修改文件）/ "
            f"found {dotted} {len(found)} times in the YAML (need exactly one; file not changed)"
        )
    i, rest = found[0]
    line = lines[i]
    body = line.rstrip("\r\n")
    scalar = _SCALAR.match(rest)
    if not rest or scalar is None:
        raise YamlEditError(
            f"{dotted} 不是单行标量值，未修改文件 / {dotted} is not a one-line scalar; file not changed"
        )
    start = len(body) - len(rest)
    lines[i] = body[:start] + format_scalar(value) + (scalar["tail"] or "") + line[len(body) :]
    return "".join(lines)


def put_scalar(text: str, path: Sequence[str], value: object) -> str:
    """``text`` with the scalar at ``path`` set to ``value``: replaced where the key is, added where it is not.

    A missing key is added under the deepest of its parents the file has (a short config.yaml leaves most keys to
    their defaults), one line per missing level, indented like that parent's other keys.
    """
    path = tuple(path)
    lines = text.splitlines(keepends=True)
    keys = list(_keys(lines))
    if any(found == path for _, found, _ in keys):
        return set_scalar(text, path, value)
    depth = max((n for n in range(len(path)) if any(found == path[:n] for _, found, _ in keys)), default=0)
    parents = [(i, rest) for i, found, rest in keys if found == path[:depth]] if depth else [(-1, "")]
    dotted = ".".join(path[:depth])
    if len(parents) != 1 or parents[0][1].strip()[:1] not in ("", "#"):
        raise YamlEditError(
            f"{dotted} 不是唯一的映射，无法添加 {'.'.join(path)}，未修改文件 / {dotted} is not one block mapping, so "
            f"{'.'.join(path)} cannot be added; file not changed"
        )
    at = parents[0][0]
    indent = _child_indent(lines, at)
    newline = "\r\n" if text.endswith("\r\n") else "\n"
    added = [
        " " * (indent + 2 * n)
        + key
        + ":"
        + (f" {format_scalar(value)}" if n == len(path) - depth - 1 else "")
        + newline
        for n, key in enumerate(path[depth:])
    ]
    if at < 0:
        body = "".join(lines)
        return body + ("" if not body or body.endswith("\n") else newline) + "".join(added)
    return "".join(lines[: at + 1] + added + lines[at + 1 :])


def _child_indent(lines: Sequence[str], at: int) -> int:
    """The indentation of the keys under line ``at`` (-1: the top level), or two more than its own."""
    if at < 0:
        return 0
    own = len(lines[at]) - len(lines[at].lstrip(" "))
    for line in lines[at + 1 :]:
        stripped = line.lstrip(" ")
        if stripped.strip() and not stripped.startswith("#"):
            indent = len(line) - len(stripped)
            return indent if indent > own else own + 2
    return own + 2


def set_scalar_in_file(path: str | Path, keys: Sequence[str], value: object) -> None:
    """Rewrite one scalar of a YAML file in place (the rest of the file byte for byte as it was)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = set_scalar(text, keys, value)
    # newline="" keeps the file's own line endings (splitlines(keepends) preserved them).
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(new)
