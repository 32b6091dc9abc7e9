"""Bounded logging: a flood of bad requests writes a few lines, not thousands.

- ``RepeatFilter``: at most ``per_window`` records per logger, level and message template a minute (digits in the
  template do not count, so pre-formatted messages such as ``got 255 at index 2`` are one template), at most
  ``per_logger`` records per logger, and one traceback per template: the later records of the window are one line
  with the exception's type and message.
- ``log_gradio_tracebacks``: Gradio prints the traceback of every failed request with ``traceback.print_exc()``,
  around logging; its request modules are made to log them instead (logger ``gradio``), so the filter bounds them.
- Every record that passes is cut to ``max_chars`` characters (message and traceback each).
- ``limit_repeated_logs``: installs both (app startup).
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.config.settings import LimitSettings, default_of

SUPPRESSING = "（后续相同日志将暂停记录 / further identical messages suppressed for {window:g} s）"
SUPPRESSED = "（期间省略了 {n} 条相同日志 / {n} identical messages were suppressed）"
LOGGER_SUPPRESSING = "（此来源的后续日志将暂停记录 / further messages from {name} suppressed for {window:g} s）"
LOGGER_SUPPRESSED = "（期间省略了此来源的 {n} 条日志 / {n} messages from {name} were suppressed）"
CUT = "省略了 {n} 个字符 / {n} characters cut"
GRADIO_FAILED = "Gradio 处理请求出错 / Gradio failed to handle a request"
# Loggers that do not propagate to the root logger (uvicorn configures its own handlers at launch), and ``gradio``,
# where Gradio's printed tracebacks are logged (filtered there too when the root logger has no handler).
OWN_HANDLER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "gradio")
# Gradio modules that print a traceback for a failed request, event or upload.
GRADIO_MODULES = ("gradio.routes", "gradio.queueing", "gradio.route_utils", "gradio.utils")
_DIGITS = re.compile(r"\d+")
_NEWLINES = re.compile(r"\s*\n\s*")


@dataclass
class _Window:
    """Counts of one key in its current window."""

    start: float
    passed: int = 0
    dropped: int = 0


class RepeatFilter(logging.Filter):
    """Lets at most ``per_window`` records with the same logger, level and message template through per ``window``
    seconds, and at most ``per_logger`` (default 5 × ``per_window``) per logger. The first record over a limit
    passes once, reworded as a one-line notice; the next one after the window says how many were dropped. Only the
    first ``tracebacks`` records of a template per window keep their traceback; the others become one line ending
    with the exception's type and message."""

    def __init__(
        self,
        per_window: int = default_of(LimitSettings, "log_repeats_per_minute"),
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        per_logger: int | None = None,
        tracebacks: int = 1,
        max_chars: int = default_of(LimitSettings, "max_log_chars"),
    ):
        """``max_chars``: a record's message and its traceback are each cut to this many characters."""
        super().__init__()
        self.max_chars = max_chars
        self.per_window = per_window
        self.window = window
        self.per_logger = per_logger if per_logger is not None else 5 * per_window
        self.tracebacks = tracebacks
        self._clock = clock
        self._seen: dict[tuple[str, int, str], _Window] = {}
        self._loggers: dict[str, _Window] = {}
        self._lock = threading.Lock()
        # Set on a record once decided: seeing it again (a logger's filter, then a handler's) gives the same answer.
        self._verdict = f"_kbbot_repeat_{id(self):x}"

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is written (possibly reworded)."""
        verdict = getattr(record, self._verdict, None)
        if verdict is None:
            verdict = self._decide(record)
            if verdict:
                _bounded(record, self.max_chars)
            setattr(record, self._verdict, verdict)
        return bool(verdict)

    def _fresh(self, table: dict, key: Any, now: float) -> tuple[_Window, int]:
        """``key``'s window (a new one when the last is over) and how many records the last one dropped."""
        state = table.get(key)
        if state is not None and now - state.start < self.window:
            return state, 0
        table[key] = fresh = _Window(now)
        if len(table) > 10_000:  # forget quiet keys so memory stays bounded
            recent = [(k, v) for k, v in table.items() if now - v.start < self.window]
            table.clear()
            table.update(recent)
        return fresh, state.dropped if state is not None else 0

    def _decide(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, _DIGITS.sub("#", str(record.msg)))
        now = self._clock()
        with self._lock:
            same, same_dropped = self._fresh(self._seen, key, now)
            source, source_dropped = self._fresh(self._loggers, record.name, now)
            if same.passed >= self.per_window:
                same.dropped += 1
                if same.dropped > 1 or source.passed >= self.per_logger:
                    return False
                source.passed += 1
                notice = SUPPRESSING.format(window=self.window)
            elif source.passed >= self.per_logger:
                source.dropped += 1
                if source.dropped > 1:
                    return False
                notice = LOGGER_SUPPRESSING.format(name=record.name, window=self.window)
            else:
                same.passed += 1
                source.passed += 1
                notes = []
                if same_dropped:
                    notes.append(SUPPRESSED.format(n=same_dropped))
                if source_dropped:
                    notes.append(LOGGER_SUPPRESSED.format(n=source_dropped, name=record.name))
                if notes:
                    record.msg = f"{record.msg} {' '.join(notes)}"
                if same.passed > self.tracebacks:
                    _one_line(record, "")
                return True
        # The first record over a limit: one line, without its traceback, saying what happens next.
        _one_line(record, notice)
        return True


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({CUT.format(n=len(text) - limit)})"


