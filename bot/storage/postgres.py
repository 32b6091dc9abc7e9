"""The PostgreSQL connection every shared store uses: the DSN from the environment, psycopg, one connection.

The conversation log, the shared rate limits and logins, the shared knowledge and the IM channels' memory all keep
their state in one PostgreSQL database when replicas share it. The DSN comes only from the environment variable a
setting names and is never logged; each caller passes the setting that needs it and its own error type, so the
message names the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.config.secrets import env_secret
from bot.errors import BotError
from bot.optional import optional_import


def pg_dsn(dsn_env: str, needed_by: str, error: type[BotError]) -> str:
    """The DSN from the environment variable ``dsn_env``, for the setting ``needed_by``.

    ``error`` names the variable, never its value, when it is unset or not a DSN.
    """
    psycopg = psycopg_module(needed_by, error)
    dsn = env_secret(dsn_env)
    if not dsn:
        raise error(
            f"{needed_by} is postgres but the environment variable {dsn_env} is empty; set it to a PostgreSQL "
            f"DSN such as postgresql://kbbot:PASSWORD@db-host:5432/kbbot (or set log.postgres.dsn_env)"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        # libpq's message quotes the string, which may hold the password: name the variable only.
        raise error(
            f"the environment variable {dsn_env} is not a valid PostgreSQL DSN; expected e.g. "
            "postgresql://kbbot:PASSWORD@db-host:5432/kbbot or 'host=db-host dbname=kbbot user=kbbot'"
        ) from None
    return dsn


def psycopg_module(needed_by: str, error: type[BotError]) -> Any:
    """The psycopg package, or ``error`` saying that ``needed_by: postgres`` needs it and how to install it."""
    return optional_import(
        "psycopg", f"{needed_by}: postgres", "pip install 'kbbot[pg]' (or: pip install 'psycopg[binary]')", error
    )


class SchemaConnection:
    """One autocommit connection to ``dsn``, opened on first use and again when it closed or broke.

    Each opening runs ``schema`` (idempotent statements) under the advisory lock ``schema_lock``, so replicas starting
    at once create their tables one at a time. Not locked: its owner uses it one caller at a time.
    """

    def __init__(
        self,
        psycopg: Any,
        dsn: str,
        connect_timeout: int,
        application_name: str,
        schema_lock: int,
        schema: Sequence[str],
    ):
        self.psycopg, self.dsn, self.connect_timeout = psycopg, dsn, connect_timeout
        self.application_name, self.schema_lock, self.schema = application_name, schema_lock, schema
        self._conn: Any = None

    def get(self) -> Any:
        """The live connection (a new one when there was none or it broke)."""
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        conn = self.psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=self.connect_timeout, application_name=self.application_name
        )
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.schema_lock,))
            for statement in self.schema:
                conn.execute(statement)
        self._conn = conn
        return conn

    def close(self) -> None:
        """Close the connection (the next get() opens a new one)."""
        if self._conn is not None:
            self._conn.close()
        self._conn = None
