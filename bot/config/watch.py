"""The retrieval mode as config.yaml says it now, so editing ``retrieval.mode`` switches a running bot."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from bot.config.knowledge_bases import knowledge_base_settings
from bot.config.settings import DEFAULT_KB, load_settings
from bot.errors import ConfigError

log = logging.getLogger(__name__)


class ConfiguredMode:
    """Re-reads the config file when it changes (a stat at most once a second) and returns its mode.

    Only ``retrieval.mode`` is taken live; other settings need a restart. KBBOT_MODE still wins (load_settings
    applies it). A config file that no longer parses keeps the last good mode, with a log line, and ``error`` says
    why until the file is fixed (for the page to show admins).
    """

    def __init__(self, path: str | Path, initial: str, check_interval: float = 1.0, kb: str = DEFAULT_KB):
        """``kb``: the knowledge base whose mode to follow (its ``knowledge_bases`` entry over the top level)."""
        self.path = Path(path)
        self.kb = kb
        self.check_interval = check_interval
        self._mode = initial
        self._signature = self._stat()
        self._last_check = time.monotonic()
        self._lock = threading.Lock()
        self.error: str | None = None

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def __call__(self) -> str:
        """The configured mode now."""
        now = time.monotonic()
        if now - self._last_check < self.check_interval:
            return self._mode
        with self._lock:
            self._last_check = now
            signature = self._stat()
            if signature is None or signature == self._signature:
                return self._mode
            self._signature = signature
            try:
                mode = knowledge_base_settings(load_settings(self.path), self.kb).retrieval.mode
            except ConfigError as exc:
                log.error("config change ignored, keeping mode %s: %s", self._mode, exc)
                self.error = f"{exc} (仍使用 / still using mode {self._mode})"
                return self._mode
            self.error = None
            if mode != self._mode:
                log.info("retrieval mode changed in %s: %s -> %s", self.path, self._mode, mode)
                self._mode = mode
            return self._mode
