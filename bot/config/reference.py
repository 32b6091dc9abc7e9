"""docs/configuration.md's reference part, generated from the settings models: ``python -m bot.config.reference``.

Every key with its type, default and description (the docstring under the field), one section per block. The
hand-written guide above the marker line is kept; ``--check`` exits 1 when the file is not what the models say
(``make lint`` runs it).
"""

from __future__ import annotations

import argparse
import collections.abc
import json
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bot.config.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
MARKER = "<!-- Generated below by `python -m bot.config.reference` from the settings' docstrings: edit those. -->"
_BOUNDS = (
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.MinLen, "min_length", "at least"),
)


_MAPS = (dict, collections.abc.Mapping)  # a read-only map (FrozenDict) is annotated Mapping


def _model(annotation: object) -> type[BaseModel] | None:
    """The settings block an annotation names, if it names one."""
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _inner_model(annotation: object) -> type[BaseModel] | None:
    """The block a field holds directly, or as the values of a list or mapping."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (list, *_MAPS) and args:
        return _model(args[-1])
    return _model(annotation)


def type_text(annotation: object) -> str:
    """A reader's name for a field's type: ``sparse / dense / hybrid``, ``list of str``, ``float or null``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return " / ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin in _MAPS:
        return f"map of {type_text(args[0])} → {type_text(args[1])}"
    block = _model(annotation)
    if block is not None:
        return block.__name__
    return getattr(annotation, "__name__", str(annotation))


def bounds_text(field: FieldInfo) -> str:
    """The field's numeric bounds, e.g. ``≥ 1, ≤ 100`` (empty when it has none)."""
    found = []
    for meta in field.metadata:
        for kind, attribute, sign in _BOUNDS:
            if isinstance(meta, kind):
                found.append(f"{sign} {getattr(meta, attribute)}")
    return ", ".join(found)


def default_text(field: FieldInfo) -> str:
    """The default as it would be written in YAML/JSON, or "required"."""
    value = field.get_default(call_default_factory=True)
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False, default=str)


def _cell(text: str) -> str:
    """Text that fits one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def sections(model: type[BaseModel] = Settings, path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Every block under ``model`` (itself first) with its key path; values of a map are shown as ``<key>``."""
    yield path, model
    for name, field in model.model_fields.items():
        block = _inner_model(field.annotation)
        if block is None or field.exclude:
            continue
        origin = typing.get_origin(field.annotation)
        suffix = ".<key>" if origin in _MAPS else "[]" if origin is list else ""
        yield from sections(block, f"{path}.{name}{suffix}" if path else f"{name}{suffix}")


def render_section(path: str, model: type[BaseModel]) -> str:
    """One block's heading, description and table of its own (non-block) keys."""
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"### `{path}`" if path else "### Top level", "", doc, ""]
    rows = []
    for name, field in model.model_fields.items():
        if field.exclude or _model(field.annotation) is not None:
            continue
        kind = type_text(field.annotation)
        bounds = bounds_text(field)
        kind = f"{kind} ({bounds})" if bounds else kind
        description = field.description or ""
        rows.append(f"| `{name}` | {_cell(kind)} | `{_cell(default_text(field))}` | {_cell(description)} |")
    if rows:
        lines += ["| key | type | default | description |", "| --- | --- | --- | --- |", *rows, ""]
    return "\n".join(lines)


def render() -> str:
    """The generated reference: one section per settings block, in the order config.yaml nests them."""
    return "\n".join(render_section(path, model) for path, model in sections())


def document(current: str) -> str:
    """``current`` (the file's text) with everything after the marker line replaced by the generated reference."""
    guide = current.split(MARKER, 1)[0].rstrip("\n")
    return f"{guide}\n\n{MARKER}\n\n{render()}"


def main(argv: list[str] | None = None) -> int:
    """Write docs/configuration.md, or with --check say whether it is current (exit 1 when not)."""
    parser = argparse.ArgumentParser(prog="python -m bot.config.reference", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is out of date; write nothing")
    parser.add_argument("--path", type=Path, default=DOC, help="the Markdown file (default: docs/configuration.md)")
    args = parser.parse_args(argv)
    current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
    wanted = document(current)
    if args.check:
        if current != wanted:
            print(f"{args.path} is out of date: run python -m bot.config.reference", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
