"""The keys a config file sets, each with its validated value and the settings model's default for it."""

from __future__ import annotations

import collections.abc
import typing
from dataclasses import dataclass

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from bot.config.settings import Settings

MISSING = object()


@dataclass(frozen=True)
class SetKey:
    """One key a config file sets: its dotted path, the value it validates to and the model's default."""

    path: str
    value: object
    default: object  # MISSING for a required field

    @property
    def is_default(self) -> bool:
        """Whether the file sets what the model would use anyway."""
        return self.default is not MISSING and self.value == self.default


def _block(annotation: object) -> type[BaseModel] | None:
    """The settings model a field holds, when it holds one (not a dict or list of them)."""
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def blocks(model: type[BaseModel] = Settings, prefix: str = "") -> typing.Iterator[tuple[str, type[BaseModel]]]:
    """Every settings block under ``model`` (itself included, and those held in lists and maps), with its path."""
    yield prefix, model
    for name, field in model.model_fields.items():
        annotation = field.annotation
        inner = (
            typing.get_args(annotation)[-1]
            if typing.get_origin(annotation) in (dict, collections.abc.Mapping, list)
            else annotation
        )
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from blocks(inner, f"{prefix}{name}.")


def set_keys(
    raw: dict, model: type[BaseModel] = Settings, loaded: BaseModel | None = None, prefix: str = ""
) -> list[SetKey]:
    """Every leaf key of ``raw`` (a parsed config file) with its value in ``loaded`` and the model's default."""
    if loaded is None:
        loaded = model.model_validate(raw)
    out: list[SetKey] = []
    hints = typing.get_type_hints(model)
    for key, value in raw.items():
        field = model.model_fields[key]
        block = _block(hints[key])
        if block is not None and isinstance(value, dict):
            out += set_keys(value, block, getattr(loaded, key), f"{prefix}{key}.")
            continue
        default = field.get_default(call_default_factory=True)
        out.append(SetKey(prefix + key, getattr(loaded, key), MISSING if default is PydanticUndefined else default))
    return out
