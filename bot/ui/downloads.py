"""Files the page offers to download (the CSV template, the CSV export), in one folder per process.

Gradio copies a returned file into its own cache (one folder per content hash, deleted by ``delete_cache``), so
ours only has to exist until that copy: the template is written once, an export overwrites the last one (written
to a temporary name and renamed, so a download never sees half a file). Nothing grows per call or per page view;
the folder is removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from bot.fsutil import commit_file, temp_beside
from bot.knowledge.csv_io import CSV_ENCODING, template_csv


@functools.cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="kb-downloads-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _write(name: str, text: str) -> str:
    path = _folder() / name
    part = temp_beside(path)
    part.write_text(text, encoding=CSV_ENCODING, newline="")
    commit_file(part, path)
    return str(path)


@functools.cache
def template_file() -> str:
    """The CSV template's path (written once per process)."""
    return _write("knowledge-template.csv", template_csv())


def export_file(text: str) -> str:
    """Write an export's CSV ``text`` over the previous export; its path."""
    return _write("knowledge-export.csv", text)
