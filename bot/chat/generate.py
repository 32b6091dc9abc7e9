"""Streaming the LLM's reply into answer snapshots: capped in length, degrading to retrieval text when it fails."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator

from bot.chat.answer import Answer
from bot.chat.llm import ChatModel
from bot.chat.reasoning import Thought
from bot.errors import LLMError, LLMStreamBroken
from bot.texts import CUT_NOTICE, LLM_DOWN_NOTICE

log = logging.getLogger(__name__)


def ms(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()`` value)."""
    return (time.perf_counter() - start) * 1000


def finish(answer: Answer, timings: dict[str, float], start: float) -> Answer:
    """``answer`` marked finished, with the turn's total time added to ``timings``."""
    return dataclasses.replace(answer, timings=dict(timings, total=ms(start)), finished=True)


def stream_reply(
    llm: ChatModel,
    messages,
    base: Answer,
    timings: dict[str, float],
    start: float,
    fallback: str,
    prefix: str,
    max_chars: int,
) -> Iterator[Answer]:
    """Snapshots of ``base`` with the reply so far; the last one finished.

    A reply over ``max_chars`` is cut (the HTTP stream closed) and marked; a stream that breaks keeps its part,
    marked; an LLM error gives ``fallback`` (the retrieved knowledge) with a notice.
    """
    t = time.perf_counter()
    text = prefix
    try:
        pieces = llm.stream(messages)
        for piece in pieces:
            if isinstance(piece, Thought):  # a reasoning model's thinking: kept apart, never counted
                base = dataclasses.replace(base, reasoning=(base.reasoning or "") + piece)
                continue
            text += piece
            if len(text) > max_chars:  # a runaway reply: stop reading (closes the HTTP stream)
                close = getattr(pieces, "close", None)
                if close is not None:
                    close()
                log.warning("LLM reply cut at %d characters", max_chars)
                timings["llm"] = ms(t)
                cut = f"{text[:max_chars]}\n\n{CUT_NOTICE}"
                yield finish(dataclasses.replace(base, text=cut).noted(CUT_NOTICE), timings, start)
                return
            yield dataclasses.replace(base, text=text)
    except LLMStreamBroken as exc:
        log.warning("LLM stream broke: %s", exc)
        timings["llm"] = ms(t)
        yield finish(dataclasses.replace(base, text=f"{text}\n\n{CUT_NOTICE}").noted(CUT_NOTICE), timings, start)
        return
    except LLMError as exc:
        log.warning("LLM failed, answering from retrieval: %s", exc)
        timings["llm"] = ms(t)
        yield finish(
            dataclasses.replace(base, text=f"{LLM_DOWN_NOTICE}\n\n{fallback}", llm_used=False).noted(LLM_DOWN_NOTICE),
            timings,
            start,
        )
        return
    timings["llm"] = ms(t)
    yield finish(dataclasses.replace(base, text=text), timings, start)
