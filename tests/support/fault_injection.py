"""Fault injectors shared by the fault tests and benchmarks/faults.py (which tabulates the same faults).

No pytest here: the benchmark imports this module too.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.errors import KnowledgeError
from bot.knowledge.store import KnowledgeStore


def scramble(path: Path, share: float = 0.2, seed: int = 1) -> None:
    """Overwrite ``share`` of a file's bytes in place with random ones (same size: only a checksum can tell)."""
    data = bytearray(path.read_bytes())
    rnd = random.Random(seed)
    for _ in range(max(1, int(len(data) * share))):
        data[rnd.randrange(len(data))] = rnd.randrange(256)
    with open(path, "r+b") as fh:
        fh.write(data)


def segment_files(path: Path) -> list[Path]:
    """tantivy's segment files (not its meta.json, not our state)."""
    return [f for f in path.iterdir() if f.is_file() and len(f.name.split(".")[0]) == 32]


@dataclass(frozen=True)
class PlantedTemp:
    """Temporary files planted in a state folder: a killed process's (stale), a live process's and our own."""

    dead_pid: int
    stale: list[Path]  # 3 temp files and a fastText staging folder of an exited process
    live: Path  # a temp file of the (live) parent process
    mine: Path  # a temp file of this process, written after it started: in use


def plant_stale_temp(state: Path) -> PlantedTemp:
    """Leave what a ``kill -9`` during a write leaves, beside temp files of live processes."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid, live_pid = int(dead.stdout), os.getppid()
    (state / "faiss").mkdir(parents=True, exist_ok=True)
    (state / "fasttext").mkdir(parents=True, exist_ok=True)
    files = [
        state / "faiss" / f".vectors.faiss.{dead_pid}.tmp",
        state / "fasttext" / f".fasttext.bin.{dead_pid}.tmp",
        state / "fasttext" / f".corpus-{dead_pid}-x1.txt",
    ]
    for p in files:
        p.write_bytes(b"x" * 1000)
    staging = state / "fasttext" / f".kbbot-ft-{dead_pid}-abcd"
    (staging / "faiss").mkdir(parents=True)
    (staging / "fasttext.bin").write_bytes(b"x" * 5000)
    live = state / "faiss" / f".vectors.faiss.{live_pid}.tmp"
    live.write_bytes(b"y")
    mine = state / "faiss" / f".kbbot-state.json.{os.getpid()}.123.tmp"
    mine.write_bytes(b"z")
    return PlantedTemp(dead_pid, [*files, staging], live, mine)


def save_same_id(folder: str, locks: str, file: str, barrier, results) -> None:
    """One writer of the same-id race: wait at ``barrier``, save id ``x`` into ``file``, put (file, "ok" or why)."""
    store = KnowledgeStore(Path(folder), Path(locks))
    barrier.wait()
    try:
        store.upsert_entry(file, "x", f"question from {file}", "answer", "")
        results.put((file, "ok"))
    except KnowledgeError as exc:
        results.put((file, "; ".join(str(p) for p in exc.problems) if exc.problems else str(exc)))


def spreadsheet_bomb(rows: list[tuple], last_row: int = 1_048_576) -> bytes:
    """An .xlsx of ``rows`` whose sheet claims every cell Excel has (``<dimension ref="A1:XFD1048576"/>``) and ends
    with an empty row numbered ``last_row``: a few KB that a reader trusting the claim pads to 17 billion cells."""
    import io
    import re
    import zipfile

    from openpyxl import Workbook

    book = Workbook()
    for row in rows:
        book.active.append(list(row))
    plain = io.BytesIO()
    book.save(plain)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(plain.getvalue())) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                data = re.sub(rb'<dimension ref="[^"]*"\s*/>', b'<dimension ref="A1:XFD1048576"/>', data)
                data = data.replace(b"</sheetData>", b'<row r="%d"/></sheetData>' % last_row)
            z.writestr(info, data)
    return out.getvalue()
