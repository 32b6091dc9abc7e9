"""How well a message and an entry's questions agree, both ways: the words and the specifics (numbers, years).

Coverage (bot/search/relevance.py) asks how much of the message an entry mentions anywhere, and the dense side how
close the meanings are; neither notices that "2022年物理类分数线" names another year than the entry for 2023, or that
the entry "第二校歌" adds a qualifier the visitor never said ("中大校歌"). These signals do, read mostly from the
entry's questions (its ``query`` and ``questions``) and keywords rather than its document:

- **forward**: the share of the message's word weight (IDF, as coverage) found in the entry's best-matching question
  and its keywords: how much of what was asked the entry's question is about;
- **backward**: the share of that question's own word weight the message says: the qualifiers the entry adds and the
  message lacks count against it (both count only when the message shares a word with the entry's questions or
  keywords: an entry found by its document alone is judged by the other signals);
- **conflict**: the message names a number or year, the entry's question or keywords name another one of the same
  kind, and the entry never mentions the message's (2022 asked, the entry is about 2023);
- **other**: the message names one the entry never mentions, though its document names others of that kind (a
  history whose years are all different); **missing**: the entry names none of that kind anywhere;
- **added**: the entry's question names a number or year of a kind the message names none of ("第二");
- **named**: the message names a number, year or date that the entry's question or keywords name too ("1929年中大建成了啥"
  and the entry "中山大学的1929年历史"): the one specific thing asked is what the entry is about, a sign no word
  statistic gives (the message's other words may be ones no entry uses);
- **content**: the share of the message's word weight left once the question words and particles no entry uses are
  set aside ("中大哪年成立的啊": 哪年 and 啊 weigh as much as the rarest word of the knowledge, though they say
  nothing of what is asked), and a word no entry uses that holds a shorter word of the message some entry does
  (心理系 beside 心理). Forward counts only those content words;
- **inside**: the share of the message's word weight held by content words no entry uses as a word that begin or
  end one of the entry's words (接 of 接入, 千问 of 通义千问): a visitor's short form of the entry's term, which word
  coverage cannot find; a verb jieba glues to a modal or a negation before it or a completive after it (能接, 不接,
  关掉) counts by the verb, when that is the entry's word or begins or ends one;
- **unmet**: the message asks for a kind of answer (a time, a person, a place, a number, a price, a contact) that
  the entry neither names in its questions ("创办时间" for "谁创办了中山大学") nor shows in its text (a year, an
  address, a phone number): the college's admissions entry for "人工智能学院在哪";
- **unnamed** (set by :class:`~bot.search.agreeing.AgreeingSearcher`, it needs the list): the message asks for a kind
  of answer that the entry's questions and keywords do not name, while one of the first candidates' do and cover no
  less of the message (``forward``): "深圳校区在哪个区" beside "中山大学深圳校区地址" (the history of that campus shows
  places in its text, but is not about where it is);
- **contrast**: the message names a qualifier of a closed kind (a degree level, a side of a campus or gate, a part of
  the day, a season: 研究生, 南校区, 下午) and the entry's questions or keywords name another of that kind and not the
  message's ("中大计算机研究生分数线" and the entry "计算机学院本科招生专业"): the entry is about a neighbour of what
  was asked, however close the meanings (hybrid asks rather than answers it, ``retrieval.thresholds.<system>.contrast``);
- **across** (set by :class:`~bot.search.agreeing.AgreeingSearcher`, it needs the whole list): the entry's question
  is in another language than the message while other candidates share the message's language: the multilingual
  dense side alone scored it (bot/search/hybrid.py), without the words that count for its rivals.

Numbers are years (1924, "22年"), dates (4月7日) and other numbers (401, 第二, 二级); clock times are ignored.

:func:`adjusted` subtracts their weighted sum from a hit's relevance (``named`` adds), with weights chosen per
retrieval system (``retrieval.agreement``, rewritten by ``python -m bot calibrate --write``); ``AgreeingSearcher``
applies it to a mode's candidates and ranks them again (bot/search/agreeing.py). An entry asked by its exact question loses nothing.
Nor do words count for an entry whose question is in another language than the message (signal ``cross_language``:
a stray Latin name shared is no measure of the rest); its numbers and the kind of answer asked still do.
Three weights reshape the relevance itself before that, for a system whose relevance is word coverage (sparse):
``inside`` adds the share of the message that begins or ends the entry's words, ``content`` divides it by the content
share to that power (the question words no longer count against every entry alike), and ``match`` blends in how well the message and the entry's best question match both ways (the harmonic
mean of forward and backward): for FAQ knowledge, a message that says an entry's question is about that entry more
surely than one whose words its document happens to hold.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from bot.config.retrieval import AgreementWeights
from bot.search.language import CROSS_LANGUAGE
from bot.search.tokenizer import normalize

YEAR = "year"
DATE = "date"
NUMBER = "number"
SPECIFICS_CACHE = 50_000  # entries whose facts (specifics, kinds of answer) stay in memory (LRU)
ACROSS = "across"  # the signal of a candidate in another language than the message among same-language rivals
UNNAMED = "unnamed"  # the signal of a candidate not naming the kind of answer asked beside a first one that does

# The kinds of answer a message can ask for, by the question words of general Chinese and English, the entry
# question words that name each kind, and what an entry's text shows when it holds one. Colloquial uses that ask for
# no such thing are left out: 谁有/谁知道 (does anyone have), 推荐几个 (a few), 在哪改 (where to change a setting:
# a way, not a place), 怎么去掉 (how to remove), 免费用 (free to use).
_ASKS = {
    "price": r"多少钱|价格|价钱|(?<!免)费用|收费|学费|贵不贵|how much does|\bprice|\bcost\b|\bfees?\b",
    "time": r"什么时候|啥时候|何时|哪年|哪一年|几月|几号|哪天|多久|几点|日期|时间|\bwhen\b|what time|how long",
    "person": r"(谁|哪位)(?![有知能可会帮给来推])|什么人|何人|\bwho\b",
    "place": r"(在哪|哪里|哪儿)(?![设改调配看找查填写开关])|什么地方|啥地方|地址|位置|怎么去(?![掉除])|怎么走|\bwhere\b",
    "number": r"多少|(?<![推荐介绍给来找举说])几(个|所|名|位|种|项)|数量|how many",
    "contact": r"电话|联系方式|邮箱|网址|官网|热线|phone|e-?mail|website",
}
_NAMES = {
    "price": r"价格|价钱|费用|收费|学费|price|cost|fee",
    "time": r"时间|日期|何时|哪年|年份|时候|time|date|hours",
    "person": r"人$|者$|校长|院长|主任|书记|领导|负责人|创办人|创始人|人物|名人|校友",
    "place": r"地址|位置|地点|在哪|哪里|路线|交通|address|location",
    "number": r"数量|多少|数目|人数|规模|几个|number",
    "contact": r"电话|联系|邮箱|网址|官网|网站|contact|phone|e-?mail",
}
_SHOWS = {
    "price": r"\d+(\.\d+)?\s*元|免费|收费|价格|费用",
    "time": r"(1[89]|20)\d\d年?|\d{1,2}月|\d{1,2}[日号]|[一二三四五六七八九十]+年|世纪|年代|时间|日期|期间",
    "person": r"校长|院长|主任|书记|创办人|创始人|先生|女士|教授|院士|医生|传教士|主持|担任|作词|作曲"
    r"|由[^，,。；;]{1,20}?(创办|创立|创建|建立|发起|设计)",
    "place": r"地址|位于|坐落|\d+号|[路街道区市省县镇村堂馆厅楼]|广场|校区|校园",
    "number": r"\d|[一二三四五六七八九十百千万两]+[个所名位种项座家人万]",
    "contact": r"\d{3,4}[-－ ]?\d{7,8}|1\d{10}|@|https?://|www\.|电话|邮箱|网址",
}
_ASKED = {kind: re.compile(p) for kind, p in _ASKS.items()}
# Qualifiers of general Chinese and English that exclude each other within their kind, each with the values it
# stands for: 研究生 is a master's or a doctorate, so it contrasts with 本科 but not with 硕士. A side counts only
# before what has sides (东校区, 南门, 北楼), not in a name (东莞, 南京).
_SIDED = r"(?=校|门|区|院|楼|苑|侧|广场|campus|gate)"
_QUALIFIERS: dict[str, tuple[tuple[re.Pattern[str], frozenset[str]], ...]] = {
    kind: tuple((re.compile(p), frozenset(v.split())) for p, v in pairs)
    for kind, pairs in {
        "degree": (
            (r"本科|\bundergraduate|\bbachelor", "bachelor"),
            (r"专科|大专|高职", "associate"),
            (r"研究生|\bpostgraduate|\bgraduate", "master doctor"),
            (r"硕士|\bmaster", "master"),
            (r"博士(?!后)|\bph\.?d\b|\bdoctora", "doctor"),
            (r"博士后|\bpostdoc", "postdoc"),
        ),
        "side": (
            (rf"东{_SIDED}|\beast\b", "east"),
            (rf"南{_SIDED}|\bsouth\b", "south"),
            (rf"西{_SIDED}|\bwest\b", "west"),
            (rf"北{_SIDED}|\bnorth\b", "north"),
        ),
        "daypart": (
            (r"上午|早上|早晨|\bmorning", "morning"),
            (r"中午|\bnoon", "noon"),
            (r"下午|\bafternoon", "afternoon"),
            (r"晚上|夜间|\bevening|\bnight", "evening"),
        ),
        "season": (
            (r"春季|\bspring\b", "spring"),
            (r"夏季|\bsummer\b", "summer"),
            (r"秋季|\bautumn\b", "autumn"),
            (r"冬季|\bwinter\b", "winter"),
        ),
    }.items()
}
_NAMED = {kind: re.compile(p) for kind, p in _NAMES.items()}
_SHOWN = {kind: re.compile(p) for kind, p in _SHOWS.items()}
_TRAILING = re.compile(r"[？?。！!.\s]+$")

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHINESE = "零〇一二两三四五六七八九十百"
# A number in digits (not part of a longer run of letters or digits: "v1", "e5" and "gpt-4o" are names, not numbers),
# a two-digit year ("22年"), or a Chinese numeral that counts something: 第二, 二级, 三轮, 五届.
_ARABIC = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)(?![a-z0-9])")
_SHORT_YEAR = re.compile(r"(?<![\d.])(\d{2})年")
# Clock times (7:00) say nothing about which entry is meant; a month and day (4月7日) is one date.
_TIME = re.compile(r"\d{1,2}[:：]\d{2}")
_DATE = re.compile(r"(?<!\d)(\d{1,2})月(?:(\d{1,2})[日号])?")
_ORDINAL = re.compile(rf"第([{_CHINESE}]+)|([{_CHINESE}]+)(?=[级轮届期批])")
# Words that ask or soften rather than name what is asked: Chinese question words, particles, pronouns and polite
# frames, and their English counterparts. Only those the knowledge never uses are set aside (a knowledge base of
# questions uses 什么 and weighs it as the common word it is there).
_ASKING = (
    "什么 啥 啥子 啥样 多少 几 几个 几点 几时 几年 多久 多大 多长 多远 哪 哪个 哪些 哪里 哪儿 哪年 哪天 哪位 谁 怎么 怎么样 "
    "怎样 咋 咋样 如何 为什么 为啥 是否 能否 是不是 有没有 能不能 可不可以 会不会 吗 呢 啊 吧 呀 哦 嘛 么 啦 呐 哈 呗 咧 "
    "哎 嗯 来着 一下 请问 请 麻烦 想 想问 问 问下 我 我们 你 你们 您 的 了 着 过 得 地 是 有 在 要 能 可以 会 告诉 知道 一 "
    "个 下 都 还 就 又 也 干嘛 干啥 干什么 怎么办 咋办 咋整 咋弄 怎么弄 怎么回事 啥意思 什么意思 到底 究竟 一共 总共 老是 总是 一直 经常 "
    "what which who whom whose when where why how is are was were be do does did i you we it the a an to of in on "
    "for with can could should would will my your me please"
)
ASKING_WORDS = frozenset(_ASKING.split())


@dataclass(frozen=True)
class Specific:
    """A number a text names: ``kind`` year (1900-2099, or "22年"), date (4月7日 → "4-7", 4月 → "4") or number,
    and its value in digits."""

    kind: str
    value: str


def chinese_number(text: str) -> int | None:
    """The value of a Chinese numeral up to 999 (二十三 → 23, 十 → 10, 两 → 2), or None."""
    if not text or any(ch not in _CHINESE for ch in text):
        return None
    total, digit = 0, None
    for ch in text:
        if ch in "十百":
            total += (1 if digit is None else digit) * (10 if ch == "十" else 100)
            digit = None
        else:
            digit = _DIGITS[ch] if digit is None else digit * 10 + _DIGITS[ch]
    return total + (digit or 0)


def specifics(text: str) -> frozenset[Specific]:
    """The numbers and years ``text`` names (normalised: full-width digits count, "2022年" and "22年" are one year)."""
    text = _TIME.sub(" ", normalize(text))
    found: set[Specific] = set()
    for m in _DATE.finditer(text):
        found.add(Specific(DATE, f"{int(m.group(1))}-{int(m.group(2))}" if m.group(2) else str(int(m.group(1)))))
    text = _DATE.sub(" ", text)
    for m in _ARABIC.finditer(text):
        number = m.group(1)
        if "." not in number and 1900 <= int(number) <= 2099 and len(number) == 4:
            found.add(Specific(YEAR, number))
        else:
            found.add(Specific(NUMBER, str(float(number)) if "." in number else str(int(number))))
    for m in _SHORT_YEAR.finditer(text):
        short = int(m.group(1))
        found.discard(Specific(NUMBER, str(short)))
        found.add(Specific(YEAR, str(2000 + short if short < 70 else 1900 + short)))
    for m in _ORDINAL.finditer(text):
        value = chinese_number(m.group(1) or m.group(2))
        if value is not None:
            found.add(Specific(NUMBER, str(value)))
    return frozenset(found)


def qualifiers(text: str) -> dict[str, frozenset[str]]:
    """The closed-kind qualifiers ``text`` names, by kind, as the values they stand for ("研究生" → degree: master,
    doctor; "南校区" → side: south)."""
    text = normalize(text)
    found: dict[str, frozenset[str]] = {}
    for kind, pairs in _QUALIFIERS.items():
        values = frozenset(v for pattern, named in pairs if pattern.search(text) for v in named)
        if values:
            found[kind] = values
    return found


def contrasts(said: Mapping[str, AbstractSet[str]], labelled: Mapping[str, AbstractSet[str]]) -> bool:
    """True when an entry whose questions and keywords name the qualifiers ``labelled`` names, for a kind of those the
    message ``said``, only others ("本科" for "研究生"; "硕士" for "研究生" is no contrast)."""
    return any(kind in labelled and labelled[kind].isdisjoint(values) for kind, values in said.items())


def asked_kinds(text: str) -> frozenset[str]:
    """The kinds of answer ``text`` asks for: time, person, place, number, price, contact ("多少钱" is a price, not
    also a number)."""
    text = normalize(text)
    found = set()
    for kind, pattern in _ASKED.items():
        if pattern.search(text):
            found.add(kind)
            text = pattern.sub(" ", text)
    return frozenset(found)


def named_kinds(labels: Sequence[str]) -> frozenset[str]:
    """The kinds of answer an entry's questions and keywords (``labels``) name or ask for ("地址", "在哪")."""
    labels = [_TRAILING.sub("", normalize(text)) for text in labels]
    return frozenset(kind for kind in _ASKS if any(_NAMED[kind].search(t) or kind in asked_kinds(t) for t in labels))


