"""WeCom's callback XML: the envelope (``<Encrypt>``), the decrypted message inside it, and the passive reply.

Parsed with the standard library's expat (no external entities); a DOCTYPE is refused outright, so no entity
expansion ever runs on what a stranger posted.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.sax.saxutils import escape

MAX_TEXT_BYTES = 2048  # WeCom's limit for the content of a text message
MAX_BODY_BYTES = 64_000  # a text message is at most 2,048 bytes; the envelope adds little


class MessageError(ValueError):
    """A callback body that is not WeCom's XML (the reason says which part)."""


@dataclass(frozen=True)
class Incoming:
    """One decrypted callback message: ``kind`` is the MsgType (text, image, event, ...)."""

    kind: str
    user: str  # FromUserName: the member's UserID
    content: str = ""  # the text of a text message
    msg_id: str = ""  # MsgId (messages; events have none)
    event: str = ""  # Event of an event (enter_agent, subscribe, ...)
    create_time: str = ""

    @property
    def key(self) -> str:
        """What identifies this message across WeCom's retries: its MsgId, else the user, time and event."""
        return f"id:{self.msg_id}" if self.msg_id else f"ev:{self.user}:{self.create_time}:{self.event}"


def _root(body: bytes, what: str) -> ET.Element:
    if len(body) > MAX_BODY_BYTES:
        raise MessageError(f"{what} is over {MAX_BODY_BYTES} bytes")
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise MessageError(f"{what} carries a DOCTYPE; WeCom never sends one")
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise MessageError(f"{what} is not XML") from None
    if root.tag != "xml":
        raise MessageError(f"{what} is not a WeCom <xml> document")
    return root


def _text(root: ET.Element, tag: str) -> str:
    node = root.find(tag)
    return (node.text or "").strip() if node is not None else ""


def envelope(body: bytes) -> str:
    """The ``<Encrypt>`` of a callback POST body; MessageError when there is none."""
    encrypt = _text(_root(body, "the callback body"), "Encrypt")
    if not encrypt:
        raise MessageError("the callback body has no <Encrypt>; set the app to safe mode (安全模式)")
    return encrypt


def incoming(plain: str) -> Incoming:
    """The decrypted message; MessageError when it lacks MsgType or FromUserName."""
    root = _root(plain.encode("utf-8"), "the decrypted message")
    kind, user = _text(root, "MsgType"), _text(root, "FromUserName")
    if not kind or not user:
        raise MessageError("the decrypted message has no MsgType or FromUserName")
    content = (root.findtext("Content") or "") if kind == "text" else ""
    return Incoming(
        kind=kind,
        user=user,
        content=content,
        msg_id=_text(root, "MsgId"),
        event=_text(root, "Event"),
        create_time=_text(root, "CreateTime"),
    )


def _cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def text_reply(to_user: str, from_corp: str, content: str, now: int | None = None) -> str:
    """The plain passive reply XML (a text message to ``to_user``), before it is encrypted."""
    return (
        f"<xml><ToUserName>{_cdata(to_user)}</ToUserName><FromUserName>{_cdata(from_corp)}</FromUserName>"
        f"<CreateTime>{int(now or time.time())}</CreateTime><MsgType><![CDATA[text]]></MsgType>"
        f"<Content>{_cdata(content)}</Content></xml>"
    )


def encrypted_reply(encrypt: str, msg_signature: str, timestamp: str, nonce: str) -> str:
    """The encrypted passive reply WeCom expects: Encrypt, MsgSignature, TimeStamp, Nonce."""
    return (
        f"<xml><Encrypt>{_cdata(encrypt)}</Encrypt><MsgSignature>{_cdata(msg_signature)}</MsgSignature>"
        f"<TimeStamp>{escape(timestamp)}</TimeStamp><Nonce>{_cdata(nonce)}</Nonce></xml>"
    )
