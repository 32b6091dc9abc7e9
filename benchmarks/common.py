"""Shared by the benchmark scripts: where the evaluation data is, and writing one section of BENCHMARKS.md."""

from __future__ import annotations

import argparse
import os
import re
import sys
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


def publish(name: str, title: str, intro: str, lines: list[str], write: bool = True) -> int:
    """Print a section (title, intro paragraph, table lines) and, with ``write``, put it into BENCHMARKS.md."""
    body = "\n".join([f"## {title}", "", intro, "", *lines])
    print(body)
    if write:
        write_section(name, body)
    return 0


def mode_arguments(argv: list[str] | None, default: str = "sparse,hybrid-e5") -> argparse.Namespace:
    """``--modes`` (comma-separated) and ``--no-write``, the options of the per-mode benchmark scripts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default=default)
    parser.add_argument("--no-write", action="store_true")
    return parser.parse_args(argv)


def shared_folder(name: str) -> Path | None:
    """``../shared/data/<name>`` (or $KBBOT_DATA's), or None with a note on stderr when it is absent."""
    folder = data_dir() / name
    if not folder.is_dir():
        print(f"skipped: {folder} not found", file=sys.stderr)
        return None
    return folder


def knowledge_folder(entries: list, work: Path) -> Path:
    """``work``/knowledge holding exactly ``entries`` (written anew, so a run never sees an earlier run's files)."""
    import shutil

    from bot.knowledge.entries import write_entries

    folder = work / "knowledge"
    if folder.exists():
        shutil.rmtree(folder)
    write_entries(entries, folder)
    return folder


def share_embeddings(work: Path, cache: Path) -> None:
    """Point ``work``/state/embeddings at ``cache``, so bots in several state folders encode each text once."""
    cache.mkdir(parents=True, exist_ok=True)
    link = work / "state" / "embeddings"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(cache, target_is_directory=True)


ANSWERS_HEAD = "### Answers while it builds"


def published() -> str:
    """BENCHMARKS.md's text as published ("" before it exists)."""
    return BENCHMARKS_MD.read_text(encoding="utf-8") if BENCHMARKS_MD.is_file() else ""


def _first_minute_parts(text: str) -> tuple[list[str], list[str]]:
    """The build part's and the answers part's lines of BENCHMARKS.md's "The first minute" (either may be empty),
    without the heading and the closing "Whole run" line."""
    start = text.find("<!-- first-minute:start -->")
    end = text.find("<!-- first-minute:end -->", start)
    head = text.find("## The first minute\n", start)
    if start < 0 or end < 0 or head < 0 or head > end:
        return [], []
    lines = [line for line in text[head:end].splitlines()[2:] if not line.startswith("Whole run ")]
    cut = lines.index(ANSWERS_HEAD) if ANSWERS_HEAD in lines else len(lines)
    build, answers = lines[:cut], lines[cut:]
    return (build if any(line.startswith("|") for line in build) else []), answers


def published_build(text: str) -> list[str]:
    """The build table's lines as BENCHMARKS.md has them (none when the section holds no build table)."""
    return _first_minute_parts(text)[0]


def published_answers(text: str) -> list[str]:
    """The answers part's lines as BENCHMARKS.md has them, from its heading (none when the section has none)."""
    return _first_minute_parts(text)[1]
