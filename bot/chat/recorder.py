"""Turns into the conversation log, from the core: a log that fails never breaks a chat (logged once per outage)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any

from bot.chat.answer import Answer
from bot.conversations.inbox import StoredHit, TurnRecord
from bot.conversations.log_store import ConversationLog, TurnRow
from bot.texts import NOT_SOLVED_REASON, SOLVED_REASON

log = logging.getLogger(__name__)

RATINGS = {"Like": 1, "Dislike": -1}  # a chat front end's thumbs; any other label is a thumbs down with a reason


def with_reason(label: str | None, text: str) -> str:
    """The stored reason of a thumbs down: the fixed reason picked (if any), then what the visitor typed."""
    return f"{label}: {text}" if label else text


def stored_hits(answer: Answer) -> tuple[StoredHit, ...]:
    """The hits of an answer as stored: the used ones first, then the other candidates, one per entry id."""
    cutoffs = answer.thresholds
    rows: dict[str, StoredHit] = {}
    for used, hits in ((True, answer.hits), (False, answer.candidates)):
        for h in hits:
            if h.entry.id in rows:
                continue
            row: StoredHit = {
                "id": h.entry.id,
                "query": h.entry.query,
                "relevance": round(h.relevance, 4),
                "score": round(h.score, 4),
                "searcher": h.searcher,
                "passed": used or (cutoffs is not None and cutoffs.passes(h)),
                "used": used,
            }
            if h.subquestion:
                row["subquestion"] = h.subquestion
            rows[h.entry.id] = row
    return tuple(rows.values())


def row_of(answer: Answer) -> TurnRow:
    """The log's row for a finished answer."""
    return TurnRow(
        question=answer.question,
        strategy=answer.strategy.value,
        mode=answer.mode,
        hits=stored_hits(answer),
        thresholds=answer.thresholds.to_dict() if answer.thresholds is not None else None,
        timings=dict(answer.timings),
        llm=answer.llm,
        llm_used=answer.llm_used,
        text=answer.text,
        rewritten=answer.rewritten,
        hypothetical=answer.hypothetical,
        notices=answer.notices,
        finished=answer.finished,
    )


class TurnRecorder:
    """Records finished answers and feedback in a ConversationLog (None: recording off); failures are logged, not raised."""

    def __init__(self, turn_log: ConversationLog | None):
        self.log = turn_log
        self._failing = False
        self._lost = 0  # turns not recorded since the log failed
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def enabled(self) -> bool:
        """True when there is a log to write to."""
        return self.log is not None

    def _failed(self, what: str, exc: BaseException, lost: bool = False) -> None:
        with self._lock:
            first, self._failing = not self._failing, True
            self._lost += lost
        if first:  # one error per outage, not one per turn; the recovery line says how many turns were lost
            log.error(
                "conversation log: %s failed%s (chats go on; logged once until it works again): %s",
                what,
                "; this turn and the next ones are NOT recorded" if lost else "",
                exc,
            )
        else:
            log.debug("conversation log: %s failed again%s: %s", what, " (turn not recorded)" if lost else "", exc)

    def _worked(self) -> None:
        if self._failing:
            with self._lock:
                self._failing, lost, self._lost = False, self._lost, 0
            log.info("conversation log works again; %d turns were not recorded while it failed", lost)

    def record(
        self, answer: Answer, session: str | None = None, source: str | None = None, client: str | None = None
    ) -> Answer:
        """``answer`` with its ``turn_id`` once stored; unchanged when unfinished, recording is off or the log fails."""
        if self.log is None or not answer.finished or not answer.question:  # an empty message is no question
            return answer
        try:
            turn_id = self.log.record(row_of(answer), session, client, source=source)
        except Exception as exc:
            self._failed("recording a turn", exc, lost=True)
            return answer
        self._worked()
        return dataclasses.replace(answer, turn_id=turn_id)

    def purge_every(self, seconds: float) -> None:
        """Run the log's retention every ``seconds`` on a daemon thread (a server's), until the process ends."""
        if self.log is None:
            return
        turn_log = self.log

        def run() -> None:
            while not self._stop.wait(seconds):
                try:
                    removed = turn_log.prune()
                except Exception as exc:
                    self._failed("purging old turns", exc)
                else:
                    log.info("conversation log retention removed %d turns", removed)

        threading.Thread(target=run, name="log-purge", daemon=True).start()

    def stop(self) -> None:
        """End the retention timer, if one runs."""
        self._stop.set()

    def feedback(self, turn_id: int | None, rating: int, reason: str | None = None) -> bool:
        """Rate a recorded turn +1 / -1 (optional reason); False when it could not be stored."""
        if self.log is None or turn_id is None:
            return False
        try:
            self.log.feedback(turn_id, rating, reason)
        except Exception as exc:
            self._failed("storing feedback", exc)
            return False
        return True

    def recorded(self, turn_id: int | None) -> TurnRecord | None:
        """A recorded turn as stored (None: not recorded, recording off, or the log fails)."""
        if self.log is None or turn_id is None:
            return None
        try:
            return self.log.get(turn_id)
        except Exception as exc:
            self._failed("reading a turn", exc)
            return None

    def solved(self, turn_id: int | None, yes: bool) -> bool:
        """The visitor's answer to "was this solved?": a thumbs up (yes) or down (no) with its fixed reason."""
        return self.feedback(turn_id, 1 if yes else -1, SOLVED_REASON if yes else NOT_SOLVED_REASON)

    def rate(self, turn_id: int | None, liked: Any) -> bool:
        """Feedback from a front end's label: True/"Like" +1, False/"Dislike" -1, any other text -1 with it as reason."""
        if liked is True or liked in ("Like", "like"):
            return self.feedback(turn_id, 1)
        if liked is False or liked is None or liked in ("Dislike", "dislike"):
            return self.feedback(turn_id, -1)
        return self.feedback(turn_id, -1, str(liked))


def recorded(
    snapshots: Iterator[Answer], recorder: TurnRecorder, session: str | None = None, source: str | None = None
) -> Iterator[Answer]:
    """``snapshots`` as they come, the finished one recorded (with its ``turn_id``) when a ``source`` is given."""
    for answer in snapshots:
        yield recorder.record(answer, session, source) if source and answer.finished else answer
