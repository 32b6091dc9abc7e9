"""Small talk ("你好", "谢谢", "你是机器人吗", "lol") told from questions for the knowledge, with a persona reply.

A message is chit-chat only when ALL of it is: it is cut into clauses at punctuation and every clause must be
a known phrasing, a run of known phrasings and filler words ("好的谢谢", "hi there thanks"), or close to one
phrasing (a typo: "thnak you"). The score is the weakest clause's, so "你好，图书馆几点开门？" (a greeting and
a question) and "谢谢你告诉我食堂在哪" score low and go to the knowledge. Text is compared after NFKC
(full-width → half-width), lower-casing, reading traditional characters as simplified (謝謝 is 谢谢), dropping punctuation, spaces and emoji, and collapsing repeats
("哈哈哈哈" → "哈", "hiiii" → "hi"); a message of emoji or punctuation only is compared as it is written.

The scenarios and their replies ship in bot/chat/data/chitchat.json; ``chitchat.path`` replaces that file with
a deployer's own and ``chitchat.replies`` overrides single replies ("" drops a scenario). The threshold is
calibrated on tests/data/chitchat_labelled.jsonl (split "train") and checked on its "heldout" split.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from bot.config.settings import ChitChatSettings
from bot.errors import ConfigError
from bot.search.script import folded

DATA_FILE = Path(__file__).resolve().parent / "data" / "chitchat.json"
MAX_CHARS = 60  # longer messages are never small talk (and fuzzy matching them would be slow and pointless)
# Words that carry no intent of their own: particles and forms of address around a phrasing ("谢谢啊", "hi there").
_FILLER_WORDS = (
    "啊 呀 哦 呢 吧 啦 嘛 哈 喔 哇 呐 哟 噢 嘞 咯 诶 欸 亲 哎 嗯 了 小助手 助手 机器人 同学 "
    "there dear mate bro buddy man dude please pls so much very again alot bot robot guys everyone all kbbot "
    "then well oh ah"
)
FILLERS = frozenset(_FILLER_WORDS.split())
# Two phrasings run together are small talk ("好的谢谢", "hi how are you"); three already spell questions
# ("在吗" + "是" + "什么意思").
MAX_PIECES = 2
# The scenarios whose phrasings wrap a question without saying anything of it ("你好，", "在吗 ", "，谢谢"): only they
# are left out of what is searched; "测试" (test), "是" (yes) or "什么" (repeat) beside a question may be part of it.
COURTESIES = frozenset(
    [
        "greeting",
        "good_morning",
        "good_afternoon",
        "good_evening",
        "thanks",
        "goodbye",
        "goodbye_thanks",
        "are_you_there",
        "ok",
        "got_it",
        "sorry",
        "hmm",
        "im_back",
        "nice_to_meet",
        "wait",
    ]
)
_PUNCTUATION = r",，。!！?？;；~～、\n…"  # what ends a clause, besides a dot
_CLAUSES = re.compile(rf"[{_PUNCTUATION}.]+")
# Where a message's clauses end when they are cut out of it; a dot before a letter or digit ("v1.2", "config.yaml")
# ends none.
_CLAUSE_ENDS = re.compile(rf"(?:[{_PUNCTUATION}]|\.(?!\w))+")
_REPEATS = re.compile(r"(.{1,3}?)\1+")
_DROP = {"\u200d", "\ufe0f", "\ufe0e"}  # zero-width joiner and emoji variation selectors


@dataclass(frozen=True)
class ChitChatMatch:
    """A message read as small talk: its scenario, the reply, the score in [0, 1] and the phrasing it matched."""

    scenario: str
    reply: str
    score: float
    phrasing: str


def normalize(text: str) -> str:
    """Letters and digits only, NFKC, lower-case, traditional Chinese as simplified, repeats collapsed: the form
    phrasings are compared in."""
    text = folded(text)
    return _REPEATS.sub(r"\1", "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN"))


def normalize_symbols(text: str) -> str:
    """Every visible character, for messages that are only emoji or punctuation ("😂😂", "???")."""
    text = unicodedata.normalize("NFKC", text)
    return _REPEATS.sub(r"\1", "".join(ch for ch in text if not ch.isspace() and ch not in _DROP))


def _key(phrasing: str) -> str:
    return normalize(phrasing) or normalize_symbols(phrasing)


def load_scenarios(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{scenario: (reply, phrasings)} from a chit-chat file; a ConfigError names the file and the problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"chit-chat file {path} not found (chitchat.path)") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"chit-chat file {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"chit-chat file {path}: top level must be a non-empty object {{scenario: {{...}}}}")
    scenarios: dict[str, tuple[str, tuple[str, ...]]] = {}
    seen: dict[str, tuple[str, str]] = {}  # normalized phrasing -> (scenario, phrasing): one text, one scenario
    for name, raw in data.items():
        where = f"chit-chat file {path}, scenario {name!r}"
        if not isinstance(raw, dict) or set(raw) != {"reply", "phrasings"}:
            raise ConfigError(f"{where}: must be an object with exactly 'reply' and 'phrasings'")
        reply, phrasings = raw["reply"], raw["phrasings"]
        if not isinstance(reply, str) or not reply.strip():
            raise ConfigError(f"{where}: 'reply' must be a non-empty string")
        if not isinstance(phrasings, list) or not phrasings:
            raise ConfigError(f"{where}: 'phrasings' must be a non-empty list of strings")
        for p in phrasings:
            if not isinstance(p, str) or not _key(p):
                raise ConfigError(f"{where}: phrasing {p!r} is empty or not a string")
            other = seen.setdefault(_key(p), (name, p))
            if other[0] != name:
                raise ConfigError(
                    f"{where}: phrasing {p!r} reads the same as {other[1]!r} of scenario {other[0]!r}; "
                    "keep it in one scenario"
                )
        scenarios[name] = (reply.strip(), tuple(phrasings))
    return scenarios


class ChitChat:
    """Decides whether a whole message is small talk and which scenario's reply answers it."""

    def __init__(self, scenarios: dict[str, tuple[str, tuple[str, ...]]], threshold: float, enabled: bool = True):
        self.threshold = threshold
        self.enabled = enabled
        self.replies = {name: reply for name, (reply, _) in scenarios.items()}
        # normalized phrasing -> (scenario, phrasing as written); the same text in two scenarios is ambiguous
        self._phrasings: dict[str, tuple[str, str]] = {}
        for name, (_, phrasings) in scenarios.items():
            for p in phrasings:
                self._phrasings.setdefault(_key(p), (name, p))
        self._longest = max(len(k) for k in self._phrasings)
        self._courtesies = {k: v for k, v in self._phrasings.items() if v[0] in COURTESIES}

    @classmethod
    def from_settings(cls, s: ChitChatSettings) -> ChitChat:
        """The shipped scenarios (or ``s.path``'s) with ``s.replies`` applied; unknown scenario names are errors."""
        scenarios = load_scenarios(Path(s.path) if s.path else DATA_FILE)
        unknown = sorted(set(s.replies) - set(scenarios))
        if unknown:
            raise ConfigError(
                f"chitchat.replies names unknown scenario(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(scenarios))}"
            )
        for name, reply in s.replies.items():
            if reply.strip():
                scenarios[name] = (reply.strip(), scenarios[name][1])
            else:
                del scenarios[name]  # "" turns a scenario off (e.g. the knowledge answers "你能做什么")
        if not scenarios:
            raise ConfigError("chitchat.replies turned every scenario off; set chitchat.enabled: false instead")
        return cls(scenarios, s.threshold, s.enabled)

    def match(self, message: str) -> ChitChatMatch | None:
        """The scenario when the whole message is small talk scoring at least the threshold, else None."""
        if not self.enabled:
            return None
        found = self.score(message)
        if found is None or found[1] < self.threshold:
            return None
        (name, phrasing), score = found
        return ChitChatMatch(name, self.replies[name], round(score, 4), phrasing)

    def without_courtesies(self, message: str) -> str:
        """The message without the courtesies (:data:`COURTESIES`) before and after its question ("你好，图书馆几点开门？"
        → "图书馆几点开门？", "where is it? thanks" → "where is it?"); the message itself when all or none of it is."""
        if not self.enabled:
            return message
        starts = [0, *(m.end() for m in _CLAUSE_ENDS.finditer(message))]
        spans = [(a, b) for a, b in zip(starts, [*starts[1:], len(message)]) if message[a:b].strip()]
        first, last = 0, len(spans) - 1
        while first <= last and self._is_courtesy(normalize(message[spans[first][0] : spans[first][1]])):
            first += 1
        if first > last:
            return message  # all of it is courtesy (the chit-chat rung's), or nothing
        while self._is_courtesy(normalize(message[spans[last][0] : spans[last][1]])):
            last -= 1
        if first == 0 and last == len(spans) - 1:
            return message
        return message[spans[first][0] : spans[last][1]].strip()

    def _is_courtesy(self, clause: str) -> bool:
        # only a courtesy, a filler or a run of them counts: the fuzzy match would take a short question for a typo
        return (
            not clause
            or clause in self._courtesies
            or clause in FILLERS
            or self._segment(clause, self._courtesies) is not None
        )

    def score(self, message: str) -> tuple[tuple[str, str], float] | None:
        """((scenario, phrasing), score) of the best reading as small talk, before the threshold; None if none."""
        if len(message) > MAX_CHARS * 2:
            return None
        clauses = [c for c in (normalize(part) for part in _CLAUSES.split(message)) if c]
        if not clauses:
            symbols = normalize_symbols(message)
            clauses = [symbols] if symbols else []
        if not clauses or sum(map(len, clauses)) > MAX_CHARS:
            return None
        best: tuple[str, str] | None = None
        weakest = 1.0
        for clause in clauses:
            found, score = self._clause(clause)
            weakest = min(weakest, score)
            if found is not None:
                best = found  # the last clause with intent decides: "好的，谢谢" is thanks
        return (best, weakest) if best is not None else None

    def _clause(self, clause: str) -> tuple[tuple[str, str] | None, float]:
        exact = self._phrasings.get(clause)
        if exact:
            return exact, 1.0
        if clause in FILLERS:
            return None, 1.0
        segmented = self._segment(clause)
        if segmented:
            return segmented, 1.0
        return self._closest(clause)

    def _segment(self, clause: str, phrasings: dict[str, tuple[str, str]] | None = None) -> tuple[str, str] | None:
        """The last phrasing of the fewest-pieces cover of the clause by fillers and one or two ``phrasings`` (all
        of them by default)."""
        known = self._phrasings if phrasings is None else phrasings
        n = len(clause)
        # reach[i] = (phrasings, last phrasing or None, fillers) of the best cover of clause[:i]
        reach: list[tuple[int, tuple[str, str] | None, int] | None] = [None] * (n + 1)
        reach[0] = (0, None, 0)
        for i in range(n):
            here = reach[i]
            if here is None:
                continue
            for j in range(i + 1, min(n, i + self._longest) + 1):
                piece = clause[i:j]
                if piece in FILLERS:
                    step = (here[0], here[1], here[2] + 1)
                elif piece in known and here[0] < MAX_PIECES:
                    step = (here[0] + 1, known[piece], here[2])
                else:
                    continue
                there = reach[j]
                if there is None or (step[1] is not None, -step[0], -step[2]) > (
                    there[1] is not None,
                    -there[0],
                    -there[2],
                ):
                    reach[j] = step
        end = reach[n]
        return end[1] if end else None

    def _closest(self, clause: str) -> tuple[tuple[str, str] | None, float]:
        """The phrasing most like the clause (difflib ratio), for typos; particles at the end are ignored."""
        trimmed = clause.rstrip("".join(f for f in FILLERS if len(f) == 1)) or clause
        best, best_score = None, 0.0
        for text in {clause, trimmed}:
            for key, found in self._phrasings.items():
                if 2 * min(len(key), len(text)) / (len(key) + len(text)) <= best_score:
                    continue  # the ratio cannot beat the best so far
                matcher = SequenceMatcher(None, text, key, autojunk=False)
                if matcher.real_quick_ratio() > best_score and matcher.quick_ratio() > best_score:
                    ratio = matcher.ratio()
                    if ratio > best_score:
                        best, best_score = found, ratio
        return best, best_score
