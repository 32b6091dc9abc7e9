"""App replicas as separate processes: ``python -m bot serve`` on a config file of their own, for the tests and the
benchmark that put two of them behind one search server and one PostgreSQL (docs/deployment.md).

Each replica has its own state folder and port; what they share is only what the config points them at.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 180.0  # a cold start builds the index (and imports gradio): slow on a busy 2-core machine


class ReplicaError(RuntimeError):
    """A replica did not start; the message carries the tail of its output."""


class Replica:
    """One app process serving ``config`` on a free loopback port; ``stop()`` ends it."""

    def __init__(self, name: str, folder: Path, config: Mapping[str, Any], env: Mapping[str, str]):
        self.name, self.folder = name, folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = folder / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(dict(config), allow_unicode=True), encoding="utf-8")
        self.output = folder / "output.log"
        self._out = self.output.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--config", str(self.config_path), "--port", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, token: str, timeout: float = READY_SECONDS) -> None:
        """Block until the API answers ``GET /v1/models``; a replica that exits or never answers raises."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReplicaError(f"replica {self.name} exited ({self.process.returncode}):\n{self.tail()}")
            try:
                reply = httpx.get(f"{self.url}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=2)
                if reply.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise ReplicaError(f"replica {self.name} not ready after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The last lines the process printed."""
        self._out.flush()
        text = self.output.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the process (killed if it does not exit within 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._out.close()


def replica_config(state: Path, es_url: str, index: str, llm_url: str, **overrides: Any) -> dict[str, Any]:
    """A replica's config: the repository's starter knowledge, sparse retrieval on the search server at ``es_url``,
    the log and the limits in the PostgreSQL of ``KBBOT_PG_DSN``, the LLM at ``llm_url``. ``overrides`` replace
    keys of the repository's config.yaml (one level deep: ``limits={...}`` keeps the other limits)."""
    from tests.support.knowledge import full_config

    config = full_config()
    for key, value in {
        "state_dir": str(state),
        "knowledge": {"path": str(ROOT / "knowledge"), "synonyms": str(ROOT / "synonyms.txt")},
        "retrieval": {
            "mode": "sparse",
            "sparse": {
                "backend": "elasticsearch",
                "elasticsearch": {"hosts": [es_url], "index": index, "compat_headers": False, "replicas": 0},
            },
        },
        "llm": {"base_url": llm_url, "model": "local-replica", "api_key_env": "KBBOT_REPLICA_LLM_KEY"},
        "log": {"backend": "postgres"},
        "limits": {"backend": "postgres"},
        **overrides,
    }.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    return config