def shown_kinds(document: str) -> frozenset[str]:
    """The kinds of answer ``document`` shows (a year for a time, an address for a place, a phone number for a
    contact...)."""
    document = normalize(document)
    return frozenset(kind for kind in _ASKS if _SHOWN[kind].search(document))


def offered_kinds(labels: Sequence[str], document: str) -> frozenset[str]:
    """The kinds of answer an entry offers: those its questions (``labels``) name or ask for, and those its
    ``document`` shows."""
    return named_kinds(labels) | shown_kinds(document)


@dataclass(frozen=True)
class Agreement:
    """The agreement signals of one (message, entry) pair (module docstring)."""

    forward: float = 1.0
    backward: float = 1.0
    conflict: bool = False
    other: bool = False
    missing: bool = False
    added: bool = False
    content: float = 1.0
    unmet: bool = False
    named: bool = False
    inside: float = 0.0
    contrast: bool = False
    # Whether the entry's questions and keywords name every kind of answer the message asks for (None: it asks for
    # none); not a signal of its own: whether it counts depends on the other candidates (signal ``unnamed``).
    names_asked: bool | None = None

    def signals(self) -> dict[str, float]:
        """The signals as a hit carries them (``q_forward``, ``q_backward``, ``conflict``, ``other``, ``missing``,
        ``added``, ``content``, ``unmet``, ``named``, ``inside``, ``contrast``)."""
        return {
            "q_forward": round(self.forward, 4),
            "q_backward": round(self.backward, 4),
            "conflict": float(self.conflict),
            "other": float(self.other),
            "missing": float(self.missing),
            "added": float(self.added),
            "content": round(self.content, 4),
            "unmet": float(self.unmet),
            "named": float(self.named),
            "inside": round(self.inside, 4),
            "contrast": float(self.contrast),
        }


