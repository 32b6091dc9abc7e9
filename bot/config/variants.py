"""Variants of frozen settings: one key changed by its dotted path, the rest shared with the original."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from bot.config.settings import Settings, check_mode

M = TypeVar("M", bound=BaseModel)


def replace(model: M, path: str, value: object) -> M:
    """A copy of ``model`` with the key at ``path`` (e.g. "retrieval.dense.encoder") set to ``value``.

    Settings are frozen, and ``model_copy(update=...)`` only reaches a model's own fields: this copies each block on
    the way down. The value is taken as given (like an assignment was), so pass what the field holds.
    """
    head, _, rest = path.partition(".")
    fields = type(model).model_fields
    if head not in fields:
        where = f"{type(model).__name__}"
        raise KeyError(f"{where} has no setting {head!r} (in {path!r}); it has: {', '.join(fields)}")
    if rest:
        inner = getattr(model, head)
        if not isinstance(inner, BaseModel):
            raise KeyError(f"{head!r} is a value, not a block, so {path!r} names nothing")
        value = replace(inner, rest, value)
    return model.model_copy(update={head: value})


def update(model: M, changes: Mapping[str, object]) -> M:
    """A copy of ``model`` with every ``path: value`` of ``changes`` applied in order (see ``replace``)."""
    for path, value in changes.items():
        model = replace(model, path, value)
    return model


def with_mode(settings: Settings, mode: str, where: str = "the mode") -> Settings:
    """``settings`` retrieving in ``mode`` (checked: a ConfigError names ``where`` the bad mode came from)."""
    return replace(settings, "retrieval.mode", check_mode(mode, where))
