"""Reasoning models' thinking kept out of the text the bot uses.

DeepSeek-R1, Qwen3 and QwQ either stream a separate ``reasoning_content`` (dropped where the stream is read,
bot/chat/llm.py) or put ``<think>…</think>`` inside the content. :class:`ThinkFilter` removes the latter from a
stream piece by piece: whole blocks anywhere, and a block opened at the start and never closed (a reply cut while
thinking has no answer at all). Text that might be the start of a tag is held back until the next piece decides.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"
SHOWN_CHARS = 4000  # of a reply's thinking, passed on to be shown folded in the sources panel


class Thought(str):
    """A piece of a reasoning model's thinking, not answer text: ChatModel.stream yields these so a front end may
    show them folded; everything that reads the answer (complete, the answer's text and length cap) skips them."""


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``tag`` (0 when none)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


class ThinkFilter:
    """Feed the content pieces of one reply; get back the text outside ``<think>`` blocks."""

    def __init__(self) -> None:
        self._held = ""  # text not yet decided (a possible tag start)
        self._thinking = False
        self._started = False  # some answer text (not whitespace) was let through
        self.reasoning_chars = 0  # characters of thinking dropped
        self._thought: list[str] = []  # thinking since the last take_thought()

    def feed(self, piece: str) -> str:
        """The part of the text so far that is answer and was not returned before."""
        text, out = self._held + piece, []
        self._held = ""
        while text:
            if self._thinking:
                end = text.find(CLOSE)
                if end < 0:
                    keep = _partial_tag(text, CLOSE)
                    self._think(text[: len(text) - keep])
                    self._held = text[len(text) - keep :] if keep else ""
                    break
                self._think(text[:end])
                self._thinking, text = False, text[end + len(CLOSE) :]
                if not self._started:
                    text = text.lstrip()  # the blank line after the thinking is not part of the answer
                continue
            start = text.find(OPEN)
            if start < 0:
                keep = _partial_tag(text, OPEN)
                out.append(self._answer(text[: len(text) - keep]))
                self._held = text[len(text) - keep :] if keep else ""
                break
            out.append(self._answer(text[:start]))
            self._thinking, text = True, text[start + len(OPEN) :]
        return "".join(out)

    def _think(self, text: str) -> None:
        self.reasoning_chars += len(text)
        self._thought.append(text)

    def take_thought(self) -> str:
        """The thinking dropped since the last call."""
        thought, self._thought = "".join(self._thought), []
        return thought

    def _answer(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()  # whitespace before or after a <think> at the start is not an answer either
            self._started = bool(text)
        return text

    def finish(self) -> str:
        """What was held back at the end of the stream (nothing when it ended inside a ``<think>`` block)."""
        held, self._held = self._held, ""
        if self._thinking:
            self._think(held)
            return ""
        return self._answer(held)


def strip_reasoning(text: str) -> str:
    """``text`` without its ``<think>`` blocks (an unclosed one runs to the end)."""
    think = ThinkFilter()
    return think.feed(text) + think.finish()
