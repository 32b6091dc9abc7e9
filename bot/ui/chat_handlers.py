"""The chat page's callbacks: a knowledge base's turn translated into Gradio's messages, header, sources and the retrieval
test. They only translate (the Bot owns the turn, its status and the knowledge edits); rendering has no side
effects."""

from __future__ import annotations

import html
import logging
from typing import Any

import gradio as gr

from bot.api.assets import asset_base
from bot.chat.answer import OFFERED, Answer, Decision
from bot.chat.prompt import message_text
from bot.config.settings import Settings
from bot.errors import BotError
from bot.knowledge.filters import entry_filter
from bot.knowledge_base import KnowledgeBase
from bot.messages import Message, said
from bot.texts import HANDOFF_ACCEPT, HANDOFF_BUTTON, INTERNAL_ERROR, RATE_LIMITED, TOO_MANY
from bot.ui.feedback import remember
from bot.ui.guard import ClientLimits, client_key, safe_markdown
from bot.ui.render import answer_html, header_markdown, html_text, retrieval_html, sources_html
from bot.ui.visitor_desk import Visit, conversation_of

log = logging.getLogger(__name__)

FOLLOW = "follow"  # the mode selector's "follow config" choice: no per-session override
# On a phone (390 px) the chat and its sources stack (sources right under the answer) and the tabs stay in view.


def _plain_history(history: list[dict[str, Any]] | None) -> list[Message]:
    """Chat history as the Bot expects it: the text the user typed, not its escaped display form."""
    out = []
    for m in history or []:
        if m.get("role") in ("user", "assistant"):
            out.append(said(m["role"], html_text(message_text(m.get("content")))))
    return out


def override(mode: str | None) -> str | None:
    """The session's mode override from the selector's value: None means follow the config."""
    return None if mode in (None, "", FOLLOW) else mode


CONFIRM_BUTTONS = [{"value": "是", "label": "是 / Yes"}, {"value": "不是", "label": "不是 / No"}]
PERSON_BUTTON = {"value": HANDOFF_ACCEPT, "label": HANDOFF_BUTTON}
RELATED_MARK = "💡"  # marks a related question's button (猜你想问) apart from the answer's own choices


def reply_message(answer: Answer, assets: str = asset_base(None)) -> dict[str, Any]:
    """The chat message of an answer: its Markdown as safe HTML (pictures from ``assets``, this knowledge base's
    asset path), and what it offers (clarify options, yes / no to a confirmation, "did you mean" questions, a
    person) as buttons; a click sends the button's value as the next message."""
    message: dict[str, Any] = {"role": "assistant", "content": answer_html(answer.text, assets)}
    if not answer.finished:
        return message
    if answer.decision is Decision.CONFIRM and len(answer.options) == 1:
        message["options"] = list(CONFIRM_BUTTONS)
    elif answer.options:
        message["options"] = [{"value": o.question, "label": o.question} for o in answer.options]
    elif answer.suggestions:
        message["options"] = [{"value": q, "label": q} for q in answer.suggestions]
    elif answer.related:  # 猜你想问: a click asks the entry's question
        message["options"] = [{"value": o.question, "label": f"{RELATED_MARK} {o.question}"} for o in answer.related]
    if answer.handoff == OFFERED:
        message["options"] = [*message.get("options", []), dict(PERSON_BUTTON)]
    return message


