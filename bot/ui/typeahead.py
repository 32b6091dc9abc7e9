"""Type-ahead on the page: as the visitor types, the knowledge's questions that match are offered below the input.

Each change of the input is a Gradio event of its own (``trigger_mode="always_last"``: while one look-up runs, only
the latest text is looked up next; outside the queue, so never behind a chat turn, and no progress shown), so the
page's login, its category filter and each knowledge base's own page come with it. The questions are a ``gr.Dataset`` whose samples the page renders as text;
a click asks the question (wired by bot/ui/app.py with the other ways of asking).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from bot.knowledge.filters import FilterError, entry_filter
from bot.search.typeahead import Typeahead
from bot.serving.ratelimit import RateLimiter
from bot.ui.events import PRIVATE
from bot.ui.guard import limited

# Below the input, one question per line, like a search box's list; on a phone the same, full width.
CSS = """#kb-typeahead{margin-top:-8px} #kb-typeahead .label{display:none}
#kb-typeahead .gallery{display:flex;flex-direction:column;gap:0}
#kb-typeahead button.gallery-item,#kb-typeahead .gallery>button{width:100%;text-align:left;border-radius:0;
  border:0;border-bottom:1px solid var(--border-color-primary);padding:6px 10px;background:var(--background-fill-primary)}
#kb-typeahead .gallery>button:hover{background:var(--background-fill-secondary)}"""


def hidden() -> Any:
    """No questions offered."""
    return gr.Dataset(samples=[], visible=False)


class TypeaheadHandlers:
    """The page's look-ups for one knowledge base, limited per client address."""

    def __init__(self, typeahead: Typeahead | None, limiter: RateLimiter):
        self.typeahead = typeahead
        self.limiter = limiter

    def offer(self, text: str | None, categories: list[str] | None) -> Any:
        """The questions for ``text`` within the chosen categories, as the list's samples (hidden when none)."""
        if self.typeahead is None or not text:
            return hidden()
        try:
            within = entry_filter(categories or None)
        except FilterError:  # the selector offers only the knowledge's categories: no filter rather than an error
            within = None
        found = self.typeahead.suggest(text, within)
        return gr.Dataset(samples=[[s.question] for s in found], visible=bool(found))


def typeahead_list(
    typeahead: Typeahead | None, limiter: RateLimiter, message: gr.Textbox, categories: gr.State
) -> gr.Dataset:
    """The list of questions under ``message`` (create it right after the input), filled as the visitor types."""
    handlers = TypeaheadHandlers(typeahead, limiter)
    questions = gr.Dataset(
        components=[message],
        samples=[],
        label="猜你想问 / Suggested questions",
        elem_id="kb-typeahead",
        visible=False,
        samples_per_page=10,
    )
    if typeahead is not None and typeahead.enabled:
        # Over the limit the list stays hidden: typing goes on, the chat itself is limited on its own.
        offer = limited(handlers.offer, limiter, lambda _message: hidden())
        # ``change``, not ``input``: Gradio's textbox reports ``input`` on key presses only, and an input method
        # (拼音), a paste or a deletion presses none. A change the page makes itself (the chat emptying the box)
        # looks up "" and hides the list.
        message.change(
            offer,
            [message, categories],
            [questions],
            trigger_mode="always_last",
            show_progress="hidden",
            queue=False,
            **PRIVATE,
        )
    return questions


def picked(questions: gr.Dataset, message: gr.Textbox) -> Any:
    """The event of a click on an offered question: it goes into the input and the list hides (chain the chat)."""
    return questions.click(
        lambda sample: (sample[0] if sample else "", hidden()),
        [questions],
        [message, questions],
        show_progress="hidden",
        queue=False,
        **PRIVATE,
    )
