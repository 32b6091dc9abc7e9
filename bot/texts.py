"""Every bilingual text a chat user, a widget visitor or an admin reads (Chinese first), in one place, so that
the same situation reads the same on every front end and a translation has one file to change. Config defaults
that deployers edit (prompts, the privacy refusal, the hand-off's contact) stay in bot/config/settings.py; log
lines are English (bot/serving/logfilter.py).
"""

from __future__ import annotations

# -- bot/chat/bot.py -------------------------------------------------------------------------------
EMPTY_REPLY = "请输入您的问题。/ Please type a question."
SEARCH_DOWN_NOTICE = (
    "检索服务暂时不可用，请稍后再试。/ The search service is unavailable right now; please try again shortly."
)

# -- bot/chat/cleaning.py --------------------------------------------------------------------------
TRUNCATED_NOTICE = (
    "消息过长，只使用了前 {n} 个字符。/ The message was too long; only its first {n} characters were used."
)

# -- bot/chat/compose.py ---------------------------------------------------------------------------
RETRIEVAL_ONLY_LABEL = "【仅检索模式 / Retrieval-only】"
OTHERS_LABEL = "其他相关条目 / Other related entries:"
PART_NOT_FOUND = "（没有找到足够相关的条目 / No entry matched this part well enough.）"

# -- bot/chat/expensive.py -------------------------------------------------------------------------
LONG_BUSY = (
    "长问题太多，正在排队处理，请稍后再试，或把问题写短一些。/ Too many long questions are being answered right now; "
    "please try again shortly, or ask a shorter question."
)

# -- bot/chat/generate.py --------------------------------------------------------------------------
LLM_DOWN_NOTICE = (
    "大模型暂时不可用，以下是检索到的知识。/ The LLM is unavailable right now; here is the retrieved knowledge."
)
CUT_NOTICE = "（回答被中断 / The answer was cut off.）"

# -- bot/chat/llm.py ------------------------------------------------------------------------------
BUSY = (
    "大模型繁忙，请稍后再试。/ The LLM is busy ({limit} calls in flight for {waited:g} s); "
    "raise llm.max_concurrency or try again shortly."
)

# -- bot/chat/offers.py ----------------------------------------------------------------------------
CLARIFY_HEAD = "您想问的是：/ Did you mean:"
CLARIFY_TAIL = "请回复序号或点选一项。/ Reply with a number or pick one."
CONFIRM_TEMPLATE = "您是想问「{question}」吗？请回复“是”或“不是”。/ Did you mean “{question}”? Reply yes or no."
# several candidates just short of the answer threshold: not "nothing found", but unsure which one was meant
UNSURE_HEAD = "我不太确定，您是想问：/ I'm not sure — did you mean:"
REPHRASE_REPLY = (
    "好的，请换个说法再问一次，说得具体一些会更容易找到答案。/ All right, please ask again in other words; more "
    "detail makes the answer easier to find."
)

# -- bot/chat/respond.py ---------------------------------------------------------------------------
VERBATIM_LABEL = "【知识库原文 / Straight from the knowledge base】"

# -- bot/chat/status.py --------------------------------------------------------------------------
NOT_BUILT = (
    "{mode} 索引尚未建立，下一条消息会建立它（可能需要一些时间）。"
    "/ The {mode} index is not built yet; the next message builds it (this may take a while)."
)
KNOWLEDGE_PROBLEM = (
    "知识库有问题，仍在使用上一次有效的知识；管理员可在“知识管理”页或日志中查看详情。"
    "/ The knowledge has a problem; the last good knowledge is still serving (an admin sees the details in the "
    "Knowledge tab or the log)."
)
CONFIG_PROBLEM = (
    "配置文件 config.yaml 的修改有错误，仍在使用之前的检索模式；管理员可在“知识管理”页或日志中查看详情。"
    "/ The last edit of config.yaml has an error; the previous retrieval mode is still in use (an admin sees the "
    "details in the Knowledge tab or the log)."
)
BUILDING_RESULTS = (
    "{mode} 索引正在构建，完成后这里会显示它的结果（进度见页面顶部）。"
    "/ The {mode} index is still building; its results show here once it is done (progress: top of the page)."
)

# -- bot/search/es_searcher.py ---------------------------------------------------------------------
FALLBACK_NOTICE = (
    "⚠️ Elasticsearch 不可用，已改用内置检索引擎。/ Elasticsearch is unavailable; using the embedded search engine."
)

