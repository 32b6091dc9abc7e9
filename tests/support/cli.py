"""The CLI as a user runs it: ``python -m bot`` in a subprocess, without an LLM key or a mode override."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.knowledge import ROOT


def cli_env() -> dict[str, str]:
    """The environment without an LLM key or a mode override."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def run(config: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m bot --config CONFIG ARGS``, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(),
        timeout=180,
        check=False,
    )


def knowledge(config: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m bot knowledge ARGS`` with ``config``."""
    return run(config, "knowledge", *args)
