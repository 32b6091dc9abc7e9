"""docs/configuration.md's reference is generated from the settings models and kept current."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bot.config import reference
from bot.config.settings import Settings
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.e2e


def test_the_committed_reference_is_current() -> None:
    current = reference.DOC.read_text(encoding="utf-8")
    assert current == reference.document(current), "docs/configuration.md is stale: run python -m bot.config.reference"


def test_every_key_is_in_the_reference_with_its_default() -> None:
    text = reference.render()
    assert "### `retrieval.dense.fasttext`" in text
    assert "| `retrain_after` | float (≥ 0) | `0.2` |" in text
    assert '| `mode` | sparse / dense / hybrid | `"hybrid"` |' in text
    assert "| `top_k` | int (≥ 1, ≤ 100) | `5` |" in text
    assert "### `retrieval.thresholds.<key>`" in text and "### `prompt.demonstrations[]`" in text
    for name in Settings.model_fields:
        if not Settings.model_fields[name].exclude:
            assert f"### `{name}`" in text or f"| `{name}` |" in text, name


def test_check_fails_on_a_stale_file_and_write_mends_it(tmp_path) -> None:
    doc = tmp_path / "configuration.md"
    doc.write_text(f"# Guide kept as written\n\n{reference.MARKER}\n\n### `old`\n", encoding="utf-8")
    command = [sys.executable, "-m", "bot.config.reference", "--path", str(doc)]
    stale = subprocess.run([*command, "--check"], cwd=ROOT, capture_output=True, text=True)
    assert stale.returncode == 1 and "out of date: run python -m bot.config.reference" in stale.stderr
    assert subprocess.run(command, cwd=ROOT).returncode == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Guide kept as written\n\n") and "### `old`" not in text and "### `llm`" in text
    assert subprocess.run([*command, "--check"], cwd=ROOT).returncode == 0


def test_a_file_without_the_marker_gets_the_reference_appended() -> None:
    assert reference.document("# Guide\n").startswith(f"# Guide\n\n{reference.MARKER}\n\n### Top level")
