"""The browser app: Gradio wired to a knowledge base (chat, retrieval test, knowledge tabs). It only translates:
the knowledge base owns a turn (``Answer``), its status and the knowledge edits; rendering has no side effects."""

from __future__ import annotations

import gradio as gr

from bot.config.settings import Settings
from bot.conversations.topics import topic_finder_from_settings
from bot.knowledge_base import KnowledgeBase
from bot.ui.admin import AdminAuth, AdminBlocks, admin_view
from bot.ui.chat_handlers import FOLLOW, ChatHandlers
from bot.ui.events import PRIVATE
from bot.ui.feedback import FEEDBACK_OPTIONS, feedback_controls, forget_after
from bot.ui.inbox_tab import admin_tabs
from bot.ui.knowledge_tab import knowledge_tab
from bot.ui.publishers import PublisherAuth
from bot.ui.review import edit_review
from bot.ui.testsets_tab import testsets_page
from bot.ui.typeahead import CSS as TYPEAHEAD_CSS
from bot.ui.typeahead import picked, typeahead_list
from bot.ui.visitor_desk import POLL_SECONDS, VisitorDesk, new_visit

# After an answer: a long one shows from its start (Gradio scrolls to its end); a short one stays at the bottom. On a
# phone the page itself scrolls to the chat, so the answer and its buttons are on screen above the input.
SHOW_ANSWER_START = """() => setTimeout(() => {
  const wrap = document.querySelector('#kb-chat .bubble-wrap');
  const rows = document.querySelectorAll('#kb-chat .bot-row');
  const last = rows[rows.length - 1];
  if (!wrap || !last) return;
  const top = last.getBoundingClientRect().top - wrap.getBoundingClientRect().top;
  if (last.getBoundingClientRect().height > wrap.clientHeight) wrap.scrollTop += top - 8;
  const chat = document.querySelector('#kb-chat');
  if (chat && window.matchMedia('(max-width: 640px)').matches)
    window.scrollTo({top: window.scrollY + chat.getBoundingClientRect().top - 4});
}, 300)"""  # after the chat's own scroll to the end, which follows the last render
CSS = """.kb-notice{color:#b45309} .kb-hits td,.kb-hits th{padding:2px 6px;border-bottom:1px solid #ddd}
#kb-main{flex-wrap:wrap} #kb-sources-toggle{display:none!important}
/* An answer's pictures fit the chat bubble, low enough that the answer's start and its picture show together. */
.kb-rich img{display:block;max-width:100%;max-height:240px!important;width:auto;height:auto;border-radius:6px;
  margin:4px 0}
/* Wide admin tables scroll sideways inside their box on a phone instead of running off the page. */
#kb-inbox-table,#kb-log-table,#kb-rt-results{overflow-x:auto!important}
/* The chat's label and toolbar float over its top: the scrolling messages start below them, never under them. */
#kb-chat .bubble-wrap{margin-top:30px;height:calc(100% - 30px)!important}
/* The flag's reasons open upward, over the answer, on a card: downward the scrolling box cut off the last ones. */
#kb-chat .extra-feedback-options{top:auto!important;bottom:100%;z-index:20;background:var(--background-fill-primary);
  border:1px solid var(--border-color-primary);border-radius:6px;padding:2px}
@media (max-width: 640px){
  #kb-main{flex-direction:column}
  #kb-main>div{min-width:100%!important}
  .tab-container button{padding:4px 6px!important;font-size:13px!important;min-width:0!important;
    white-space:normal!important;height:auto!important;line-height:1.25!important}
  #kb-sources{max-height:50vh;overflow:auto!important}  /* Gradio sets an inline overflow:visible */
  /* The sources fold behind a checkbox (below the answer they pushed the input off the screen); no server event. */
  #kb-sources-head{display:none} #kb-sources-toggle{display:block!important}
  #kb-main:not(:has(#kb-sources-toggle input:checked)) #kb-sources{display:none!important}
  #kb-buttons{flex-wrap:nowrap} #kb-buttons>button{min-width:0!important;padding:6px 4px!important}
}"""
CSS = f"{CSS}\n{TYPEAHEAD_CSS}"  # the questions offered below the input while the visitor types


