"""Spotting a message that asks for a person, in Chinese or English.

A request is a message that asks for a person ("转人工", "人工客服", "我要投诉", "talk to a human", "agent
please"), not one that merely contains the words: "人工智能学院在哪？", "人工湖", "转专业到人工智能难吗" and
"what are human resources' hours" name no person to talk to, and "投诉电话是多少？" / "客服电话多少" ask the
knowledge for a phone number. So a request pattern must match and no information word (phone, address, hours,
where, major...) may appear; messages longer than a request ever is are not requests.
"""

from __future__ import annotations

import re
import unicodedata

from bot.search.script import folded

MAX_ZH_CHARS = 40
MAX_EN_WORDS = 20
_PARTICLE = "吧啊呀呢吗哦嘛啦了么"
_ZH_REQUEST = re.compile(
    "|".join(
        [
            rf"(?<!非)人工(?=客服|服务|坐席|座席|接待|接听|回复|处理|介入|$|[{_PARTICLE}])",  # 转人工, 人工客服, 有人工吗
            rf"(?<!是)真人(?=客服|服务|聊|回|对话|说话|来|沟通|接|$|[{_PARTICLE}])",  # 找真人, 真人客服 (not 你是真人吗)
            r"(?:找|联系|接|转|要|叫|呼叫|换|给我|我要|求)(?:一下|个|一个)?(?:你们)?的?(?:在线|人工)?客服",
            rf"客服(?:在吗|在不在|呢|$|[{_PARTICLE}])",
            r"在线客服",
            r"(?:要|想|得|必须|我)投诉|^投诉|投诉(?:你们|一下|$)",
            r"(?:找|联系|叫|要|转|接|换|给我)(?:一下|个)?(?:你们)?的?"
            r"(?:工作人员|负责人|管理员|领导|经理|主管|值班人员|活人|人来)",
            r"(?:和|跟|与|找|让)(?:一个|个)?(?:真|活)?人(?:说话|聊|对话|沟通|谈|回答)",
            r"不(?:想|要)(?:和|跟)?(?:机器人|ai|机器)",
            r"来个人|叫人来|有没有人工|有活人",
        ]
    )
)
# A question about the service (its phone number, address, hours), or about a subject that contains the words.
_ZH_INFO = re.compile(
    r"电话|号码|热线|邮箱|地址|在哪|哪里|几点|时间|什么时候|是什么|什么是|多少|网址|网站|招聘|工资|岗位|专业|学院|课程|"
    r"智能|怎么写|模板|范文"
)
_PERSON = (
    r"(?:an? |the |some |your |one of your )?(?:real |live |actual |human |customer )?"
    r"(?:human|humans|person|people|agent|representative|rep|operator|staff|staff member|customer service|"
    r"customer support|support team|support|employee|manager|supervisor|advisor|adviser|someone|somebody)"
)
_PERSON_STRONG = (  # without "someone": "i need someone to explain this" asks the bot
    r"(?:an? |the |your )?(?:real |live |actual )?"
    r"(?:human|person|agent|representative|operator|staff member|customer service|customer support|manager|supervisor)"
)
_EN_REQUEST = re.compile(
    "|".join(
        [
            rf"\b(?:talk|speak|chat|get in touch)(?: to| with) {_PERSON}\b",
            rf"\b(?:connect|transfer|put|pass|forward|escalate|hand)(?: me| this| it)?(?: over| through)?(?: to| with) {_PERSON}\b",
            rf"^(?:please |pls )?(?:{_PERSON_STRONG}|real person|a real person|human being|humans?)(?: please| pls| now| asap| agent)*$",
            rf"\b(?:i want|i need|i'd like|id like|let me|can i|could i|may i|get me|give me|i wanna|i demand|bring me)"
            rf"(?: to)?(?: talk| speak)?(?: to| with)? {_PERSON_STRONG}\b",
            r"\b(?:i want to|i'd like to|i wanna|i need to|let me|i wish to|i will|i'm going to)"
            r"(?: make| file| lodge| submit| register)?(?: a)? complain(?:t)?\b",
            r"\bi have a complaint\b|^complaint$|^escalate\b",
            r"\b(?:is there|are there|any) (?:a |any )?(?:real )?(?:human|humans|person|people)(?: there| here)?$",
            r"\b(?:not|no|stop|enough)(?: more)?(?: talking to)? (?:a |the |this )?(?:bot|robot|machine)s?\b",
        ]
    )
)
_EN_INFO = re.compile(
    r"\b(?:phone|number|email|e-mail|address|hours|website|url|salary|job|jobs|career|major|course|courses|"
    r"degree|resources|rights|anatomy|body|biology|computer|interaction|estate|travel|secret|based|model|models|"
    r"policy|form|template|letter)\b"
    # a question about machines talking to people: "can a robot talk to a person?"
    r"|^(?:can|could|do|does|will|would) (?:a |an |the )?(?:robots?|bots?|ai|machines?|chatbots?)\b"
)


def _compact(text: str) -> str:
    text = folded(text)  # 轉人工 is 转人工
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def _words(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    return " ".join(re.findall(r"[a-z0-9']+", text))


def is_handoff_request(message: str) -> bool:
    """True when the message asks for a person (Chinese or English), not when it asks about one."""
    compact = _compact(message)
    if not compact:
        return False
    chinese = re.search(r"[\u4e00-\u9fff]", compact)
    if chinese and len(compact) <= MAX_ZH_CHARS and _ZH_REQUEST.search(compact) and not _ZH_INFO.search(compact):
        return True
    words = _words(message)
    return 0 < len(words.split()) <= MAX_EN_WORDS and bool(_EN_REQUEST.search(words)) and not _EN_INFO.search(words)
