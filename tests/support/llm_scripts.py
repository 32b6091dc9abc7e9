"""Scripted replies for the local LLM server: how to tell the bot's requests apart, and canned answers to them."""

from __future__ import annotations

import json
import re

HYDE_MARK = "Answer the question below"  # HyDE's prompt
FOLLOWUP_MARK = "Standalone question:"  # the follow-up rewrite's prompt
REPHRASE_MARK = "Rephrase the question below"  # the multi-query rewrite's prompt
GRADE_MARK = "Grade how useful each reference"  # the relevance grader's prompt
ANSWER = "根据参考资料 [1]，这是回答。"
HARD = "我想把资料放进机器人"  # finds faq:add, but below the threshold (see test_bot.py)


def scripted(hyde: str = "不知道", answer: str = "根据参考资料 [1]，这是回答。", rewrite: str | None = None):
    """Reply function for the local server: HyDE and rewrite prompts get their own replies, the rest ``answer``."""

    def reply(body):
        last = body["messages"][-1]["content"]
        if HYDE_MARK in last:
            return hyde
        if FOLLOWUP_MARK in last:
            return rewrite or last.split("Last question: ")[1].splitlines()[0]
        return answer

    return reply


def kind(body: dict) -> str:
    """Which of the bot's requests this is: rewrite, hyde, grade or answer."""
    last = body["messages"][-1]["content"]
    for mark, name in ((REPHRASE_MARK, "rewrite"), (HYDE_MARK, "hyde"), (GRADE_MARK, "grade")):
        if mark in last:
            return name
    return "answer"


def grade_by_title(good: str, bad: float = 0.0):
    """Grade 1 for the reference titled ``good``, ``bad`` for the others, read from the request's list."""

    def grade(body):
        listed = re.findall(r'^\[(\d+)\] "(.*?)":', body["messages"][-1]["content"], re.MULTILINE)
        return (
            "好的：\n```json\n"
            + json.dumps({"grades": [{"n": int(n), "grade": 1.0 if title == good else bad} for n, title in listed]})
            + "\n```"
        )

    return grade
