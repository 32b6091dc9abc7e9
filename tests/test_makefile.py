"""``make run`` serves the app through ``python -m bot serve``, with the port and address it is given."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.knowledge import ROOT

pytestmark = pytest.mark.e2e


def test_make_run_takes_a_port_and_a_host():
    dry = subprocess.run(
        ["make", "-n", "run", "PORT=7870", "HOST=0.0.0.0", "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "-m bot serve --port 7870 --host 0.0.0.0" in dry.stdout, dry.stdout + dry.stderr
    plain = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert "-m bot serve" in plain and "--port" not in plain
