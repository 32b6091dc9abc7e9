"""The OpenAI chat-completions wire format: requests in, completions, chunks, model lists and errors out."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.chat.answer import Answer
from bot.knowledge.filters import EntryFilter, FilterError, parse_filter
from bot.knowledge.markup import asset_references
from bot.messages import Message, said

MODEL = "kbbot"
OWNER = "kbbot"
# Roles the OpenAI API defines; only user and assistant messages reach the bot (docs/api.md "OpenAI-compatible API").
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
CONVERSATION_ROLES = ("user", "assistant")


class APIError(Exception):
    """An error answered as OpenAI-style JSON ``{"error": {message, type, param, code}}`` with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response (also sent as an SSE event when a stream fails)."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> APIError:
    """A 400 error naming the offending field."""
    return APIError(400, message, param=param, code=code)


@dataclass(frozen=True)
class ChatRequest:
    """What the bot needs from a chat-completions request: the question, the conversation before it, how to reply."""

    model: str
    question: str
    history: list[Message] = field(default_factory=list)
    stream: bool = False
    within: EntryFilter | None = None  # ``kbbot.filter``: the categories to search
    conversation: str | None = None  # ``kbbot.conversation``: the secret of a hand-off's conversation


def content_text(content: Any, param: str) -> str:
    """The text of a message's content: a string, null, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(
                    '只支持文本内容 / Only text content parts are supported (`{"type": "text", "text": "..."}`)',
                    f"{param}[{i}]",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request("content 必须是字符串或文本片段列表 / 'content' must be a string or a list of text parts", param)


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Validate a request body; the last user message is the question, earlier user/assistant turns the history.

    System, developer and tool messages are accepted and ignored: the persona and rules come from config.yaml.
    Other OpenAI fields (temperature, max_tokens, n, tools, ...) are ignored too.
    """
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(
            f"请求体不是有效的 JSON / The request body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    except RecursionError:  # json.loads recurses per nesting level: 100k "[" would be a 500
        raise bad_request("JSON 嵌套过深 / The request body is nested too deeply", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("请求体必须是 JSON 对象 / The request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request(
            "缺少 model，或它不是字符串 / 'model' is required and must be a string, e.g. \"kbbot\"", "model"
        )
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("stream 必须是 true 或 false / 'stream' must be a boolean", "stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request(
            "缺少 messages，或它不是非空列表 / 'messages' is required and must be a non-empty list", "messages"
        )
    turns: list[Message] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise bad_request(
                "每条消息必须是对象 / Each message must be an object with 'role' and 'content'", f"messages[{i}]"
            )
        role = message.get("role")
        if role not in ROLES:
            raise bad_request(
                f"未知的 role {role!r} / Unknown role {role!r}; use one of: {', '.join(ROLES)}", f"messages[{i}].role"
            )
        text = content_text(message.get("content"), f"messages[{i}].content")
        if role in CONVERSATION_ROLES:
            turns.append(said(role, text))
    users = [i for i, turn in enumerate(turns) if turn["role"] == "user"]
    if not users:
        raise bad_request("messages 中没有用户消息 / 'messages' holds no user message to answer", "messages")
    question = turns[users[-1]]["content"]
    if not question.strip():
        raise bad_request("最后一条用户消息是空的 / The last user message is empty", "messages")
    history, within = turns[: users[-1]], request_filter(body.get(MODEL))
    return ChatRequest(
        model=model.strip(),
        question=question,
        history=history,
        stream=bool(stream),
        within=within,
        conversation=request_conversation(body.get(MODEL)),
    )


def request_conversation(extra: Any) -> str | None:
    """The ``conversation`` of the request's ``kbbot`` object: the secret a hand-off answer gave (8-128 characters)."""
    if not isinstance(extra, dict) or extra.get("conversation") is None:
        return None
    value = extra["conversation"]
    if not isinstance(value, str) or not 8 <= len(value) <= 128 or not value.isprintable():
        raise bad_request(
            "kbbot.conversation 必须是转人工回复给出的字符串 / 'kbbot.conversation' must be the string a hand-off "
            "answer gave (8-128 characters)",
            f"{MODEL}.conversation",
        )
    return value


def request_filter(extra: Any) -> EntryFilter | None:
    """The ``filter`` of the request's ``kbbot`` object (``{"kbbot": {"filter": {"categories": [...]}}}``)."""
    if extra is None:
        return None
    if not isinstance(extra, dict):
        raise bad_request(
            'kbbot 必须是对象 / \'kbbot\' must be an object, e.g. {"filter": {"categories": ["招生"]}}', MODEL
        )
    unknown = sorted(set(extra) - {"filter", "conversation"})
    if unknown:
        raise bad_request(f"kbbot 中有未知字段 / Unknown field(s) in 'kbbot': {', '.join(unknown)}", MODEL)
    try:
        return parse_filter(extra.get("filter"))
    except FilterError as exc:
        raise bad_request(f"filter 无效 / Invalid filter: {exc}", f"{MODEL}.filter") from None


NO_CONVERSATION = "没有这个对话的转人工记录 / No hand-off in this conversation"


def parse_messages_request(raw: bytes) -> tuple[str, int]:
    """(conversation secret, after) of a ``/v1/handoff/messages`` body; 400 naming the field that is wrong."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise bad_request("请求体不是有效的 JSON / The request body is not valid JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("请求体必须是 JSON 对象 / The request body must be a JSON object")
    conversation = request_conversation({"conversation": body.get("conversation")})
    if conversation is None:
        raise bad_request("缺少 conversation / 'conversation' is required", "conversation")
    after = body.get("after", 0)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise bad_request("after 必须是非负整数 / 'after' must be a non-negative integer", "after")
    return conversation, after


def model_ids(modes: Iterable[str]) -> dict[str, str | None]:
    """Model id -> retrieval mode: ``kbbot`` (None = the configured default mode) and ``kbbot-<mode>`` per mode."""
    return {MODEL: None, **{f"{MODEL}-{mode}": mode for mode in modes}}


def model_card(model_id: str, mode: str, created: int, knowledge_base: str | None = None) -> dict[str, Any]:
    """One entry of the model list; ``kbbot.mode`` says which retrieval mode it answers with, ``knowledge_base``
    which knowledge base (with several)."""
    extra: dict[str, Any] = {"mode": mode}
    if knowledge_base is not None:
        extra["knowledge_base"] = knowledge_base
    return {"id": model_id, "object": "model", "created": created, "owned_by": OWNER, MODEL: extra}


def kb_model_id(name: str) -> str:
    """The model id of knowledge base ``name`` (``kbbot/<name>``; the bare name is accepted too)."""
    return f"{MODEL}/{name}"


def model_list(modes: Iterable[str], default_mode: str, created: int) -> dict[str, Any]:
    """The body of ``GET /v1/models``."""
    return {
        "object": "list",
        "data": [model_card(mid, mode or default_mode, created) for mid, mode in model_ids(modes).items()],
    }


def handoff_extra(answer: Answer, conversation: str | None) -> dict[str, Any] | None:
    """``kbbot.handoff``: the ticket's id and status (and the conversation secret to fetch a person's replies
    with), ``{"status": "offered"}`` when a person is offered, or None."""
    if answer.handoff is None:
        return None
    extra: dict[str, Any] = answer.handoff.to_dict()
    if answer.handoff.ticket is not None and conversation is not None:
        extra["conversation"] = conversation
    return extra


def kbbot_extra(answer: Answer, conversation: str | None = None, assets: str | None = None) -> dict[str, Any]:
    """The extra top-level ``kbbot`` field: the ladder's decision and the entries offered, the sources behind the
    answer (with their confidence band), its strategy, mode and thresholds, the hand-off (``handoff``), the
    questions to ask next (``related``: id and question, after an answer from the knowledge) and the absolute URLs
    of the pictures and files the answer shows (``assets``, served under ``assets``)."""
    sources = []
    for hit in answer.hits:
        source = {
            "id": hit.entry.id,
            "query": hit.entry.query,
            "relevance": round(hit.relevance, 4),
            "score": round(hit.score, 4),
            "searcher": hit.searcher,
        }
        if answer.thresholds is not None:
            source["band"] = answer.thresholds.band(hit).value
        if hit.subquestion:
            source["subquestion"] = hit.subquestion
        sources.append(source)
    return {
        "mode": answer.mode,
        "filter": answer.within.to_dict() if answer.within else None,
        "knowledge_base": answer.knowledge_base,
        "decision": answer.decision.value,
        "options": [o.to_dict() for o in answer.options],
        "strategy": answer.strategy.value,
        "thresholds": answer.thresholds.to_dict() if answer.thresholds else None,
        "sources": sources,
        "llm_used": answer.llm_used,
        "question": answer.question,
        "rewritten": answer.rewritten,
        "hypothetical": answer.hypothetical,
        "notice": answer.notice,
        "handoff": handoff_extra(answer, conversation),
        "rule": answer.rule.to_dict() if answer.rule else None,
        "related": [o.to_dict() for o in answer.related],
        "assets": [assets + name for name in asset_references(answer.text)] if assets else [],
        "timings_ms": {k: round(v, 2) for k, v in answer.timings.items()},
    }


@dataclass(frozen=True)
class Reply:
    """The identity shared by every chunk of one response: its id, creation time and model name."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))
    conversation: str | None = None  # the hand-off conversation's secret, told in ``kbbot.handoff``
    assets: str | None = None  # the absolute URL the answering knowledge base's assets are served under

    def completion(self, answer: Answer) -> dict[str, Any]:
        """A whole ``chat.completion`` object for a finished answer."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            # The bot does not count tokens (the LLM may not even be called); null rather than made-up numbers.
            "usage": None,
            MODEL: kbbot_extra(answer, self.conversation, self.assets),
        }

    def chunk(
        self, delta: dict[str, Any], finish_reason: str | None = None, answer: Answer | None = None
    ) -> dict[str, Any]:
        """One ``chat.completion.chunk``; the last one (``answer`` given) carries the ``kbbot`` field."""
        out = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }
        if answer is not None:
            out[MODEL] = kbbot_extra(answer, self.conversation, self.assets)
        return out


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event line pair (``data: ...`` and a blank line)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"


DONE = sse("[DONE]")


class TextDelta:
    """Turns the Bot's successive snapshots (the whole text so far) into the new part of each, for streaming.

    A snapshot normally extends the previous one. When it does not (the LLM failed after streaming some text
    and the bot fell back to a retrieval-only reply), a client cannot take text back: the new text is sent
    after a blank line, so the client shows what arrived and then the replacement.
    """

    def __init__(self) -> None:
        self.sent = ""

    def __call__(self, text: str) -> str:
        """The part of ``text`` not sent yet."""
        piece = text[len(self.sent) :] if text.startswith(self.sent) else f"\n\n{text}"
        self.sent = text
        return piece
