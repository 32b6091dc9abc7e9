"""Feishu's event JSON in, and the message content out.

In: the request body (``{"encrypt": ...}`` or the event itself), the URL check (``type: url_verification``) and
events of schema 2.0 (``header`` + ``event``); of those only ``im.message.receive_v1`` is read further, into an
:class:`Incoming`. A text message's ``content`` is JSON text (``{"text": "@_user_1 学费是多少？"}``) whose mention
keys the ``mentions`` list resolves; a rich-text (``post``) message is read as its text, links and mentions.

Out: an :class:`Outgoing` is one message's ``msg_type`` and ``content`` for the IM API (``text`` today; a ``post``
with links or an ``image`` can be another constructor beside :meth:`Outgoing.text`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_BODY_BYTES = 256_000  # an event with a long message, base64-encrypted; anything larger is not Feishu's
MAX_TEXT_BYTES = 30_000  # an answer's text: readable in a chat, well under the 150 KB a text message may hold
MESSAGE_RECEIVED = "im.message.receive_v1"
TEXT_KINDS = ("text", "post")
_AT_TAG = re.compile(r"<(/?\s*at\b)", re.IGNORECASE)
_SPACES = re.compile(r"[ \t]{2,}")  # what a mention left out leaves behind


class EventError(ValueError):
    """A body that is not Feishu's event JSON (the reason says which part)."""


@dataclass(frozen=True)
class Event:
    """One decrypted request: the URL check or an event, with what identifies it."""

    type: str  # "url_verification", the event type ("im.message.receive_v1"), or "event_callback" (schema 1.0)
    token: str  # the Verification Token it carries
    event_id: str = ""  # header.event_id (schema 2.0), uuid (schema 1.0)
    challenge: str = ""  # what the URL check wants echoed
    schema: str = "2.0"
    body: Mapping[str, Any] = field(default_factory=dict)  # the ``event`` object


@dataclass(frozen=True)
class Mention:
    """One @mention of a message: the key standing for it in the text, whom it names."""

    key: str  # "@_user_1"
    open_id: str
    name: str


@dataclass(frozen=True)
class Incoming:
    """One received message (``im.message.receive_v1``)."""

    event_id: str
    message_id: str  # om_...: what an answer in a group replies to
    chat_id: str  # oc_...: the chat (a p2p chat is one user's with the bot)
    chat_type: str  # "p2p" or "group"
    kind: str  # message_type: text, post, image, file, audio, sticker, ...
    sender: str  # the sender's open_id
    text: str = ""  # a text or post message's text, mentions as their keys ("@_user_1"); "" for other kinds
    mentions: tuple[Mention, ...] = ()

    @property
    def conversation(self) -> str:
        """Whose history this message continues: the sender, in this chat."""
        return f"{self.chat_id}:{self.sender}"

    def mentions_bot(self, bot_open_id: str) -> bool:
        """True when the message @mentions the bot."""
        return bool(bot_open_id) and any(m.open_id == bot_open_id for m in self.mentions)

    def question(self, bot_open_id: str) -> str:
        """The text as the bot reads it: its own mention left out, anyone else's as "@name"."""
        text = self.text
        for m in sorted(self.mentions, key=lambda m: len(m.key), reverse=True):  # @_user_10 before @_user_1
            if m.key:
                text = text.replace(m.key, "" if bot_open_id and m.open_id == bot_open_id else f"@{m.name}")
        return "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines()).strip()


@dataclass(frozen=True)
class Outgoing:
    """One message for the IM API: its ``msg_type`` and its ``content`` (sent as JSON text)."""

    msg_type: str
    content: Mapping[str, Any]

    @classmethod
    def text(cls, text: str) -> Outgoing:
        """A text message. ``<at ...>`` in it would notify people (``<at user_id="all">``): such tags are shown,
        not obeyed, whatever an answer quotes."""
        return cls("text", {"text": _AT_TAG.sub(r"＜\1", text)})

    def json_content(self) -> str:
        """The content as the API takes it: JSON text."""
        return json.dumps(dict(self.content), ensure_ascii=False)


def envelope(body: bytes) -> dict[str, Any]:
    """A request body's JSON object; EventError when it is not one."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise EventError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise EventError("the body is not a JSON object")
    return data


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def event_of(data: Mapping[str, Any]) -> Event:
    """The URL check or event a decrypted body holds; EventError when it is neither."""
    if data.get("type") == "url_verification":
        return Event("url_verification", _text(data, "token"), challenge=_text(data, "challenge"))
    if data.get("schema") == "2.0":
        header = _object(data, "header")
        event_id, event_type = _text(header, "event_id"), _text(header, "event_type")
        if not event_id or not event_type:
            raise EventError("the event's header has no event_id or event_type")
        return Event(event_type, _text(header, "token"), event_id, body=_object(data, "event"))
    if data.get("type") == "event_callback" and _text(data, "uuid"):
        return Event("event_callback", _text(data, "token"), _text(data, "uuid"), schema="1.0")
    raise EventError("the body is neither a url_verification nor an event of schema 2.0")


def incoming(event: Event) -> Incoming:
    """The message of an ``im.message.receive_v1`` event; EventError when its ids or content are missing."""
    message, sender = _object(event.body, "message"), _object(event.body, "sender")
    ids = _object(sender, "sender_id")
    kind, chat_id, open_id = _text(message, "message_type"), _text(message, "chat_id"), _text(ids, "open_id")
    if not kind or not chat_id or not open_id or not _text(message, "message_id"):
        raise EventError("the message has no message_type, message_id, chat_id or sender open_id")
    mentions = tuple(
        Mention(_text(m, "key"), _text(_object(m, "id"), "open_id"), _text(m, "name"))
        for m in message.get("mentions") or ()
        if isinstance(m, Mapping)
    )
    return Incoming(
        event_id=event.event_id,
        message_id=_text(message, "message_id"),
        chat_id=chat_id,
        chat_type=_text(message, "chat_type") or "p2p",
        kind=kind,
        sender=open_id,
        text=content_text(kind, _text(message, "content")) if kind in TEXT_KINDS else "",
        mentions=mentions,
    )


def content_text(kind: str, content: str) -> str:
    """The text of a text or post message's ``content`` JSON; EventError when it is not JSON."""
    try:
        data = json.loads(content)
    except ValueError:
        raise EventError(f"the {kind} message's content is not JSON") from None
    if not isinstance(data, dict):
        raise EventError(f"the {kind} message's content is not a JSON object")
    if kind == "text":
        return _text(data, "text")
    if "content" not in data and len(data) == 1 and isinstance(only := next(iter(data.values())), dict):
        data = only  # {"zh_cn": {...}}: one language's post
    lines = [_text(data, "title")] if _text(data, "title") else []
    for paragraph in data.get("content") or ():
        if isinstance(paragraph, list):
            lines.append("".join(_segment(s) for s in paragraph if isinstance(s, Mapping)))
    return "\n".join(lines)


def _segment(segment: Mapping[str, Any]) -> str:
    """One element of a post's paragraph as text: text and links as written, a mention as its key."""
    tag = segment.get("tag")
    if tag in ("text", "a"):
        return _text(segment, "text")
    if tag == "at":
        return _text(segment, "user_id")
    return ""
