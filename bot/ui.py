"""The browser chat: Gradio wired to a Bot. No logic here beyond turning Answers into HTML."""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from bot.answer import Answer, Strategy
from bot.bot import Bot
from bot.config import Settings

STRATEGY_LABELS = {
    Strategy.DIRECT: "直接检索 / direct",
    Strategy.HYDE: "HyDE 假设答案检索 / HyDE",
    Strategy.LAST_RESORT: "兜底回复 / last resort",
}


def header_markdown(bot: Bot, settings: Settings) -> str:
    """Title plus the retrieval mode and whether an LLM or retrieval-only is in use."""
    llm = f"大模型 / LLM: `{bot.llm.name}`" if bot.llm else f"**{settings.ui.retrieval_only_label}**"
    return f"## {html.escape(settings.ui.title)}\n检索模式 / Mode: `{bot.mode}` · {llm}"


def sources_html(answer: Answer, knowledge_error: str | None = None) -> str:
    """The sources panel: every used hit with its score against the threshold; all text escaped."""
    e = html.escape
    parts = [f"<div class='kb-sources'><p><b>策略 / Strategy:</b> {e(STRATEGY_LABELS[answer.strategy])} · "
             f"<b>模式 / Mode:</b> {e(answer.mode)} · <b>阈值 / Threshold:</b> {answer.threshold:g}</p>"]
    if answer.notice:
        parts.append(f"<p class='kb-notice'>⚠️ {e(answer.notice)}</p>")
    if answer.hypothetical:
        parts.append(f"<p><b>HyDE 假设答案 / Hypothetical answer:</b> {e(answer.hypothetical)}</p>")
    if answer.hits:
        rows = []
        for i, hit in enumerate(answer.hits, 1):
            extra = " · ".join(f"{e(k)} {v:.3f}" for k, v in hit.scores.items())
            rows.append(
                f"<tr><td>[{i}]</td><td title='{e(hit.entry.id)}'>{e(hit.entry.query)}</td>"
                f"<td>{hit.score:.3f}{' (' + extra + ')' if extra else ''}</td><td>{e(hit.searcher)}</td></tr>"
            )
        parts.append("<table><tr><th>#</th><th>来源 / Source</th><th>分数 / Score</th><th>检索器 / Searcher</th></tr>"
                     + "".join(rows) + "</table>")
    else:
        parts.append("<p>没有达到阈值的知识条目。/ No knowledge entry passed the threshold.</p>")
    if knowledge_error:
        parts.append(f"<p class='kb-notice'>⚠️ 知识文件有错误，仍在使用上一次有效的索引。/ A knowledge file has errors; "
                     f"the last good index is still serving.<br><pre>{e(knowledge_error)}</pre></p>")
    parts.append("</div>")
    return "".join(parts)


def build_demo(bot: Bot, settings: Settings) -> gr.Blocks:
    """The Gradio Blocks app for ``bot``; the caller launches it."""

    def chat(message: str, history: list[dict[str, Any]] | None):
        history = list(history or [])
        past = list(history)
        history.append({"role": "user", "content": html.escape(message or "")})
        history.append({"role": "assistant", "content": ""})
        for answer in bot.stream(message, past):
            history[-1] = {"role": "assistant", "content": html.escape(answer.text, quote=False)}
            error = str(bot.index.error) if answer.finished and bot.index.error else None
            yield history, "", sources_html(answer, error) if answer.finished else ""

    with gr.Blocks(title=settings.ui.title) as demo:
        gr.Markdown(header_markdown(bot, settings), elem_id="kb-header")
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(label="对话 / Chat", height=480, elem_id="kb-chat")
                message = gr.Textbox(placeholder="输入问题，回车发送 / Type a question and press Enter",
                                     show_label=False, elem_id="kb-input")
                with gr.Row():
                    send = gr.Button("发送 / Send", variant="primary", elem_id="kb-send")
                    clear = gr.Button("清空 / Clear", elem_id="kb-clear")
                if settings.ui.examples:
                    gr.Examples(settings.ui.examples, inputs=message, label="示例问题 / Examples")
            with gr.Column(scale=2):
                gr.Markdown("### 来源 / Sources")
                sources = gr.HTML(elem_id="kb-sources")
        message.submit(chat, [message, chatbot], [chatbot, message, sources], api_name="chat")
        send.click(chat, [message, chatbot], [chatbot, message, sources], api_name=False)
        clear.click(lambda: ([], "", ""), None, [chatbot, message, sources], api_name=False)
    return demo