def agree_specifics(
    said: AbstractSet[Specific], labelled: AbstractSet[Specific], mentioned: AbstractSet[Specific]
) -> tuple[bool, bool, bool, bool]:
    """(conflict, other, missing, added) for a message naming ``said``, an entry whose questions and keywords name
    ``labelled`` and which mentions ``mentioned`` anywhere (its document too)."""
    conflict = other = missing = False
    for s in said:
        if s in mentioned:
            continue
        if any(x.kind == s.kind for x in labelled):
            conflict = True
        elif any(x.kind == s.kind for x in mentioned):
            other = True
        else:
            missing = True
    said_kinds = {s.kind for s in said}
    added = any(x.kind not in said_kinds for x in labelled)
    return conflict, other, missing, added


def penalty(signals: Mapping[str, float], weights: AgreementWeights) -> float:
    """What ``weights`` take off a relevance for a hit's agreement ``signals`` (0 when it has none; below 0 when
    the entry's question names what the message names, ``named``)."""
    if "q_forward" not in signals:
        return 0.0
    # An entry that shares no word with the message in its questions or keywords was found by its document (a
    # passage of a long guide, a title in other words): its questions say nothing about what was asked. Nor do they
    # in another language than the message (a stray Latin name shared is no measure of the rest).
    words = signals["q_forward"] > 0 and not signals.get(CROSS_LANGUAGE)
    return (
        words * weights.forward * (1.0 - signals["q_forward"])
        + words * weights.backward * (1.0 - signals["q_backward"])
        + weights.conflict * signals["conflict"]
        + weights.other * signals["other"]
        + weights.missing * signals["missing"]
        + weights.added * signals["added"]
        + weights.unmet * signals.get("unmet", 0.0)
        + weights.across * signals.get(ACROSS, 0.0)
        + weights.unnamed * signals.get(UNNAMED, 0.0)
        - weights.named * signals.get("named", 0.0)
    )