# -- bot/search/integrity.py -------------------------------------------------------------------------
BUILDING_NOTICE = "索引构建中…暂由 {mode} 模式回答。/ Index building… answering from the {mode} mode meanwhile."
PARTIAL_NOTICE = (
    "索引构建中…暂只按条目的问题匹配，拿不准时会先确认。"
    "/ Index building… matching the entries' questions only meanwhile, and asking when unsure."
)
BUILDING_ALONE = "索引构建中…暂无检索结果。/ Index building… no search results yet."
HEALING_NOTICE = (
    "索引已损坏，正在后台重建…暂由 {mode} 模式回答。"
    "/ The index is damaged and being rebuilt… answering from the {mode} mode meanwhile."
)
HEALING_ALONE = "索引已损坏，正在后台重建…/ The index is damaged and being rebuilt in the background…"

# -- bot/api/routes.py -----------------------------------------------------------------------------
RATE_LIMITED = "消息太频繁，请稍等一分钟再试。/ Too many messages; please wait a minute and try again."
INTERNAL_ERROR = "内部错误，请重试；问题已记录在日志中。/ Internal error; please try again. It was logged."

# -- bot/api/widget.py -----------------------------------------------------------------------------
FOREIGN = "此网站未获准使用本聊天窗口 / This site may not use this chat widget."
BAD_TOKEN = "聊天窗口的令牌无效 / The widget token is not valid."
SESSION_FULL = "本次对话的消息已达上限，请刷新页面后再试。/ This conversation has reached its limit; reload the page."
DAY_FULL = "今天的消息已达上限，请明天再试。/ Today's limit of messages is reached; please try again tomorrow."
TOO_FAST = "发送太频繁，请稍等一分钟。/ Too many messages; please wait a minute."
BAD_REQUEST = "请求无效 / Bad request"
NO_SUCH_TURN = "找不到本对话中的这条回答 / No such answer in this conversation."

# -- bot/ui/admin.py -------------------------------------------------------------------------------
NOT_ADMIN = "需要管理员登录 / Admin login required"
DUPLICATE_QUESTION = (
    "未保存：条目 {entry} 已经有这个问题（“{question}”）；请编辑该条目，或用“添加为已有条目的问法”。"
    "/ Not saved: entry {entry} already asks “{question}”; edit it, or use “Add as a phrasing of an entry”."
)
ADMIN_OFF = (
    "管理功能未启用：请设置环境变量 {user} 和 {password} 后重启。"
    "/ Admin is off: set the environment variables {user} and {password}, then restart."
)

# -- bot/ui/analytics_tab.py -----------------------------------------------------------------------
LOG_OFF = (
    "<div class='kb-notice'>对话日志已关闭（config.yaml 的 log.enabled）或无法打开，见服务器日志。"
    "/ The conversation log is off (log.enabled in config.yaml) or could not be opened; see the server log.</div>"
)

# -- bot/ui/feedback.py ----------------------------------------------------------------------------
THANKS = "谢谢反馈！/ Thanks for the feedback!"
NOT_STORED = "反馈未能保存（对话日志不可用）。/ The feedback was not stored (the conversation log is unavailable)."

# -- bot/ui/guard.py -------------------------------------------------------------------------------
TOO_MANY = "操作太频繁，请稍等一分钟再试。/ Too many requests; please wait a minute and try again."
UPLOAD_GONE = (
    "上传的文件已处理或已过期，请重新选择文件。/ The uploaded file was already used or expired; choose it again."
)
UPLOADS_ADMIN_ONLY = "只有管理员可以上传文件 / Only a logged-in admin may upload files."
UPLOADS_LIMITED = "上传太频繁，请稍等一分钟再试。/ Too many uploads; please wait a minute and try again."
BODY_TOO_LARGE = "请求过大（上限 {limit} 字节）/ The request is too large (at most {limit} bytes)."

# -- bot/ui/knowledge_tab.py -----------------------------------------------------------------------
NOT_LOADED = (
    "<div class='kb-notice'>❌ 请先从键列表或表格载入要删除的条目 / Load the entry to delete first "
    "(from the key list or the table)</div>"
)
NEW_MODE = (
    "<div class='kb-mode'>🆕 新条目 / New entry — 保存时新增，不会覆盖已有条目 / saving adds it, never overwrites</div>"
)

# -- bot/ui/restore.py -----------------------------------------------------------------------------
NONE_KEPT = "<div class='kb-notice'>没有历史版本 / No kept versions of this file</div>"

