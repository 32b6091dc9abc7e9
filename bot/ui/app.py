"""The browser app: Gradio wired to a Bot (chat, retrieval test, knowledge tabs). Logic lives in the Bot."""

from __future__ import annotations

import html
import logging
from typing import Any

import gradio as gr

from bot.chat.bot import Bot
from bot.config.settings import Settings
from bot.errors import BotError
from bot.knowledge.store import KnowledgeStore
from bot.chat.prompt import message_text
from bot.chat.ratelimit import SlidingWindowLimiter
from bot.ui.knowledge_tab import knowledge_tab
from bot.ui.render import ModeResult, header_markdown, retrieval_html, sources_html

INTERNAL_ERROR = "⚠️ 内部错误，请重试；问题已记录在日志中。/ Internal error; please try again. It was logged."
RATE_LIMITED = "消息太频繁，请稍等一分钟再试。/ Too many messages; please wait a minute and try again."
log = logging.getLogger(__name__)
CSS = ".kb-notice{color:#b45309} .kb-hits td,.kb-hits th{padding:2px 6px;border-bottom:1px solid #ddd}"


def _plain_history(history: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    """Chat history as the Bot expects it: the text the user typed, not its escaped display form."""
    out = []
    for m in history or []:
        if m.get("role") in ("user", "assistant"):
            out.append({"role": m["role"], "content": html.unescape(message_text(m.get("content")))})
    return out


class ChatHandlers:
    """Gradio callbacks for one Bot; each browser session keeps its own history and mode in Gradio state."""

    def __init__(self, bot: Bot, settings: Settings):
        self.bot = bot
        self.settings = settings
        self.limiter = SlidingWindowLimiter(settings.ui.rate_limit_per_minute, 60.0)

    def header(self, mode: str) -> str:
        """Header markdown for the session's mode."""
        notice = getattr(self.bot.index.searcher(mode), "notice", None) if mode in self.bot.index.modes else None
        return header_markdown(self.settings.ui.title, mode, self.bot.llm.name if self.bot.llm else None,
                               self.settings.ui.retrieval_only_label, notice)

    def chat(self, message: str, history: list[dict[str, Any]] | None, mode: str | None = None,
             request: gr.Request | None = None):
        """Stream one answer into the chat; yields (history, cleared textbox, sources html)."""
        past = _plain_history(history)
        shown = list(history or []) + [{"role": "user", "content": html.escape(message or "")},
                                       {"role": "assistant", "content": ""}]
        session = getattr(request, "session_hash", None) or "anonymous"
        if not self.limiter.allow(session):
            shown[-1] = {"role": "assistant", "content": RATE_LIMITED}
            yield shown, message, ""
            return
        try:
            first = True
            for answer in self.bot.stream(message, past, mode or None):
                shown[-1] = {"role": "assistant", "content": html.escape(answer.text, quote=False)}
                error = str(self.bot.index.error) if answer.finished and self.bot.index.error else None
                # Clear the previous answer's sources at once, so they never sit beside a new answer.
                yield shown, "", sources_html(answer, error) if answer.finished else ("" if first else gr.skip())
                first = False
        except BotError as exc:  # e.g. a mode whose optional packages are missing: the message says the fix
            shown[-1] = {"role": "assistant", "content": html.escape(f"⚠️ 出错了 / Error: {exc}", quote=False)}
            yield shown, "", ""
        except Exception:  # a bug must cost one answer, not the session; details go to the log only
            log.exception("chat turn failed")
            shown[-1] = {"role": "assistant", "content": INTERNAL_ERROR}
            yield shown, "", ""

    def retry(self, history: list[dict[str, Any]] | None, mode: str | None = None, request: gr.Request | None = None):
        """Ask the last user message again."""
        history = list(history or [])
        while history and history[-1].get("role") != "user":
            history.pop()
        if not history:
            yield history, "", ""
            return
        last = html.unescape(message_text(history.pop()["content"]))
        yield from self.chat(last, history, mode, request)

    @staticmethod
    def undo(history: list[dict[str, Any]] | None):
        """Remove the last exchange and put its question back in the textbox."""
        history = list(history or [])
        while history and history[-1].get("role") != "user":
            history.pop()
        last = html.unescape(message_text(history.pop()["content"])) if history else ""
        return history, last, ""

    def page_defaults(self):
        """(header, mode selector) for a newly opened page: the configured mode as it is now."""
        mode = self.bot.current_mode()
        return self.header(mode), gr.update(value=mode)

    def retrieval_test(self, query: str) -> str:
        """Hits of every mode for ``query``, without the LLM."""
        results = {}
        for mode in self.bot.index.modes:
            try:
                hits, passed = self.bot.retrieve(query, mode)
                results[mode] = ModeResult(hits, passed, self.bot.mode_thresholds(mode))
            except BotError as exc:
                results[mode] = ModeResult([], [], None, str(exc))
        return retrieval_html(query, results)


def build_demo(bot: Bot, settings: Settings, store: KnowledgeStore | None = None) -> gr.Blocks:
    """The Gradio Blocks app for ``bot``; the caller queues and launches it."""
    h = ChatHandlers(bot, settings)
    with gr.Blocks(title=settings.ui.title) as demo:
        header = gr.Markdown(h.header(bot.mode), elem_id="kb-header")
        with gr.Tab("对话 / Chat", id="chat"):
            with gr.Row():
                with gr.Column(scale=3):
                    mode = gr.Dropdown(bot.index.modes, value=bot.mode, label="检索模式（仅本会话）/ Mode (this session only)",
                                       elem_id="kb-mode", interactive=True)
                    chatbot = gr.Chatbot(label="对话 / Chat", height=460, elem_id="kb-chat")
                    message = gr.Textbox(placeholder="输入问题，回车发送 / Type a question and press Enter",
                                         show_label=False, elem_id="kb-input")
                    with gr.Row():
                        send = gr.Button("发送 / Send", variant="primary", elem_id="kb-send")
                        retry = gr.Button("重试 / Retry", elem_id="kb-retry")
                        undo = gr.Button("撤销 / Undo", elem_id="kb-undo")
                        clear = gr.Button("清空 / Clear", elem_id="kb-clear")
                    if settings.ui.examples:
                        gr.Examples(settings.ui.examples, inputs=message, label="示例问题 / Examples")
                with gr.Column(scale=2):
                    gr.Markdown("### 来源 / Sources")
                    sources = gr.HTML(elem_id="kb-sources")
        with gr.Tab("检索测试 / Retrieval test", id="retrieval"):
            query = gr.Textbox(label="查询（不调用大模型）/ Query (no LLM)", elem_id="kb-rt-query")
            run = gr.Button("检索 / Search", elem_id="kb-rt-run")
            table = gr.HTML(elem_id="kb-rt-results")
        if store is not None:
            with gr.Tab("知识管理 / Knowledge", id="knowledge"):
                knowledge_tab(bot, store)

        chat_io = ([message, chatbot, mode], [chatbot, message, sources])
        message.submit(h.chat, *chat_io, api_name="chat")
        send.click(h.chat, *chat_io, api_name=False)
        retry.click(h.retry, [chatbot, mode], [chatbot, message, sources], api_name="retry")
        undo.click(h.undo, [chatbot], [chatbot, message, sources], api_name="undo")
        clear.click(lambda: ([], "", ""), None, [chatbot, message, sources], api_name=False)
        mode.change(h.header, [mode], [header], api_name=False)
        # A new page follows the configured mode now (config.yaml may have changed since start).
        demo.load(h.page_defaults, None, [header, mode], api_name=False)
        query.submit(h.retrieval_test, [query], [table], api_name="retrieval_test")
        run.click(h.retrieval_test, [query], [table], api_name=False)
    return demo
