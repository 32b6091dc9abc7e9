"""Thumbs up / down on the chat's answers, stored with their turn in the conversation log (through the core).

The page keeps, per browser session, a map from the index of each answer in the chat to its turn id (a gr.State:
server-side, so a client can only rate its own turns). A thumbs down (or a flag: one of the fixed reasons, which
analytics count) opens a small optional "why" box; its text is stored after the reason.
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr
from gradio.events import Dependency

from bot.chat.recorder import TurnRecorder, with_reason
from bot.config.operating import FeedbackSettings
from bot.texts import DOWN_REASONS, NOT_STORED, THANKS
from bot.ui.events import PRIVATE
from bot.ui.solved import solved_controls

# "Like" and "Dislike" render as thumbs; the others sit under a flag and count as a thumbs down with that reason.
FEEDBACK_OPTIONS = ("Like", "Dislike", *(label for _, label in DOWN_REASONS))


def remember(turns: dict[int, int] | None, index: int, turn_id: int | None) -> dict[int, int]:
    """The session's map with answer ``index`` pointing at ``turn_id`` (or forgotten when the turn was not recorded)."""
    turns = dict(turns or {})
    if turn_id is None:
        turns.pop(index, None)
    else:
        turns[index] = turn_id
    return turns


def forget_after(turns: dict[int, int] | None, length: int) -> dict[int, int]:
    """The map without answers at or past ``length`` (after undo)."""
    return {i: t for i, t in (turns or {}).items() if i < length}


class FeedbackHandlers:
    """Callbacks of the chat's feedback: rate a turn, then optionally say why."""

    def __init__(self, recorder: TurnRecorder):
        self.recorder = recorder

    def like(self, turns: dict[int, int] | None, evt: gr.LikeData):
        """Store a thumbs up / down (or flag) on the answer's turn; (reason row, pending turn id)."""
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        turn_id = (turns or {}).get(int(index))
        liked = evt.liked
        if turn_id is None or liked in ("", None):  # not recorded (an error, the limit, the log off); or un-clicked
            return gr.update(visible=False), None
        if not self.recorder.rate(turn_id, liked):
            gr.Warning(NOT_STORED)
            return gr.update(visible=False), None
        if liked is True or liked == "Like":
            gr.Info(THANKS)
            return gr.update(visible=False), None
        label = liked if isinstance(liked, str) and liked not in ("Dislike", "dislike") else None
        return gr.update(visible=True), {"turn": turn_id, "reason": label}

    def reason(self, pending: dict | None, text: str):
        """Store the "why" of the pending thumbs down (after its fixed reason); (reason row, pending, textbox)."""
        text = (text or "").strip()
        if pending and text:
            stored = self.recorder.feedback(pending["turn"], -1, with_reason(pending.get("reason"), text))
            (gr.Info if stored else gr.Warning)(THANKS if stored else NOT_STORED)
        return gr.update(visible=False), None, ""


def feedback_controls(
    recorder: TurnRecorder, chatbot: gr.Chatbot, turns: gr.State, settings: FeedbackSettings
) -> Callable[[Dependency], None]:
    """Lay out the "why" box and the "was this solved?" row under the chat, and wire the chatbot's like event.

    Inside the current Blocks; returns what to chain after each answer (offers the question when ``settings`` asks
    it).
    """
    f = FeedbackHandlers(recorder)
    pending = gr.State(None)
    with gr.Row(visible=False, elem_id="kb-feedback") as row:
        why = gr.Textbox(
            placeholder="哪里不对？（可选）/ What was wrong? (optional)",
            show_label=False,
            scale=4,
            elem_id="kb-feedback-reason",
        )
        send = gr.Button("提交 / Send", scale=1, elem_id="kb-feedback-send")
    chatbot.like(f.like, [turns], [row, pending], **PRIVATE)
    why.submit(f.reason, [pending, why], [row, pending, why], **PRIVATE)
    send.click(f.reason, [pending, why], [row, pending, why], **PRIVATE)
    solved, solved_row, solved_turn = solved_controls(recorder, settings)
    return lambda answered: answered.then(solved.offer, [chatbot, turns], [solved_row, solved_turn], **PRIVATE)
