"""A real PostgreSQL server for the tests, from the Debian packages (``make pg-deps``): initdb into a temp folder,
pg_ctl start on a free loopback port with its unix socket in that folder, password login, stopped at the end.

PostgreSQL refuses to run as root, so as root the server runs as ``nobody`` (``runuser``). ``PG_SKIP`` says why
the tests that need it are skipped (no initdb, no psycopg, or initdb failed); the fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.support.ports import free_port

USER, PASSWORD = "kbbot", "pg-s3cret-pass"  # the password must never show in a log line
INITDB = ("--auth=scram-sha-256", "--encoding=UTF8", "--no-sync")


def _bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, else the newest /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return versions[-1] if versions else None


def skip_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here (None: it can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[pg]')"
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL server programs (initdb, pg_ctl) not found; as root run `make pg-deps` (apt postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL cannot run as root"
    return None


class PgServer:
    """One PostgreSQL cluster in a temp folder; ``dsn(schema)`` connects to a schema of its own."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kbbot-pg-"))  # not under pytest's root-only tmp: nobody reads it
        self.data, self.port = self.root / "data", free_port()
        self.root.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(self.root, "nobody", "nogroup")
        (self.root / "pw").write_text(PASSWORD)
        pwfile = str(self.root / "pw")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", USER, "--pwfile", pwfile, *INITDB)
        self.start()

    def _run(self, *argv: str | None, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in argv]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "nobody", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=self.root)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr or done.stdout}")
        return done

    def start(self) -> None:
        """Start (or restart) the server and wait until it accepts connections."""
        options = (
            # fsync off: fast, and a killed server (not a crashed machine) still keeps every committed turn
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        self._run(
            _bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as if killed, no clean shutdown)."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def dsn(self, schema: str | None = None, password: str = PASSWORD) -> str:
        """A libpq URL for the server's database (tables in ``schema`` when given)."""
        url = f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/postgres"
        return url + (f"?options=-csearch_path%3D{schema}" if schema else "")

    def new_schema(self) -> str:
        """A fresh empty schema: a test's own log, on the shared server."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return name

    def close(self) -> None:
        """Stop the server and delete its folder."""
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