def _bounded(record: logging.LogRecord, limit: int) -> None:
    """``record`` with its message and traceback cut to ``limit`` characters each (a request echoing a 20,000-item
    body in a validation error is 3.6 MB, once a minute per client)."""
    message = record.getMessage()
    if len(message) > limit:
        record.msg, record.args = _cut(message, limit), ()
    if record.exc_info and not record.exc_text:
        # Each part cut on its own, so the frames and the exception's type survive a huge exception message.
        parts = traceback.format_exception(*record.exc_info)
        record.exc_text = "".join(_cut(part, limit // 4) for part in parts).rstrip("\n")
    if record.exc_text and len(record.exc_text) > limit:
        record.exc_info, record.exc_text = None, _cut(record.exc_text, limit)
    elif record.exc_text:
        record.exc_info = None  # the formatter prints exc_text; exc_info would be formatted again in full


def _one_line(record: logging.LogRecord, notice: str) -> None:
    """``record`` as one line: its message, its exception's type and first line of message, then ``notice``."""
    if not (record.exc_info or record.exc_text or record.stack_info or notice):
        return
    text = _NEWLINES.sub(" ", record.getMessage().strip())
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        text += f" [{type(exc).__name__}{': ' + first if first else ''}]"
    record.msg = f"{text} {notice}".rstrip()
    record.args = ()
    record.exc_info = None
    record.exc_text = None
    record.stack_info = None


class _LoggedTraceback(types.ModuleType):
    """The ``traceback`` module as Gradio's request modules see it: ``print_exc()`` to stderr becomes an error
    record of the ``gradio`` logger (so the repeat filter bounds it); everything else is the real module."""

    def __init__(self) -> None:
        super().__init__("traceback")
        self.logger = logging.getLogger("gradio")

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    def print_exc(self, limit: int | None = None, file: Any = None, chain: bool = True) -> None:
        """Log the exception being handled (a given ``file`` other than stderr is printed to as usual)."""
        if file is not None and file is not sys.stderr:
            traceback.print_exc(limit=limit, file=file, chain=chain)
            return
        self.logger.error(GRADIO_FAILED, exc_info=True)


def log_gradio_tracebacks(modules: tuple[str, ...] = GRADIO_MODULES) -> list[str]:
    """Make Gradio's ``modules`` log the tracebacks they print (those missing or without ``traceback`` are skipped);
    returns the modules changed."""
    changed = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        current = getattr(module, "traceback", None)
        if current is traceback:
            module.traceback = _LoggedTraceback()  # type: ignore[attr-defined]
        if isinstance(getattr(module, "traceback", None), _LoggedTraceback):
            changed.append(name)
    return changed


def limit_repeated_logs(
    per_minute: int,
    loggers: tuple[str, ...] = OWN_HANDLER_LOGGERS,
    max_chars: int = default_of(LimitSettings, "max_log_chars"),
) -> RepeatFilter:
    """Install one RepeatFilter (replacing one installed before) on the root logger's handlers and on ``loggers``
    (which keep their own handlers), and make Gradio log the tracebacks it prints; records are cut at
    ``max_chars`` (message and traceback each)."""
    repeat = RepeatFilter(per_minute, 60.0, max_chars=max_chars)
    # A logger-level filter survives the logging.config calls that replace handlers.
    for holder in [*logging.getLogger().handlers, *(logging.getLogger(name) for name in loggers)]:
        for old in [f for f in holder.filters if isinstance(f, RepeatFilter)]:
            holder.removeFilter(old)
        holder.addFilter(repeat)
    log_gradio_tracebacks()
    return repeat
