"""Few-shot prompt: persona, demonstrations, history, then the retrieved items as numbered references."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.config.settings import PromptSettings
from bot.knowledge.markup import plain_text
from bot.messages import History, Message, said
from bot.search.base import Hit
from bot.search.passages import excerpt


def message_text(content: Any) -> str:
    """Plain text of a chat message's content (a string, or a list of parts as Gradio sends it)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or "")
    if isinstance(content, (list, tuple)):
        return "".join(message_text(part) for part in content)
    return "" if content is None else str(content)


def normalize_history(history: Sequence[object] | None, max_turns: int, max_chars: int | None = None) -> list[Message]:
    """The last ``max_turns`` user/assistant turns as OpenAI messages, at most ``max_chars`` characters in all.

    Accepts dicts or (user, bot) pairs. History comes from the client (a browser or an API caller can forge any),
    so the budget keeps the newest messages whole and cuts the oldest one it keeps.
    """
    kept = _last_turns(history, max_turns)
    if max_chars is None:
        return kept
    out: list[Message] = []
    budget = max_chars
    for message in reversed(kept):
        if budget <= 0:
            break
        text = message["content"]
        if len(text) > budget:
            text = text[: max(budget - 1, 0)] + "…"
        out.append({"role": message["role"], "content": text})
        budget -= len(text)
    return out[::-1]


def _last_turns(history: Sequence[object] | None, max_turns: int) -> list[Message]:
    messages: list[Message] = []
    for item in history or []:
        if isinstance(item, dict) and item.get("role") in ("user", "assistant"):
            text = message_text(item.get("content"))
            if text.strip():
                messages.append(said(item["role"], text))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            for role, content in zip(("user", "assistant"), item):
                text = message_text(content)
                if text.strip():
                    messages.append(said(role, text))
    if max_turns <= 0:
        return []
    # One turn is a user message and the reply to it; keep whole turns from the end.
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return messages[starts[-max_turns] :] if len(starts) > max_turns else messages


def quoted(text: str) -> str:
    """``text`` as a JSON string literal, non-ASCII kept readable."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class Prompt:
    """Messages ready for the LLM and the hits whose text made it into the references."""

    messages: list[Message]
    used: list[Hit]


class PromptBuilder:
    """Renders the templates from config.yaml; no prompt text lives in Python."""

    def __init__(self, settings: PromptSettings):
        self.settings = settings

    def render_reference(self, n: int, query: str, document: str, metadata: str, part: str = "") -> str:
        """One numbered reference block; ``part`` names the sub-question it was retrieved for.

        Every field goes in as a JSON string literal (quoted, newlines and quotes escaped): knowledge is data, so
        an entry can never start a line of its own and forge a "问题 / Question:" or "SYSTEM:" line.
        """
        block = self.settings.reference_template.format(
            n=n, query=quoted(query), document=quoted(document), metadata=quoted(metadata or "-")
        )
        return f"{block}\n{self.settings.part_template.format(part=quoted(part))}" if part else block

    def references(self, hits: Sequence[Hit]) -> tuple[str, list[Hit]]:
        """Reference text within max_context_chars, dropping the least relevant hits first.

        Each hit shows at most max_hit_chars of its document: a long entry its best passages (docs/retrieval-and-decision.md "Long
        documents"), with "…" where text was skipped.
        """
        ranked = sorted(hits, key=lambda h: h.relevance, reverse=True)
        # each hit with its shown text: the document's text, not its markup (a picture is its alt text)
        kept = [(h, plain_text(excerpt(h, self.settings.max_hit_chars))) for h in ranked]
        while kept:
            blocks = [
                self.render_reference(i, h.entry.query, document, h.entry.keywords, h.subquestion)
                for i, (h, document) in enumerate(kept, 1)
            ]
            text = "\n\n".join(blocks)
            if len(text) <= self.settings.max_context_chars or len(kept) == 1:
                if len(text) > self.settings.max_context_chars:  # one hit over the budget: show less of it
                    h, shown = kept[0]
                    over = len(text) - self.settings.max_context_chars
                    document = plain_text(excerpt(h, max(len(shown) - over, 1)))
                    text = self.render_reference(1, h.entry.query, document, h.entry.keywords, h.subquestion)
                return text, [h for h, _ in kept]
            kept = kept[:-1]
        return self.settings.no_references, []

    def _user(self, references: str, question: str) -> str:
        return self.settings.user_template.format(references=references, question=question)

    def _demonstrations(self) -> list[Message]:
        out: list[Message] = []
        for demo in self.settings.demonstrations:
            blocks = [
                self.render_reference(i, r.get("query", ""), r.get("document", ""), r.get("metadata", ""))
                for i, r in enumerate(demo.references, 1)
            ]
            refs = "\n\n".join(blocks) if blocks else self.settings.no_references
            out.append({"role": "user", "content": self._user(refs, demo.question)})
            out.append({"role": "assistant", "content": demo.answer})
        return out

    def build(self, question: str, hits: Sequence[Hit], history: History | None = None) -> Prompt:
        """System persona, demonstrations, recent history, then references and the question."""
        refs, used = self.references(hits)
        messages: list[Message] = [{"role": "system", "content": self.settings.persona}]
        messages += self._demonstrations()
        messages += normalize_history(history, self.settings.max_history_turns, self.settings.max_history_chars)
        messages.append({"role": "user", "content": self._user(refs, question)})
        return Prompt(messages, used)

    def build_plain(self, question: str, history: History | None = None) -> list[Message]:
        """Persona and history only, for the LLM-alone last resort."""
        messages: list[Message] = [{"role": "system", "content": self.settings.persona}]
        messages += normalize_history(history, self.settings.max_history_turns, self.settings.max_history_chars)
        messages.append({"role": "user", "content": question})
        return messages
