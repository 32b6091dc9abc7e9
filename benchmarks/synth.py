"""Knowledge of any size for speed benchmarks, grown from real Chinese questions.

Source: LCQMC dev (``../shared/data/lcqmc_dev/knowledge.json``, 11,448 questions) when present; otherwise the
starter knowledge in ``knowledge/`` (a few dozen entries: far smaller and less realistic, said so in the output).

The first ``len(source)`` entries are the source entries themselves. Each further entry ``i`` is made with a
fixed seed (``random.Random(i)``), by one of two recipes chosen at random:

* **concat** (half of them): question A followed by a clause of question B, where B is cut at a random
  jieba token boundary and its second half kept (``A`` + ``，`` + ``tail(B)``);
* **splice** (the other half): the first half of A's jieba tokens spliced with the second half of B's
  (cut points at token boundaries), ending with A's final punctuation when it had one.

A and B are distinct source questions drawn uniformly. The synthetic entry's document equals its query (as in
LCQMC), metadata empty; ids are ``synth:<i>``. This keeps the vocabulary, word-length distribution and query
length of real user questions, while every entry is a new string (the BM25 posting lists grow with N).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

from bot.knowledge.entries import Entry, load_entries, parse_text

ROOT = Path(__file__).resolve().parents[1]
_END_PUNCT = re.compile(r"[？?。！!]+$")
RECIPE = (
    "entries beyond the source are synthesized (seed = entry number): half 'concat' = question A + '，' + "
    "the tail of question B cut at a random jieba token boundary; half 'splice' = the first half of A's "
    "jieba tokens + the second half of B's (A's end punctuation kept); document = query, no metadata"
)


def source_entries(data_root: Path | None) -> tuple[list[Entry], str]:
    """(entries, description): LCQMC dev when ``data_root/lcqmc_dev`` exists, else the starter knowledge."""
    if data_root is not None:
        file = data_root / "lcqmc_dev" / "knowledge.json"
        if file.is_file():
            problems: list = []
            entries = parse_text(file.read_text(encoding="utf-8"), file.stem, str(file), problems)
            return entries, f"LCQMC dev ({len(entries):,} real questions)"
    entries = load_entries(ROOT / "knowledge")
    return entries, (
        f"the starter knowledge ({len(entries)} entries; ../shared/data absent, so the synthetic "
        "entries are far less varied and realistic than with LCQMC)"
    )


def synthesize(source: Sequence[Entry], n: int, cut) -> list[Entry]:
    """``n`` entries: the source entries first, then synthetic ones (see module doc). ``cut(text) -> list[str]``."""
    out = list(source[:n])
    texts = [e.query for e in source]
    pieces: dict[int, list[str]] = {}

    def tokens(j: int) -> list[str]:
        if j not in pieces:
            pieces[j] = cut(_END_PUNCT.sub("", texts[j])) or [texts[j]]
        return pieces[j]

    for i in range(len(out), n):
        rng = random.Random(i)
        a, b = rng.sample(range(len(texts)), 2) if len(texts) > 1 else (0, 0)
        ta, tb = tokens(a), tokens(b)
        end = _END_PUNCT.search(texts[a])
        if rng.random() < 0.5:
            k = rng.randint(0, max(0, len(tb) - 1))
            text = _END_PUNCT.sub("", texts[a]) + "，" + "".join(tb[k:]) + (end.group(0) if end else "")
        else:
            ka = rng.randint(1, max(1, len(ta)))
            kb = rng.randint(0, max(0, len(tb) - 1))
            text = "".join(ta[:ka]) + "".join(tb[kb:]) + (end.group(0) if end else "")
        out.append(Entry(f"synth:{i}", text, text, (), "synth"))
    return out


def write_knowledge(entries: Sequence[Entry], folder: Path, name: str = "knowledge") -> Path:
    """Write entries as one knowledge file (list form) into ``folder``; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name}.json"
    file.write_text(
        json.dumps(
            [{"query": e.query, "document": e.document, "metadata": list(e.metadata)} for e in entries],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    return file
