"""Telling a follow-up ("那珠海校区呢？") from a message that stands on its own ("谢谢", "今天天气怎么样").

Without an LLM to rewrite follow-ups, the bot searches a follow-up together with the previous question. Doing
that for every short message made "谢谢" or "你好" after an answered question return the previous answer
again, so only messages that *read* as follow-ups are combined:

- elliptical questions that lean on the last one: "…呢" ("那珠海校区呢？", "英文名呢"), or that open with a
  connective ("那…", "那么…", "还有…", "and …", "what about …", "how about …");
- anaphoric questions that point back with a pronoun and name nothing else ("它在哪里", "他是谁",
  "when was it founded?").

Greetings, thanks, farewells and other small talk never are; neither is anything else (a question that is
complete on its own). The rule is measured on tests/test_followup.py's list of pairs.
"""

from __future__ import annotations

import re

# Whole-message small talk, after punctuation and spaces are stripped (lower-cased for English).
_SMALL_TALK = re.compile(
    r"^(你好|您好|嗨|哈喽|哈啰|早上好|上午好|中午好|下午好|晚上好|早安|晚安|在吗|在不在|谢谢|谢谢你|谢谢您|多谢|感谢|感谢你|"
    r"辛苦了|辛苦啦|好的|好|好吧|嗯|嗯嗯|哦|噢|哦哦|ok|okay|行|可以|明白了|知道了|懂了|收到|再见|拜拜|哈+|呵呵|666+|"
    # English without spaces: the punctuation pass below removes them too
    r"hi|hello|hey|there|thanks|thankyou|alot|verymuch|thx|bye|goodbye|seeyou|goodmorning|goodevening|goodnight|"
    r"great|cool|nice|gotit)+$"
)
_PUNCT = re.compile(r"[\s,，.。!！?？~～、;；:：…\"'“”‘’()（）]+")
# A Chinese message that ends in 呢 asks "and what about X?" — unless it is a plain 呢 of mood after a full question.
_ZH_ELLIPSIS = re.compile(r"呢[?？!！。.~～\s]*$")
_ZH_OPENERS = re.compile(r"^(那|那么|那个|那它|那他|那她|还有|另外|至于|然后|接着|再问|同样|也)")
# Pronouns that stand for something said before; demonstratives only when no noun follows ("这个呢", "那里有吗",
# not "这个机器人是什么"); 他 not inside 其他/吉他.
_ZH_ANAPHORA = re.compile(
    r"(它|(?<![其吉])他|她|该校|上述|刚才说的|上面说的|"
    r"(这个|那个|这些|那些|这里|那里|这儿|那儿)(?=$|[呢吗么是在有怎多几要能可会的啊呀?？]))"
)
_EN_OPENERS = re.compile(r"^(and|but|also|what about|how about|what of|same for|and what about)\b", re.IGNORECASE)
_EN_ANAPHORA = re.compile(
    r"\b(it|its|it's|they|them|their|that|this|those|these|there|he|she|him|her)\b", re.IGNORECASE
)
MAX_CHARS = 30  # longer messages carry their own subject


def is_small_talk(message: str) -> bool:
    """True for greetings, thanks, farewells and acknowledgements."""
    return bool(_SMALL_TALK.match(_PUNCT.sub("", message).lower() if message.isascii() else _PUNCT.sub("", message)))


def reads_as_followup(message: str) -> bool:
    """True when a message leans on the previous question (elliptical or anaphoric), never for small talk."""
    text = message.strip()
    if not text or len(text) > MAX_CHARS or is_small_talk(text):
        return False
    if text.isascii():
        words = re.findall(r"[a-z0-9']+", text.lower())
        return bool(_EN_OPENERS.match(text)) or (len(words) <= 8 and bool(_EN_ANAPHORA.search(text)))
    return bool(_ZH_ELLIPSIS.search(text) or _ZH_OPENERS.match(text) or _ZH_ANAPHORA.search(text))