def match(signals: Mapping[str, float]) -> float:
    """How well a message and an entry's best question match both ways: the harmonic mean of ``q_forward`` and
    ``q_backward`` (0 without them)."""
    forward, back = signals.get("q_forward", 0.0), signals.get("q_backward", 0.0)
    return 2 * forward * back / (forward + back) if forward + back > 0 else 0.0


def reshaped(relevance: float, signals: Mapping[str, float], weights: AgreementWeights) -> float:
    """``relevance`` plus ``weights.inside`` times the share of the message's words the entry holds inside its own
    (``inside``), divided by the message's content share to the power ``weights.content`` (at most 1), then blended
    with :func:`match` at ``weights.match``; unchanged when these weights are 0, the signals are absent or the
    entry's question is in another language than the message (its words cannot match)."""
    if (
        "q_forward" not in signals
        or not (weights.content or weights.match or weights.inside)
        or signals.get(CROSS_LANGUAGE)
    ):
        return relevance
    relevance = min(1.0, relevance + weights.inside * signals.get("inside", 0.0))
    content = signals.get("content", 1.0)
    scaled = min(1.0, relevance / content**weights.content) if content > 0 else relevance
    return (1.0 - weights.match) * scaled + weights.match * match(signals)


def adjusted(relevance: float, signals: Mapping[str, float], weights: AgreementWeights) -> float:
    """``relevance`` reshaped (:func:`reshaped`) less the agreement penalty, within [0, 1]."""
    return min(1.0, max(0.0, reshaped(relevance, signals, weights) - penalty(signals, weights)))