# -- bot/cli/eval.py -------------------------------------------------------------------------------
ANSWERS_NEED_LLM = (
    "--answers 需要配置大模型（在环境变量 {env} 中设置 API key）。/ "
    "--answers needs an LLM: set the API key in the {env} environment variable."
)

# -- bot/chat/last_resort.py --------------------------------------------------------------------------
DID_YOU_MEAN = "您是不是想问 / Did you mean:"  # heads the fixed reply's suggestions (a channel may renumber them)

# -- bot/api/im (WeCom, Feishu) ----------------------------------------------------------------------
SORRY = "抱歉，出了点问题，请稍后再问一次。/ Sorry, something went wrong; please ask again in a moment."
PICK_HINT = "回复序号选择。/ Reply with the number."
SOURCES_HEAD = "来源 / Sources:"
ONLY_TEXT = (
    "目前只能回答文字消息，请用文字提问。/ Only text messages can be answered for now; please type your question."
)
CUT_SHORT = "…（内容过长，已截断 / cut short）"

# -- bot/chat/routing.py ------------------------------------------------------------------------------
ROUTED = "以下回答来自「{label}」知识库 / Answered from the {label} knowledge base"

# -- bot/handoff/desk.py: the hand-off to a person ----------------------------------------------------
HANDOFF_OFFER = "需要为您转人工吗？/ Shall I get a person?"  # closes a reply that offers a person (read back from it)
HANDOFF_BUTTON = "转人工 / Get a person"  # the offer's button; it sends HANDOFF_ACCEPT
HANDOFF_ACCEPT = "转人工"
HANDOFF_OFFER_HINT = "回复“是”或“转人工”即可。/ Reply yes to get one."  # where there are no buttons (WeCom)
HANDOFF_WAIT = (
    "好的，已为您转接人工客服，工作人员会在这里回复您，请稍候。"
    "/ OK, a member of staff will reply here in this chat; please wait a moment."
)
HANDOFF_CLOSED = (
    "好的，已为您转接人工客服。现在是非工作时间，工作人员将于{when_zh}起在这里回复您。"
    "/ OK. We are closed now; a member of staff will reply here from {when_en}."
)
HANDOFF_NEVER_OPEN = (
    "好的，已为您登记转人工的请求，但目前没有安排工作时间。{contact}"
    "/ Your request is logged, but no staff hours are scheduled."
)
HANDOFF_PASSED = "好的，已将您的请求转告工作人员。{contact}"
HANDOFF_NO_DESK = "目前这里没有人工客服。{contact}"
HANDOFF_ALREADY = (
    "您的转人工请求已在排队，工作人员会在这里回复您。/ Your request for a person is already waiting; a member of "
    "staff will reply here."
)
CONTACT_DEFAULT = (
    "如需帮助，请通过本网站公布的联系方式联系我们。/ Please use the contact details published on this site."
)
NOT_SEARCHED = "本轮没有检索知识库。/ The knowledge was not searched for this message."
STAFF_LABEL = "👤 {name}（人工客服 / staff）"
STAFF_JOINED = "人工客服 {name} 已接入。/ {name} (staff) has joined the conversation."
STAFF_RESOLVED = (
    "人工客服已结束本次对话，接下来由机器人继续为您解答。/ The staff member closed the conversation; the bot answers "
    "again from here."
)
STAFF_IDLE = (
    "人工客服暂时没有回复，接下来由机器人继续为您解答；需要时可再次发送“转人工”。/ No reply from staff for a while; "
    "the bot answers again (send “转人工” to ask for a person again)."
)
STAFF_EXPIRED = (
    "抱歉，暂时没有人工客服接待您的请求，接下来由机器人继续为您解答。{contact}"
    "/ Sorry, nobody from staff took your request in time; the bot answers again."
)

# -- bot/conversations/outcomes.py (feedback the chat page asks for) -------------------------------
# The thumbs-down reasons a visitor picks from, by the code analytics count them under.
DOWN_REASONS = (
    ("wrong", "答案错误 / Wrong answer"),
    ("outdated", "内容过时 / Out of date"),
    ("not_asked", "答非所问 / Not what I asked"),
    ("incomplete", "不完整 / Incomplete"),
    ("other", "其他 / Other"),
)
ASK_SOLVED = "这个回答解决您的问题了吗？ / Did this answer solve your problem?"
SOLVED_YES = "是 / Yes"
SOLVED_NO = "否 / No"
SOLVED_REASON = "已解决 / Solved"
NOT_SOLVED_REASON = "未解决 / Not solved"
