"""Secrets come only from the environment: one place reads them, so none is ever taken from a file or logged."""

from __future__ import annotations

import os


def env_secret(variable: str | None, *, strip: bool = True) -> str:
    """The value of the environment variable ``variable`` ("" when it is unset, blank or not named).

    Tokens and keys are stripped (a copied key often carries a newline); passwords are taken as typed.
    """
    if not variable:
        return ""
    value = os.environ.get(variable, "")
    return value.strip() if strip else value