@dataclass(frozen=True)
class EntryFacts:
    """What agreement reads of one entry: the specifics its questions and keywords name (``labelled``), those all
    its text names (``mentioned``), the kinds of answer it offers (``offers``), those its questions and keywords
    name (``names``) and the qualifiers they name (``qualified``, :func:`qualifiers`)."""

    labelled: frozenset[Specific]
    mentioned: frozenset[Specific]
    offers: frozenset[str]
    names: frozenset[str]
    qualified: Mapping[str, frozenset[str]]


class SpecificsCache:
    """The :class:`EntryFacts` of each entry, remembered by content (LRU)."""

    def __init__(self, size: int = SPECIFICS_CACHE):
        self.size = size
        self._cache: OrderedDict[str, EntryFacts] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, key: str, labels: Sequence[str], everything: str, document: str) -> EntryFacts:
        """The facts of the entry with content hash ``key``: its questions and keywords ``labels``, all its text
        ``everything``, its ``document``."""
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        labelled = frozenset(s for text in labels for s in specifics(text))
        qualified: dict[str, frozenset[str]] = {}
        for text in labels:
            for kind, values in qualifiers(text).items():
                qualified[kind] = qualified.get(kind, frozenset()) | values
        names = named_kinds(labels)
        found = EntryFacts(labelled, labelled | specifics(everything), names | shown_kinds(document), names, qualified)
        with self._lock:
            self._cache[key] = found
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return found