def pick(sample: list[str] | None) -> str:
    """The question of a clicked welcome card sample."""
    return sample[0] if sample else ""


def category_selector(h: ChatHandlers, elem_id: str) -> tuple[gr.Dropdown, gr.State]:
    """A multi-select of the knowledge's categories (hidden when it has none), and the state that holds its choice.

    Events read the state, not the dropdown: the page's /chat and /retrieval_test API endpoints keep the inputs
    they had before categories existed (a Gradio state needs no value from a client)."""
    names = h.bot.categories()
    selector = gr.Dropdown(
        names,
        value=[],
        multiselect=True,
        label="分类（不选 = 全部）/ Categories (none = all)",
        elem_id=elem_id,
        visible=bool(names),
        interactive=True,
    )
    chosen = gr.State([])
    selector.change(lambda value: list(value or []), [selector], [chosen], **PRIVATE)
    return selector, chosen


def build_demo(
    kb: KnowledgeBase, settings: Settings, admin: AdminAuth | None = None, publishers: PublisherAuth | None = None
) -> AdminBlocks:
    """The Gradio Blocks app for knowledge base ``kb``; the caller queues and launches it (with ``css=CSS``).

    The knowledge, inbox and log tabs exist only with admin credentials (``ui.admin``), and serve only requests
    with an admin login (``demo.admin.router()`` serves it at /admin/login). ``publishers``: the accounts whose
    login (``publishers.router()``, /publisher/login) publishes when ``knowledge.require_approval`` asks for it.
    """
    h = ChatHandlers(kb, settings)
    admin = admin or AdminAuth.from_settings(settings)
    # delete_cache: uploads never imported are deleted after 15 min (imported ones at once), all at shutdown.
    with AdminBlocks(admin, title=settings.ui.title, delete_cache=(900, 900)) as demo:
        header = gr.Markdown(h.header(None), elem_id="kb-header")
        with gr.Tab("对话 / Chat", id="chat"):
            mode = gr.Dropdown(
                h.mode_choices(),
                value=FOLLOW,
                label="检索模式（仅本会话）/ Mode (this session only)",
                elem_id="kb-mode",
                interactive=True,
            )
            selector, categories = category_selector(h, "kb-categories")
            with gr.Row(elem_id="kb-main", equal_height=False):
                with gr.Column(scale=3, min_width=320):
                    chatbot = gr.Chatbot(
                        label="对话 / Chat",
                        height=460,
                        elem_id="kb-chat",
                        sanitize_html=True,
                        allow_tags=False,
                        feedback_options=FEEDBACK_OPTIONS,
                    )
                    # answer index -> turn id in the conversation log, for feedback; the page's hand-off conversation
                    # (bot/ui/visitor_desk.py)
                    turns, visit = gr.State({}), gr.State(None)
                    after_answer = feedback_controls(kb.recorder, chatbot, turns, settings.feedback)
                with gr.Column(scale=2, min_width=320):
                    gr.Markdown("### 来源 / Sources", elem_id="kb-sources-head")
                    gr.Checkbox(
                        False, label="显示来源 / Show the sources", container=False, elem_id="kb-sources-toggle"
                    )
                    sources = gr.HTML(elem_id="kb-sources")
            message = gr.Textbox(
                placeholder="输入问题，回车发送 / Type a question and press Enter",
                show_label=False,
                elem_id="kb-input",
                # One past the cap: a longer paste still reaches the bot as "too long", which says so.
                max_length=settings.limits.max_message_chars + 1,
            )
            suggested = typeahead_list(kb.typeahead, h.limits.typeahead, message, categories)
            with gr.Row(elem_id="kb-buttons"):
                send = gr.Button("发送 / Send", variant="primary", elem_id="kb-send")
                retry = gr.Button("重试 / Retry", elem_id="kb-retry")
                undo = gr.Button("撤销 / Undo", elem_id="kb-undo")
                clear = gr.Button("清空 / Clear", elem_id="kb-clear")
            samples = h.examples()
            examples = gr.Dataset(
                components=[message],
                samples=samples,
                label="大家都在问 / Popular questions",
                elem_id="kb-examples",
                visible=bool(samples),
            )
        with gr.Tab("检索测试 / Retrieval test", id="retrieval"):
            query = gr.Textbox(label="查询（不调用大模型）/ Query (no LLM)", elem_id="kb-rt-query")
            rt_selector, rt_categories = category_selector(h, "kb-rt-categories")
            run = gr.Button("检索 / Search", elem_id="kb-rt-run")
            table = gr.HTML(elem_id="kb-rt-results")
        admin_pages = []  # shown to admins only; without admin credentials there are none
        if admin.enabled:
            with demo.admin_only(), gr.Tab("知识管理 / Knowledge", id="knowledge", visible=False) as knowledge:
                review = edit_review(kb, settings, publishers)
                record_link = knowledge_tab(kb, limits=h.limits, review=review)
            admin_pages = [
                knowledge,
                *admin_tabs(demo, kb, settings.log, topic_finder_from_settings(settings), record_link),
                testsets_page(demo, kb, settings),
            ]
        admin_view(demo, admin_pages, gr.Markdown(visible=False, elem_id="kb-admin-link"))

        turn_out = [chatbot, message, sources, header, mode, turns]
        # While an index builds the header shows its progress, refreshed every 2 s by itself (then the timer stops).
        ticker = gr.Timer(2.0, active=True)
        ticker.tick(h.header_tick, [mode], [header, ticker], **PRIVATE)
        # While the conversation has a ticket, a person's replies are fetched into the chat every couple of seconds.
        staff = VisitorDesk(kb.desk)
        replies = gr.Timer(POLL_SECONDS, active=False)
        replies.tick(staff.poll, [visit, chatbot], [chatbot, visit, replies], **PRIVATE)
        chat_in = [message, chatbot, mode, turns, categories, visit]
        for answered in (
            message.submit(h.chat, chat_in, turn_out, api_name="chat"),
            send.click(h.chat, chat_in, turn_out, **PRIVATE),
            chatbot.option_select(h.suggestion, chat_in[1:], turn_out, **PRIVATE),
            # A welcome card's question is asked at once, as if typed and sent.
            examples.click(pick, [examples], [message], **PRIVATE).then(h.chat, chat_in, turn_out, **PRIVATE),
            picked(suggested, message).then(h.chat, chat_in, turn_out, **PRIVATE),
        ):
            answered.then(h.arm, [mode], [ticker], **PRIVATE).then(None, js=SHOW_ANSWER_START, **PRIVATE)
            after_answer(answered.then(staff.arm, [visit], [replies], **PRIVATE))
        retry.click(h.retry, [chatbot, mode, turns, categories, visit], turn_out, api_name="retry")
        undo.click(h.undo, [chatbot], [chatbot, message, sources], api_name="undo").then(
            lambda history, ids: forget_after(ids, len(history or [])), [chatbot, turns], [turns], **PRIVATE
        )
        clear.click(lambda: ([], "", "", {}), None, [chatbot, message, sources, turns], **PRIVATE)
        selector.change(h.welcome, [selector], [examples], **PRIVATE)  # the card of the categories chosen
        mode.input(h.header, [mode], [header], **PRIVATE)
        # A new page follows the configured mode now (config.yaml may have changed since start); nothing is built.
        demo.load(h.page_defaults, None, [header, mode, examples, selector, rt_selector], **PRIVATE)
        demo.load(new_visit, None, [visit], **PRIVATE)
        query.submit(h.retrieval_test, [query, rt_categories], [table], api_name="retrieval_test")
        run.click(h.retrieval_test, [query, rt_categories], [table], **PRIVATE)
    return demo
