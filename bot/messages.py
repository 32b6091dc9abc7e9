"""A chat message as every part of the bot passes it: the OpenAI shape, a role and its text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypedDict, cast

Role = Literal["user", "assistant", "system"]


class Message(TypedDict):
    """One message of a conversation, as the chat LLM and the history use it."""

    role: Role
    content: str


def said(role: str, content: str) -> Message:
    """The message ``content`` of ``role``, which the caller has checked is one of :data:`Role`."""
    return {"role": cast(Role, role), "content": content}


History = Sequence[Message]  # the earlier messages of a conversation, oldest first
