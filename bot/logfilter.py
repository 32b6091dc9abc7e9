"""A logging filter that bounds identical messages: a flood of bad requests writes a few lines, not thousands."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

SUPPRESSING = "（后续相同日志将暂停记录 / further identical messages suppressed for {window:g} s）"
SUPPRESSED = "（期间省略了 {n} 条相同日志 / {n} identical messages were suppressed）"
# Loggers that do not propagate to the root logger (uvicorn configures its own handlers at launch).
OWN_HANDLER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


class RepeatFilter(logging.Filter):
    """Lets at most ``per_window`` records with the same logger, level and message template through per ``window``
    seconds. The first one over the limit passes once, reworded as a one-line notice (no traceback); the next one
    after the window says how many were dropped."""

    def __init__(self, per_window: int = 20, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.per_window = per_window
        self.window = window
        self._clock = clock
        self._seen: dict[tuple[str, int, str], list] = {}  # key -> [window start, passed, suppressed]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is written (possibly reworded)."""
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            state = self._seen.get(key)
            if state is None or now - state[0] >= self.window:
                dropped = state[2] if state is not None else 0
                self._seen[key] = [now, 1, 0]
                if len(self._seen) > 10_000:  # forget quiet keys so memory stays bounded
                    self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
                if dropped:
                    record.msg = f"{record.msg} {SUPPRESSED.format(n=dropped)}"
                return True
            if state[1] < self.per_window:
                state[1] += 1
                return True
            state[2] += 1
            if state[2] > 1:
                return False
        # The first record over the limit: one line, without its traceback, saying what happens next.
        record.msg = f"{record.getMessage()} {SUPPRESSING.format(window=self.window)}"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def limit_repeated_logs(per_minute: int, loggers: tuple[str, ...] = OWN_HANDLER_LOGGERS) -> RepeatFilter:
    """Install one RepeatFilter on the root logger's handlers and on ``loggers`` (which keep their own handlers)."""
    repeat = RepeatFilter(per_minute, 60.0)
    for handler in logging.getLogger().handlers:
        if repeat not in handler.filters:
            handler.addFilter(repeat)
    for name in loggers:  # a logger-level filter survives the logging.config calls that replace handlers
        logger = logging.getLogger(name)
        if repeat not in logger.filters:
            logger.addFilter(repeat)
    return repeat
