"""App replicas as separate processes: ``python -m bot serve`` on a config file of their own, for the test and the
benchmark that put two of them behind one search server and one PostgreSQL (docs/deployment.md).

Each replica has its own state folder, knowledge folder and port; what they share is only what the config points
them at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from bot.config.settings import Settings
from tests.support.knowledge import ROOT, TINY, full_config, write_knowledge
from tests.support.ports import free_port

READY_SECONDS = 180.0  # a cold start builds the index (and imports gradio): slow on a busy 2-core machine


class ReplicaError(RuntimeError):
    """A replica did not start; the message carries the tail of its output."""


class Replica:
    """One app process serving the config file ``config`` on a free loopback port; ``stop()`` ends it."""

    def __init__(self, name: str, config: Path, env: Mapping[str, str]):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output = config.with_suffix(".log")
        self._out = self.output.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "--config", str(config), "serve", "--port", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, token: str, timeout: float = READY_SECONDS) -> Replica:
        """Block until the API answers ``GET /v1/models``; a replica that exits or never answers raises."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReplicaError(f"replica {self.name} exited ({self.process.returncode}):\n{self.tail()}")
            try:
                reply = httpx.get(f"{self.url}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=2)
                if reply.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ReplicaError(f"replica {self.name} not ready after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The last lines the process printed."""
        self._out.flush()
        return "\n".join(self.output.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the process (killed if it does not exit within 30 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._out.close()


def write_config(raw: Mapping[str, Any], path: Path) -> Path:
    """``raw`` settings as a YAML config file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(raw), allow_unicode=True), encoding="utf-8")
    return path


def replica_config(settings: Settings, tmp_path: Path, name: str) -> Path:
    """A replica's config file: the shared settings with its own knowledge folder (a copy of TINY) and state."""
    raw = settings.model_dump(mode="json", exclude={"base_dir", "source"})
    raw["state_dir"] = str(tmp_path / name / "state")
    raw["knowledge"]["path"] = str(write_knowledge(tmp_path / name / "knowledge", TINY).parent)
    return write_config(raw, tmp_path / f"{name}.yaml")


def starter_config(state: Path, es_url: str, index: str, llm_url: str, **overrides: Any) -> dict[str, Any]:
    """A replica of the repository's config.yaml with sparse retrieval on the search server at ``es_url``, the
    knowledge, the log and the limits in the PostgreSQL of ``KBBOT_PG_DSN``, the LLM at ``llm_url``; its knowledge
    folder (the mirror) starts as a copy of the starter knowledge, beside ``state``. ``overrides`` replace keys of
    its top-level blocks (``limits={...}`` keeps the other limits)."""
    mirror = state.parent / "knowledge"
    shutil.copytree(ROOT / "knowledge", mirror, dirs_exist_ok=True)
    config = full_config()
    for key, value in {
        "state_dir": str(state),
        "knowledge": {"path": str(mirror), "synonyms": str(ROOT / "synonyms.txt"), "shared": "postgres"},
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
