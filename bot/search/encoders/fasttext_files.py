"""The files of a fastText model trained on the knowledge: the model (``fasttext.bin``) and its state
(``fasttext.json``: training key, settings, entry hashes, size and SHA-256 of the model), read back and checked
before the model is trusted; a damaged or unreadable file means the model is retrained."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from bot.search.integrity import file_digest

# The encoder's logger: these lines are about its model, wherever the code reading the files lives.
log = logging.getLogger("bot.search.encoders.fasttext_encoder")

MODEL_FILE = "fasttext.bin"
MODEL_STATE = "fasttext.json"


def read_state(model_dir: Path) -> dict | None:
    """The saved state of the model in ``model_dir``, or None when there is none or it is unreadable (logged)."""
    path = model_dir / MODEL_STATE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("fastText state %s is unreadable (%s); the model will be retrained", path, exc)
        return None
    if not isinstance(state, dict):
        log.warning("fastText state %s is not a JSON object; the model will be retrained", path)
        return None
    return state


class ModelCheck:
    """Whether a saved model file is the one its state describes; the digest is recomputed only when the file's
    size or modification time changed since the last check."""

    def __init__(self) -> None:
        self._verified: tuple[int, int, str] | None = None  # (size, mtime_ns, digest) of the file last checked

    def intact(self, path: Path, state: dict) -> bool:
        """False when the model file is missing, not the size it had when trained (e.g. truncated) or not the bytes
        (its SHA-256, when the state records one: random bytes in the body)."""
        if state.get("empty"):
            return True
        if not path.is_file():
            return False
        size, expected = path.stat().st_size, state.get("model_size")
        if expected is not None and size != expected:
            log.warning(
                "fastText model %s is damaged (%d bytes, %d expected); the model will be retrained",
                path,
                size,
                expected,
            )
            return False
        digest = state.get("model_digest")
        if digest is not None:
            stat = path.stat()
            if self._verified is None or self._verified[:2] != (stat.st_size, stat.st_mtime_ns):
                self._verified = (stat.st_size, stat.st_mtime_ns, file_digest(path))
            if self._verified[2] != digest:
                log.warning("fastText model %s is damaged (checksum mismatch); the model will be retrained", path)
                return False
        return True
