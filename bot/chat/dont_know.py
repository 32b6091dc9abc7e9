"""The LLM's "I don't know": a grounded reply that says the references do not answer the question.

Such a reply is a refusal dressed as an answer; the ladder treats it as a miss (QnABot on AWS does the same with
a regular expression). Only short replies, or replies that open with the phrase, count: a long answer that
mentions in passing that one detail is unknown ("…，具体时间没有相关信息") still answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DONT_KNOW_PATTERNS = (
    r"(根据|从|依据)?(已知|现有|提供的|给出的|上述|以上)?(的)?(信息|资料|参考资料|内容|知识)(中)?(无法|不能|没法|难以)(回答|确定|得知|判断)",
    r"(没有|未|并未|暂无|找不到|未能找到|没有找到)(提供|提到|包含|涉及)?(相关|有关|对应|这方面)(的)?(信息|资料|内容|说明|答案)",
    r"(参考资料|资料|信息|知识库)(中)?(没有|未|并未)(提到|提及|涉及|包含|说明)",
    r"我(不知道|不清楚|无法回答|回答不了|没法回答)",
    r"\bi (don'?t|do not) know\b",
    r"\b(cannot|can'?t|unable to) (answer|determine|find)\b",
    r"\b(no|not enough) (relevant )?information\b",
    r"\b(the )?(references|context|provided information|documents?) (do(es)? not|don'?t) (contain|mention|say|cover)",
)
OPENING_CHARS = 60  # the phrase must appear this early in a longer reply
SHORT_REPLY_CHARS = 160  # a reply this short that says it anywhere is a refusal


class DontKnowDetector:
    """Tells a reply that declines to answer from one that answers."""

    def __init__(self, extra: Sequence[str] = ()):
        self.pattern = re.compile("|".join(f"(?:{p})" for p in (*DONT_KNOW_PATTERNS, *extra)), re.IGNORECASE)

    def declines(self, reply: str) -> bool:
        """True when ``reply`` says it cannot answer from the references."""
        text = " ".join(reply.split())
        if not text:
            return False
        found = self.pattern.search(text)
        return found is not None and (len(text) <= SHORT_REPLY_CHARS or found.start() < OPENING_CHARS)
