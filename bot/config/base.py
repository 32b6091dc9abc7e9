"""The base of every settings block, and the check shared by the blocks that hold ``str.format`` templates."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every settings block: a typo in config.yaml is an error, not a silent default.

    Frozen: a variant is a copy (``bot.config.variants.replace``), so no component sees settings change under it.
    Each field's description is the docstring under it (``use_attribute_docstrings``); docs/configuration.md is
    generated from them (``python -m bot.config.reference``).
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


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
