"""The chat page's side of a hand-off: each page gets an unguessable conversation secret in its server-side state,
and while the conversation has a ticket a timer fetches the person's replies and the desk's notices into the chat,
marked as a person's and escaped like every message, within a couple of seconds and without a reload."""

from __future__ import annotations

import logging
import secrets
from typing import Any, TypedDict

import gradio as gr

from bot.errors import BotError
from bot.handoff.desk import Desk
from bot.handoff.tickets import Conversation, Message, Role
from bot.texts import STAFF_LABEL
from bot.ui.guard import safe_markdown

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0


class Visit(TypedDict):
    """One page's hand-off state (a gr.State: kept on the server, never sent by the client): the conversation's
    secret and the id of the last message from the desk shown."""

    secret: str
    seen: int


def new_visit() -> Visit:
    """A page's state: a fresh secret (a guessed conversation id reads nothing) and nothing seen yet."""
    return {"secret": secrets.token_urlsafe(24), "seen": 0}


def conversation_of(visit: Visit | None, session: str | None) -> Conversation | None:
    """The page's conversation (None before the page has loaded its state: e.g. a bare API call of /chat)."""
    if not visit or not visit.get("secret"):
        return None
    return Conversation("web", visit["secret"], session=session)


def page_text(message: Message) -> str:
    """A desk message as the page's markdown: escaped text, an agent's under their name in bold, a notice in italics."""
    if message.role is Role.AGENT:
        return f"**{safe_markdown(STAFF_LABEL.format(name=message.author or ''))}**\n\n{safe_markdown(message.text)}"
    return f"*{safe_markdown(message.text)}*"


class VisitorDesk:
    """The page's timer callbacks over the bot's desk (None: hand-off off, the timer never runs)."""

    def __init__(self, desk: Desk | None):
        self.desk = desk

    def arm(self, visit: Visit | None):
        """The timer on while the conversation has a ticket whose news the page has not shown yet, else off."""
        conversation = conversation_of(visit, None)
        if self.desk is None or conversation is None or visit is None:
            return gr.Timer(active=False)
        try:
            updates = self.desk.updates(conversation, visit["seen"])
        except BotError as exc:
            log.error("hand-off: the page's updates could not be read: %s", exc)
            return gr.Timer(active=False)
        return gr.Timer(active=updates.status is not None and (updates.status.active or bool(updates.messages)))

    def poll(self, visit: Visit | None, history: list[dict[str, Any]] | None):
        """(chat, state, timer): the person's replies and the desk's notices appended; the timer stops once the
        ticket is closed and its last notice shown."""
        conversation = conversation_of(visit, None)
        if self.desk is None or conversation is None or visit is None:
            return gr.skip(), gr.skip(), gr.Timer(active=False)
        try:
            updates = self.desk.updates(conversation, visit["seen"])
        except BotError as exc:  # the database away for a moment: try again at the next tick
            log.error("hand-off: the page's updates could not be read: %s", exc)
            return gr.skip(), gr.skip(), gr.skip()
        running = gr.Timer(active=updates.status is not None and updates.status.active)
        if not updates.messages:
            return gr.skip(), gr.skip(), running
        chat = list(history or []) + [{"role": "assistant", "content": page_text(m)} for m in updates.messages]
        return chat, {**visit, "seen": updates.messages[-1].id}, running
