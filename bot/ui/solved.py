"""The chat page's "这个回答解决您的问题了吗？ 是 / 否" under an answer from the knowledge (``feedback.ask_solved``).

After each answer the page looks up the recorded turn (its strategy and text) and shows the question when the
setting asks for it; a click stores the reply on that turn (a yes as a thumbs up, a no as a thumbs down with the
reason 未解决: a miss in the Unanswered inbox) and hides the question again.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from bot.chat.recorder import TurnRecorder
from bot.config.operating import FeedbackSettings
from bot.conversations.outcomes import asks_solved
from bot.texts import ASK_SOLVED, NOT_STORED, SOLVED_NO, SOLVED_YES, THANKS
from bot.ui.events import PRIVATE


class SolvedQuestion:
    """Callbacks of the question: offer it after an answer, store the reply."""

    def __init__(self, recorder: TurnRecorder, settings: FeedbackSettings):
        self.recorder = recorder
        self.settings = settings

    def offer(self, history: list[dict[str, Any]] | None, turns: dict[int, int] | None):
        """(row, pending turn id): shown under the last answer when it is one the setting asks about."""
        hide = gr.update(visible=False), None
        if self.settings.ask_solved == "off" or not history:
            return hide
        turn_id = (turns or {}).get(len(history) - 1)
        turn = self.recorder.recorded(turn_id)
        if turn is None or not asks_solved(
            self.settings.ask_solved, self.settings.long_answer_chars, turn["strategy"], turn["answer"]
        ):
            return hide
        return gr.update(visible=True), turn_id

    def reply(self, pending: int | None, yes: bool):
        """Store the reply on the pending turn; (row, pending)."""
        if pending is not None:
            stored = self.recorder.solved(pending, yes)
            (gr.Info if stored else gr.Warning)(THANKS if stored else NOT_STORED)
        return gr.update(visible=False), None


def solved_controls(recorder: TurnRecorder, settings: FeedbackSettings) -> tuple[SolvedQuestion, gr.Row, gr.State]:
    """Lay out the hidden question row (inside the current Blocks) and wire its buttons; (handlers, row, pending)."""
    q = SolvedQuestion(recorder, settings)
    pending = gr.State(None)
    with gr.Row(visible=False, elem_id="kb-solved") as row:
        gr.HTML(f"<span class='kb-solved-q'>{ASK_SOLVED}</span>", elem_id="kb-solved-question")
        yes = gr.Button(SOLVED_YES, size="sm", elem_id="kb-solved-yes", scale=0, min_width=90)
        no = gr.Button(SOLVED_NO, size="sm", elem_id="kb-solved-no", scale=0, min_width=90)
    yes.click(lambda p: q.reply(p, True), [pending], [row, pending], **PRIVATE)
    no.click(lambda p: q.reply(p, False), [pending], [row, pending], **PRIVATE)
    return q, row, pending
