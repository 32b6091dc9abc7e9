"""App replicas as separate processes for the tests: each its own config file, knowledge folder and state folder,
started with ``python -m bot serve`` and ready once its API answers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from bot.config.settings import Settings
from tests.support.knowledge import ROOT, TINY, write_knowledge
from tests.support.ports import free_port
from tests.support.serving import TOKEN


def replica_config(settings: Settings, tmp_path: Path, name: str) -> Path:
    """A replica's config file: the shared settings with its own knowledge folder (a copy of TINY) and state."""
    raw = settings.model_dump(mode="json", exclude={"base_dir", "source"})
    raw["state_dir"] = str(tmp_path / name / "state")
    raw["knowledge"]["path"] = str(write_knowledge(tmp_path / name / "knowledge", TINY).parent)
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return config


def serve(config: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """``python -m bot serve`` on a free port, once its API answers: (process, /v1 URL)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "--config", str(config), "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"replica did not start: {process.communicate()[1][-3000:]}")
        time.sleep(0.5)
