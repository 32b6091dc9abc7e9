"""Telling a follow-up ("那珠海校区呢？") from a message that stands on its own ("谢谢", "今天天气怎么样").

Without an LLM to rewrite follow-ups, the bot searches a follow-up together with the previous question. Doing
that for every short message made "谢谢" or "你好" after an answered question return the previous answer
again, so only messages that *read* as follow-ups are combined:

- elliptical questions that lean on the last one: "…呢" ("那珠海校区呢？", "英文名呢"), or that open with a
  connective ("那…", "那么…", "还有…", "and …", "what about …", "how about …");
- anaphoric questions that point back with a pronoun and name nothing else ("它在哪里", "他是谁",
  "when was it founded?").

Greetings, thanks, farewells and other small talk never are; neither is anything else (a question that is
complete on its own). The rule is measured on tests/chat/test_followup.py's list of pairs.
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


# -- the follow-up as a standalone query (retrieval only) -------------------------------------------------------
# "那深圳呢？" after "珠海校区地址是什么？" asks for 深圳 in 珠海's place. Searching both messages together found the
# previous answer again (its words outnumber the new subject's), so the subject is put in the previous question's
# slot: the tokens it lines up with (same last word: 珠海校区 → 深圳校区; shared affix: 医学部 → 工学部; same kind:
# a place for a place, a person, a number, a verb, a Latin word), else the last noun phrase. Measured on the pairs
# in tests/chat/test_followup_subjects.py.
_LEAD = re.compile(
    r"^(那么|那个|那|还有|另外|至于|然后|接着|再问一下|再问|同样|也|and what about|what about|how about|what of|"
    r"same for|and|also|but)\s*",
    re.IGNORECASE,
)
_TAIL = re.compile(r"(的情况|怎么样|如何|呢|吗|么|呀|啊|嘛)+$")
_ZH_QUESTION = re.compile(r"什么|怎么|哪|几|多少|谁|为什么|如何|是否|能否|可以吗|有没有")
_EDGE_PUNCT = re.compile(r"^[\s,，.。!！?？~～、;；:：…\"'“”‘’]+|[\s,，.。!！?？~～、;；:：…\"'“”‘’]+$")
# Tags of words that carry no subject: pronouns and question words, prepositions, particles, punctuation.
_FUNCTION_TAGS = ("r", "p", "u", "y", "x", "c", "e", "o", "w", "d")
_NOUN_TAGS = ("n", "s", "j", "l", "i", "eng", "m", "b", "vn", "an", "g")
_EN_STOP = frozenset(
    re.findall(
        r"\w+",
        "what which who whom whose when where why how is are was were be do does did i you we it the a an to of in on "
        "for with can could should would will my your me use get",
    )
)


def _tagged(text: str) -> list[tuple[str, str]]:
    """(word, part-of-speech tag) pairs that join back into ``text`` (jieba's default dictionary, loaded once)."""
    # jieba.posseg costs about 0.7 s and 100 MB (its tag table and HMM), paid at the first retrieval-only follow-up
    # only: with an LLM follow-ups are rewritten by it and this never runs.
    import jieba.posseg

    return [(w.word, "x" if not w.word.strip() else w.flag) for w in jieba.posseg.cut(text)]


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` have in common."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _kind(word: str, tag: str) -> str:
    if word.isascii() and any(c.isalpha() for c in word):
        return "latin"
    if tag == "m" or word.isdigit():
        return "number"
    for prefix, kind in (("ns", "place"), ("nr", "person"), ("nt", "org"), ("v", "verb")):
        if tag.startswith(prefix):
            return "noun" if tag == "vn" else kind  # a verbal noun (检索) names a thing
    return "noun" if tag.startswith(_NOUN_TAGS) else "other"


def _content(word: str, tag: str) -> bool:
    if word.isascii():
        return any(c.isalnum() for c in word) and word.lower() not in _EN_STOP
    return not tag.startswith(_FUNCTION_TAGS) and word not in ("是", "有")


def followup_subject(message: str) -> str:
    """The new subject of an elliptical follow-up ("那深圳呢？" → "深圳"), or "" when it has none to put in a slot
    (anaphora such as "它在哪里", or a question of its own)."""
    text = message.strip()
    if _ZH_ANAPHORA.search(text) or _ZH_QUESTION.search(text) or (text.isascii() and _EN_ANAPHORA.search(text)):
        return ""
    for _ in range(3):
        text = _TAIL.sub("", _LEAD.sub("", _EDGE_PUNCT.sub("", text))).strip()
    if not text:
        return ""
    if any(tag.startswith("r") for _, tag in _tagged(text)):  # a question word: it asks something of its own
        return ""
    return text


def _slot(previous: list[tuple[str, str]], subject: list[tuple[str, str]], modifier: bool) -> tuple[int, int] | None:
    """The token range of ``previous`` the subject replaces (empty range: inserted there), or None."""
    content = [i for i, (w, t) in enumerate(previous) if _content(w, t)]
    if not content or not subject:
        return None
    last = subject[-1][0]
    if len(subject) > 1:  # same last word: 珠海校区 → 深圳校区, 2023年 → 2022年, 物理类 → 历史类
        for j in content:
            if previous[j][0] == last and j - len(subject) + 1 >= 0:
                return j - len(subject) + 1, j + 1
    whole = "".join(w for w, _ in subject)
    best, where = 0, None
    for i in content:  # a shared affix: 医学部 → 工学部, 校训 → 校歌
        word = previous[i][0]
        n = max(_shared(word, whole), _shared(word[::-1], whole[::-1]))
        if n > best and word != whole and not word.isascii():
            best, where = n, (i, i + 1)
    if where:
        return where
    kind = _kind(*subject[0])
    same = [i for i in content if _kind(*previous[i]) == kind]
    if kind == "latin" and any(c.isupper() for c in whole):  # a name for a name: Qwen for DeepSeek
        same = [i for i in same if any(c.isupper() for c in previous[i][0])] or same
    if kind in ("place", "person", "number", "verb", "latin") and same:
        return same[0], same[0] + 1
    # The last noun phrase (the university's name, an org, is the scene, not the subject).
    nouns = [i for i in content if _kind(*previous[i]) not in ("verb", "other", "org")]
    if not nouns:
        return None
    end = start = nouns[-1]  # the last noun phrase: its contiguous noun-like words
    while start - 1 in nouns:
        start -= 1
    # A modifier ("英文的") or a Latin name without a Latin slot ("dense") goes before the phrase, not in its place.
    insert = modifier or (kind == "latin" and whole.islower())  # "dense" qualifies; "Ollama" names another thing
    return (start, start) if insert else (start, end + 1)


def followup_queries(previous: str, message: str, answered: bool) -> list[str]:
    """Standalone queries for a follow-up without an LLM, best guess first: the new subject in the previous
    question's slot; then, when the message found nothing on its own (``answered`` False), the two together."""
    queries = []
    subject = followup_subject(message)
    if subject:
        modifier = subject.endswith("的") and len(subject) > 1
        core = (subject[:-1] if modifier else subject).strip()
        tokens = _tagged(previous)
        slot = _slot(tokens, _tagged(core), modifier)
        if slot is not None:
            words = [w for w, _ in tokens]
            query = "".join([*words[: slot[0]], core, *words[slot[1] :]])
            if query != previous:
                queries.append(query)
    if not answered:
        queries.append(f"{previous} {message}")
    return queries
