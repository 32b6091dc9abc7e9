"""The files of a FAISS index: the vectors (``vectors.faiss``, checksummed) and the state beside them (signature,
layout, which vector is whose, the entries), each replaced atomically; and the faiss calls the index makes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from bot.fsutil import commit_file, temp_beside, write_text_atomic
from bot.optional import optional_import
from bot.search.encoders import DENSE_HINT
from bot.search.integrity import file_digest

log = logging.getLogger(__name__)

SCHEMA_VERSION = "2"
STATE_FILE = "kbbot-state.json"
INDEX_FILE = "vectors.faiss"


# faiss's loader reports at INFO each CPU build it tries and cannot load ("Could not load library with AVX512
# support ..."): normal on most CPUs, yet it reads like an error at every start. Its warnings still show.
logging.getLogger("faiss.loader").setLevel(logging.WARNING)


def _import_faiss():
    return optional_import("faiss", "dense and hybrid retrieval (faiss-cpu)", DENSE_HINT)


def _search_one_thread(index, vectors: np.ndarray, k: int, params: Any = None):
    """Search on this thread alone: for one query vector an OpenMP team only costs wake-ups, and on a busy
    machine waiting for a descheduled team member turned 0.1 ms searches into 10 ms ones (benchmarks/speed.py).
    The OpenMP thread count is per calling thread; it is restored so bulk adds here stay parallel. ``params``:
    faiss SearchParameters (a selector), None for none."""
    faiss = _import_faiss()
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        return index.search(vectors, k) if params is None else index.search(vectors, k, params=params)
    finally:
        faiss.omp_set_num_threads(before)


def json_by_item(data: Any) -> str:
    """``json.dumps(data, ensure_ascii=False)``, the dicts of the top two levels one item at a time: the same text,
    but a request thread can take the GIL between items (one dumps of 100k entries' state held it for ~0.4 s)."""

    def dumps(value: Any, depth: int) -> str:
        if depth < 2 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return (
                "{"
                + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {dumps(v, depth + 1)}" for k, v in value.items())
                + "}"
            )
        return json.dumps(value, ensure_ascii=False)

    return dumps(data, 0)


def read_state(path: Path, signature: str) -> tuple[dict[str, Any], Any] | str:
    """(state, faiss index or None when empty) read from ``path``, or why there is nothing usable (missing, built
    with another signature); raises when the files are unreadable or do not match their checksum."""
    faiss = _import_faiss()
    state_file = path / STATE_FILE
    if not state_file.is_file():
        return "no index yet"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    if state.get("signature") != signature:
        log.info("faiss index at %s was built with another model or template; rebuilding", path)
        return "embedding model or template changed"
    index = None
    if state["ntotal"]:
        digest = state.get("checksum")
        if digest is not None and file_digest(path / INDEX_FILE) != digest:
            raise ValueError(f"{INDEX_FILE} does not match its checksum")  # else: garbage scores
        index = faiss.read_index(str(path / INDEX_FILE))
        if index.ntotal != state["ntotal"]:
            raise ValueError(f"index holds {index.ntotal} vectors, state says {state['ntotal']}")
    return state, index


def write_state(path: Path, index: Any, state: dict[str, Any]) -> None:
    """Write the vectors of ``index`` (None: empty) and then ``state`` with their count and checksum."""
    faiss = _import_faiss()
    ntotal = 0 if index is None else int(index.ntotal)
    checksum = None
    if ntotal:
        tmp = temp_beside(path / INDEX_FILE)
        faiss.write_index(index, str(tmp))
        checksum = file_digest(tmp)
        commit_file(tmp, path / INDEX_FILE)
    write_text_atomic(path / STATE_FILE, json_by_item({**state, "ntotal": ntotal, "checksum": checksum}))
