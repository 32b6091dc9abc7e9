"""A word the knowledge never uses, read as the knowledge's word it sounds like: one character mistyped with a
pinyin input method (效训 for 校训, 图书管 for 图书馆, 地只 for 地址).

A visitor types pinyin and picks a character; picking the wrong one of the same sound is the commonest typo in
Chinese messages, and it turns a word of the knowledge into one no entry holds, so word coverage finds it nowhere.
The message is cut as jieba reads it (precise mode); a run of one or two of its pieces, two to four Chinese
characters long, that is no dictionary word and no word of the knowledge, is compared with the words that differ
from it in one character usually read exactly as the typed one, tone included (pypinyin's readings of the 3,755 most
common characters: GB 2312 level 1). When exactly one of them is a word of the knowledge, the run is searched as that
word or as typed. A correctly typed word is left alone (it is a dictionary word); so are runs of particles and
question words, and runs with several words of that sound in the knowledge (ambiguous). The tone is required because
the pieces of a phrase typed right are often one character away from a word of another tone (买东西 and 卖东西, 手机好
and 手机号: on LCQMC's questions, half of what a toneless comparison read was such a phrase).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.search.synonyms import Form
from bot.search.tokenizer import Tokenizer, is_chinese, normalize

MAX_PIECES = 2  # pieces of the message a typed word may span (图书|管)
MIN_CHARS, MAX_CHARS = 2, 4  # a single character has too many of the same sound to tell which was meant
# jieba's dictionary also lists rare strings (图书管, 3: the start of 图书管理); a word it counts this often is a word
# typed as meant
MIN_FREQUENCY = 5
# Pieces that are grammar, not a mistyped word: a run holding one is never read as another word. Not agreement's
# ASKING_WORDS: those hold 地 (the particle, and the first character of 地址 in 地只) and the words that ask (问, 告诉).
_FUNCTION = (
    "的 得 了 着 过 是 在 有 和 与 及 或 吗 呢 吧 啊 呀 哦 么 也 都 就 还 又 很 太 最 我 "
    "你 您 他 她 它 们 这 那 哪 几 谁 啥 个 一 不 没 把 被 给 从 到 向 对 为 让 要 想 能 "
    "会 可 该 呐 嘛 啦 咯 哈 什么 怎么 怎样 多少 哪里 哪儿 为什么 如何 是否 可以 能否 一下 一个 "
    "这个 那个 有没有 是不是"
)
FUNCTION_WORDS = frozenset(_FUNCTION.split())


@dataclass(frozen=True)
class Sounds:
    """The common characters' usual readings (pypinyin lists it first; with its tone), and the characters each
    reading is the usual one of."""

    usual: Mapping[str, str]
    characters: Mapping[str, tuple[str, ...]]

    def alike(self, run: str) -> list[str]:
        """The words that differ from ``run`` in one character usually read exactly as the typed one (tone
        included: 买 mǎi is no typo of 卖 mài, 接 jiē none of 写 xiě)."""
        found: list[str] = []
        for i, char in enumerate(run):
            others = self.characters.get(self.usual.get(char, ""), ())
            found.extend(run[:i] + other + run[i + 1 :] for other in others if other != char)
        return list(dict.fromkeys(found))


@functools.cache
def _sounds() -> Sounds:
    """pypinyin's usual readings of the common characters (read once: 0.2 s)."""
    from pypinyin.pinyin_dict import pinyin_dict

    usual: dict[str, str] = {}
    characters: dict[str, list[str]] = {}
    for code, listed in pinyin_dict.items():
        char = chr(code)
        if _common(char):
            usual[char] = listed.split(",")[0]
            characters.setdefault(usual[char], []).append(char)
    return Sounds(usual, {reading: tuple(chars) for reading, chars in characters.items()})


def _common(char: str) -> bool:
    """True for the 3,755 characters of GB 2312 level 1 (bytes B0A1-D7F9: the most common ones)."""
    try:
        code = char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return len(code) == 2 and 0xB0 <= code[0] <= 0xD7


@dataclass(frozen=True)
class Heard:
    """A run of a message read as a word of the knowledge: the run's terms as the index cuts them, and the word."""

    typed: Form
    meant: str


class Homophones:
    """Reads the runs of a message that no word of the knowledge holds as the knowledge's word of the same sound."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    def heard(self, question: str, df: Callable[[Sequence[str]], Mapping[str, int]]) -> list[Heard]:
        """The runs of ``question`` read as a word of the knowledge (``df``: how many entries hold each of some
        words), left to right, none overlapping."""
        runs = self._runs(question)
        if not runs:
            return []
        sounds = _sounds()
        alternatives = {run: sounds.alike(run) for run in runs}
        words = list(dict.fromkeys([*runs, *(w for found in alternatives.values() for w in found)]))
        counts = df(words)
        found: list[Heard] = []
        taken: set[int] = set()
        for run, (start, end) in runs.items():
            if counts.get(run, 0) or taken & set(range(start, end)):
                continue
            held = [w for w in alternatives[run] if counts.get(w, 0)]
            if len(held) == 1:
                found.append(Heard(tuple(dict.fromkeys(self.tokenizer.tokenize(run))), held[0]))
                taken |= set(range(start, end))
        return found

    def _runs(self, question: str) -> dict[str, tuple[int, int]]:
        """Each candidate run of ``question`` and the pieces it spans, the longer first."""
        pieces = self.tokenizer.segments(normalize(question))
        runs: dict[str, tuple[int, int]] = {}
        for size in range(MAX_PIECES, 0, -1):
            for start in range(len(pieces) - size + 1):
                span = pieces[start : start + size]
                run = "".join(span)
                if not (MIN_CHARS <= len(run) <= MAX_CHARS and is_chinese(run)):
                    continue
                if any(p in FUNCTION_WORDS for p in span) or self.tokenizer.frequency(run) >= MIN_FREQUENCY:
                    continue
                runs.setdefault(run, (start, start + size))
        return runs
