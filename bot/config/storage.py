"""Where shared state lives when replicas share it: the PostgreSQL connection of the conversation log.

Only the name of the environment variable holding the DSN is configured; the DSN (with its password) is read from
the environment through bot/config/secrets.py and never written to a file or a log.
"""

from __future__ import annotations

from pydantic import Field

from bot.config.base import Strict

DEFAULT_DSN_ENV = "KBBOT_PG_DSN"


class PostgresSettings(Strict):
    """A PostgreSQL server for the conversation log (``log.backend: postgres``)."""

    dsn_env: str = Field(default=DEFAULT_DSN_ENV, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable whose value is the libpq DSN, e.g. postgresql://kbbot:PASSWORD@db:5432/kbbot."""
    connect_timeout: int = Field(default=5, ge=1, le=60)
    """Seconds to wait for a connection; a server that does not answer costs a chat turn at most this long."""
