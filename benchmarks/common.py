"""Shared by the benchmark scripts: where the evaluation data is, and writing one section of BENCHMARKS.md."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"


def data_dir() -> Path:
    """../shared/data beside the checkout, or $KBBOT_DATA."""
    return Path(os.environ.get("KBBOT_DATA") or ROOT.parent / "shared" / "data")


def write_section(name: str, body: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace (or append) the ``<!-- name:start -->…<!-- name:end -->`` section, leaving the rest untouched."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmarks\n"
    if start in text and end in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")