class ChatHandlers:
    """Gradio callbacks for one knowledge base; each browser session keeps its history and mode override in the page."""

    def __init__(self, kb: KnowledgeBase, settings: Settings):
        self.kb = kb
        self.bot = kb.bot
        self.settings = settings
        self.assets = asset_base(kb.name)  # where the page's pictures come from
        self.limits = ClientLimits(settings)  # per client address: a new session does not reset them
        self.limiter = self.limits.chat

    def header(self, mode: str | None = None) -> str:
        """Header markdown for the selector's value (no side effects: nothing is built)."""
        chosen = override(mode)
        return header_markdown(
            self.settings.ui.title,
            self.bot.status(chosen),
            self.settings.ui.retrieval_only_label,
            follows_config=chosen is None,
        )

    def header_tick(self, mode: str | None = None):
        """(header, timer): the header again, and the timer kept running only while an index builds."""
        status = self.bot.status(override(mode))
        return self.header(mode), gr.Timer(active=bool(status.building or status.standing_in))

    def arm(self, mode: str | None = None):
        """Start the header's timer when the last message set an index building (e.g. a cold switch to dense)."""
        status = self.bot.status(override(mode))
        return gr.Timer(active=bool(status.building or status.standing_in))

    def mode_choices(self) -> list[tuple[str, str]]:
        """The selector's choices: follow the config (naming its mode now), then each mode."""
        status = self.bot.status()
        return [(f"跟随配置 / Follow config ({status.configured})", FOLLOW)] + [(m, m) for m in status.modes]

    def _turn_done(self, answer: Answer, chosen: str | None) -> tuple[str, Any]:
        """(header, selector update) after a turn: the header names the mode that answered."""
        header = header_markdown(
            self.settings.ui.title,
            self.bot.status(answer.mode),
            self.settings.ui.retrieval_only_label,
            follows_config=chosen is None,
        )
        return header, gr.update(choices=self.mode_choices())

    def chat(
        self,
        message: str,
        history: list[dict[str, Any]] | None,
        mode: str | None = None,
        turns: dict[int, int] | None = None,
        categories: list[str] | None = None,
        visit: Visit | None = None,
        request: gr.Request | None = None,
    ):
        """Stream one answer, recorded in the log; yields (history, textbox, sources html, header, mode, turn ids).

        ``categories`` (the page's selector) restrict the search; none selected searches the whole knowledge.
        ``visit`` holds the page's conversation secret: a hand-off's person answers in this conversation."""
        past = _plain_history(history)
        chosen = override(mode)
        within = entry_filter(categories)
        # The page shows (and sends back) at most what the bot reads of a message, however much was posted; the
        # bot gets one character more, so that it still says the message was cut.
        cap = self.settings.limits.max_message_chars
        message = (message or "")[: cap + 1]
        shown = list(history or []) + [
            {"role": "user", "content": safe_markdown(message[:cap])},
            {"role": "assistant", "content": ""},
        ]
        if not self.limiter.allow(client_key(request)):
            shown[-1] = {"role": "assistant", "content": RATE_LIMITED}
            yield shown, message[:cap], "", gr.skip(), gr.skip(), remember(turns, len(shown) - 1, None)
            return
        session = getattr(request, "session_hash", None)
        conversation = conversation_of(visit, session)
        # The box is emptied, and the previous answer's sources cleared, by an output of their own before the turn
        # runs; no later output touches the box. Gradio sends a turn's last output twice (as it is generated, then
        # as the event completes): an empty box in it would wipe what the visitor began typing between the two,
        # and while a turn runs the page drops their Enter, so the question would be lost unasked.
        yield shown[:-1], "", "", gr.skip(), gr.skip(), gr.skip()
        try:
            for answer in self.kb.turn(
                message, past, mode=chosen, session=session, source="web", within=within, conversation=conversation
            ):
                shown[-1] = reply_message(answer, self.assets)
                if answer.finished and not answer.text:  # a person holds the conversation: the bot stays quiet
                    shown.pop()
                if answer.finished:
                    yield (
                        shown,
                        gr.skip(),
                        sources_html(answer),
                        *self._turn_done(answer, chosen),
                        remember(turns, len(shown) - 1, answer.turn_id),
                    )
                else:
                    yield shown, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        except BotError as exc:  # e.g. a mode whose optional packages are missing: the message says the fix
            shown[-1] = {"role": "assistant", "content": safe_markdown(f"⚠️ 出错了 / Error: {exc}")}
            yield shown, gr.skip(), "", gr.skip(), gr.skip(), remember(turns, len(shown) - 1, None)
        except Exception:  # a bug must cost one answer, not the session; details go to the log only
            log.exception("chat turn failed")
            shown[-1] = {"role": "assistant", "content": INTERNAL_ERROR}
            yield shown, gr.skip(), "", gr.skip(), gr.skip(), remember(turns, len(shown) - 1, None)

    def suggestion(
        self,
        history: list[dict[str, Any]] | None,
        mode: str | None,
        turns: dict[int, int] | None,
        categories: list[str] | None,
        visit: Visit | None,
        evt: gr.SelectData,
        request: gr.Request | None = None,
    ):
        """Ask the question of a clicked option (a "did you mean" suggestion, or the offer of a person)."""
        yield from self.chat(str(evt.value), history, mode, turns, categories, visit, request)

    def retry(
        self,
        history: list[dict[str, Any]] | None,
        mode: str | None = None,
        turns: dict[int, int] | None = None,
        categories: list[str] | None = None,
        visit: Visit | None = None,
        request: gr.Request | None = None,
    ):
        """Ask the last user message again."""
        history = list(history or [])
        while history and history[-1].get("role") != "user":
            history.pop()
        if not history:
            yield history, "", "", gr.skip(), gr.skip(), {}
            return
        last = html.unescape(message_text(history.pop()["content"]))
        yield from self.chat(last, history, mode, turns, categories, visit, request)

    @staticmethod
    def undo(history: list[dict[str, Any]] | None):
        """Remove the last exchange and put its question back in the textbox."""
        history = list(history or [])
        while history and history[-1].get("role") != "user":
            history.pop()
        last = html.unescape(message_text(history.pop()["content"])) if history else ""
        return history, last, ""

    def examples(self, categories: list[str] | None = None) -> list[list[str]]:
        """The welcome card's questions (for the chosen ``categories``) as samples."""
        return [[q] for q in self.kb.welcome_questions(entry_filter(categories))]

    def welcome(self, categories: list[str] | None = None):
        """The welcome card again, for the categories just chosen (hidden when it has no question)."""
        samples = self.examples(categories)
        return gr.Dataset(samples=samples, visible=bool(samples))

    def page_defaults(self):
        """(header, mode selector, examples, two category selectors) for a newly opened page: follow the configured
        mode as it is now; the category selectors offer the knowledge's categories now (hidden when it has none)."""
        self.kb.catch_up()  # an entry added on disk since the last message counts in the header
        samples = self.examples()
        return (
            self.header(None),
            gr.update(choices=self.mode_choices(), value=FOLLOW),
            gr.Dataset(samples=samples, visible=bool(samples)),
            *[self.category_choices()] * 2,
        )

    def category_choices(self):
        """A category selector's update: the knowledge's categories, nothing selected, shown only when there are some."""
        names = self.bot.categories()
        return gr.update(choices=names, value=[], visible=bool(names))

    def retrieval_test(self, query: str, categories: list[str] | None = None, request: gr.Request | None = None) -> str:
        """Hits of every mode for ``query`` (in ``categories``, when some are chosen), without the LLM (limited per
        client address)."""
        if not self.limits.retrieval.allow(client_key(request)):
            return f"<p class='kb-notice'>⚠️ {TOO_MANY}</p>"
        within = entry_filter(categories)
        return retrieval_html(query, self.bot.retrieve_all_modes(query, within), within)
