"""An Answer as an IM text message: plain text (WeCom and Feishu text messages show Markdown as typed), offers as
numbered lines the user answers by number, sources optionally as a short list, cut to what one message may hold.
Pictures and files of the knowledge (``assets/…``) become absolute links (bot/knowledge/markup.py ``served_url``),
remote pictures their alt text, and only http(s) links are written out.

The rendered text is also what the channel keeps as the assistant's message in the user's history, so the core
reads a reply ("2", "是的") to a numbered list or a confirm question from it exactly as it does through the API.
"""

from __future__ import annotations

import re

from bot.chat.answer import Answer, Decision
from bot.chat.offers import CLARIFY_HEAD, CLARIFY_TAIL, clarify_text, confirm_text, option_head, read_offer
from bot.knowledge.markup import served_url
from bot.texts import CUT_SHORT as CUT
from bot.texts import DID_YOU_MEAN, HANDOFF_OFFER_HINT, PICK_HINT, SOURCES_HEAD

_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)[^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1|(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_FENCE = re.compile(r"^\s*```.*$\n?", re.MULTILINE)
_CODE = re.compile(r"`([^`]+)`")
_BULLET = re.compile(r"^(\s*)[*+]\s+", re.MULTILINE)


def _linked(link: re.Match[str], assets: str | None) -> str:
    """A Markdown link or picture as text: "text (url)" when it leads somewhere a reader can open."""
    text, url = link.group(1), link.group(2)
    target = served_url(url, assets, image=link.group(0).startswith("!"))
    return f"{text or url} ({target})" if target else text


def plain(text: str, assets: str | None = None) -> str:
    """Markdown as plain text: links as "text (url)", assets under ``assets`` (an absolute URL; None: named by their
    alt text), no emphasis, heading or code marks."""
    text = _FENCE.sub("", text)
    text = _LINK.sub(lambda m: _linked(m, assets), text)
    text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(3) or "", text)
    text = _HEADING.sub("", text)
    text = _CODE.sub(r"\1", text)
    return _BULLET.sub(r"\1- ", text).strip()


def with_offer(answer: Answer) -> str:
    """The answer's text with its offer as numbered lines (the core's own numbering reused, its tail replaced)."""
    text = answer.text
    offer = read_offer(text)
    if offer is not None and offer.kind == "person":  # no buttons here: a yes (or 转人工) takes the offer
        return f"{text}\n{HANDOFF_OFFER_HINT}"
    if offer is not None and offer.kind == "clarify":
        return text.replace(CLARIFY_TAIL, PICK_HINT) if CLARIFY_TAIL in text else f"{text}\n\n{PICK_HINT}"
    if offer is not None or not answer.options:
        return text
    # "Did you mean" suggestions come as "- " bullets: renumbered under the clarify head so a number picks one.
    text = text.split(f"\n\n{DID_YOU_MEAN}", 1)[0].rstrip()
    questions = [o.question for o in answer.options]
    if len(questions) == 1:
        return f"{text}\n\n{confirm_text(questions[0])}"
    return f"{text}\n\n{clarify_text(questions).replace(CLARIFY_TAIL, PICK_HINT)}"


def render(answer: Answer, max_bytes: int, show_sources: bool = False, assets: str | None = None) -> str:
    """The text message for ``answer``, at most ``max_bytes`` UTF-8 bytes; its assets linked under ``assets``."""
    text = with_offer(answer)
    head, found, offered = text.partition(option_head(text) or CLARIFY_HEAD)
    # the numbered lines stay exactly as the core will read them
    text = (plain(head, assets) + "\n" if head.strip() else "") + found + offered if found else plain(text, assets)
    notice = answer.notice
    if notice and notice not in text:
        text = f"（{notice}）\n\n{text}"
    if show_sources and answer.decision is Decision.ANSWER and answer.hits:
        seen = list(dict.fromkeys(h.entry.query for h in answer.hits))[:3]
        text += f"\n\n{SOURCES_HEAD}\n" + "\n".join(f"- {q}" for q in seen)
    return fit(text, max_bytes)


def fit(text: str, limit: int) -> str:
    """``text`` cut (at a character boundary) so that it fits in ``limit`` UTF-8 bytes."""
    if len(text.encode("utf-8")) <= limit:
        return text
    room = limit - len(CUT.encode("utf-8"))
    return text.encode("utf-8")[:room].decode("utf-8", "ignore").rstrip() + CUT
