"""The base of every settings block, and the check shared by the blocks that hold ``str.format`` templates."""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every settings block: a typo in config.yaml is an error, not a silent default.

    Frozen: a variant is a copy (``bot.config.variants.replace``), so no component sees settings change under it.
    Each field's description is the docstring under it (``use_attribute_docstrings``); docs/configuration.md is
    generated from them (``python -m bot.config.reference``).
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """A mapping of frozen settings (e.g. ``retrieval.thresholds``): a dict to read and serialise, refusing changes.

    ``frozen=True`` stops assignment to a field, not changes inside a dict it holds, which every holder of the
    settings would see.
    """

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("settings are frozen: make a variant with bot.config.variants.replace(settings, path, value)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[dict[K, V]]]:  # copy and pickle without __setitem__
        return (type(self), (dict(self),))


def default_of(model: type[BaseModel], name: str) -> Any:
    """The settings default of ``model.name``: what a component's own default for a configured value must be (one
    source of defaults: the factory passes the configured value, tests may lean on this one)."""
    return model.model_fields[name].get_default(call_default_factory=True)


def check_template(template: str, **fields: object) -> str:
    """``template`` when ``str.format`` fills it with ``fields``, else a ValueError naming the problem."""
    try:
        template.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"template does not format with {{{'}, {'.join(fields)}}} (double literal braces "
            f"as {{{{ }}}}): {type(exc).__name__}: {exc}"
        ) from None
    return template


def check_time_zone(value: str) -> str:
    """``value`` when it names an IANA time zone (zoneinfo); ValueError saying what to write otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r}; use an IANA name such as Asia/Shanghai") from None
    return value
