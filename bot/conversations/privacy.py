"""Personal data in what people type: found, masked before anything is stored, and optionally refused.

People paste phone numbers, ID-card numbers and e-mail addresses into a chat ("我的手机号 13812345678 收不到验证码").
The conversation log, the inbox, exports and analytics keep the question, so the question is masked before it is
stored: each finding becomes a label such as ``[mobile]``. The text searched and sent to the LLM is unchanged
unless ``privacy.mask_llm`` says otherwise (a masked number cannot be looked up, but nothing needs it to be).

The built-in kinds favour masking too much over too little where they must guess: a run of 16-19 digits that
passes the Luhn check (or starts with UnionPay's 62) is a bank card even when it is an order number; an 18-digit
number with a plausible birth date is an ID card whatever its check digit (typos and made-up examples are masked).

People type the same number in many forms: full-width digits (a Chinese input method in full-width mode), Arabic-Indic
digits, a full-width ``＠``, digits with a dot or a single space between each. The patterns are matched on a normal
copy of the text (NFKC, every decimal digit as ASCII; once more with those separators dropped) and each finding masks
the span of the original text it came from, so the stored text keeps no digit of it in any form.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.config.settings import PII_KINDS, PrivacySettings
from bot.messages import History

_SEP = r"[-\s]?"  # people group digits with spaces or dashes
_DATE = r"(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
BUILT_IN: dict[str, str] = {
    "email": r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    # 18 digits (6 region + birth date + 3 + check digit or X); the old 15-digit form has a 2-digit year
    "id_card": rf"(?<![0-9A-Za-z])(?:[1-9]\d{{5}}{_DATE}\d{{3}}[\dXx]|[1-9]\d{{7}}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{{3}})(?![0-9A-Za-z])",
    "bank_card": r"(?<!\d)(?:\d{16,19}|\d{4}(?:[-\s]\d{4}){3}(?:[-\s]?\d{1,3})?)(?!\d)",
    "mobile": rf"(?<!\d)(?:(?:\+|00)?86{_SEP})?1[3-9]\d{_SEP}\d{{4}}{_SEP}\d{{4}}(?!\d)",
    "landline": r"(?<!\d)(?:\(0\d{2,3}\)|0\d{2,3})[-\s]?[2-9]\d{6,7}(?:[-转]\d{1,5})?(?!\d)",
}
assert tuple(BUILT_IN) == PII_KINDS  # the settings list the kinds this module knows, in the order they are tried


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _bank_card(found: str) -> bool:
    digits = re.sub(r"\D", "", found)
    return 16 <= len(digits) <= 19 and (_luhn(digits) or digits.startswith("62"))


# A match of a kind listed here is only a finding when its check accepts it.
CHECKS: dict[str, Callable[[str], bool]] = {"bank_card": _bank_card}


@dataclass(frozen=True)
class Finding:
    """Personal data found in a text: its kind (``mobile``, a configured pattern's name...) and span."""

    kind: str
    start: int
    end: int


# Between two digits one of these is dropped in the second normal copy ("138.1234.5678", "1 3 8 1 2 3 4 ..."); dashes
# are not, the patterns read them (a landline's extension follows one).
DIGIT_SEPARATORS = frozenset(". \u00a0\u3000\u00b7\u30fb")
DIGITS = frozenset("0123456789")


@dataclass(frozen=True)
class NormalCopy:
    """A text as the patterns read it, with the original index each of its characters came from."""

    text: str
    origin: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> NormalCopy:
        """NFKC, each character on its own (so each keeps its origin), and every decimal digit as an ASCII one."""
        chars: list[str] = []
        origin: list[int] = []
        for i, ch in enumerate(text):
            for c in unicodedata.normalize("NFKC", ch):
                digit = unicodedata.decimal(c, None)
                chars.append(c if digit is None else str(digit))
                origin.append(i)
        return cls("".join(chars), tuple(origin))

    def without_digit_separators(self) -> NormalCopy:
        """This copy without a lone separator between two digits (or a digit and an ID card's closing X)."""
        t = self.text
        keep = [
            k
            for k in range(len(t))
            if not (t[k] in DIGIT_SEPARATORS and 0 < k < len(t) - 1 and t[k - 1] in DIGITS and self._digit_at(k + 1))
        ]
        return NormalCopy("".join(t[k] for k in keep), tuple(self.origin[k] for k in keep))

    def _digit_at(self, k: int) -> bool:
        # an X closes an ID card number when nothing alphanumeric follows it ("1.1.0 ... 0.X")
        t = self.text
        return t[k] in DIGITS or (t[k] in "Xx" and (k + 1 == len(t) or not (t[k + 1].isascii() and t[k + 1].isalnum())))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of this copy's ``[start, end)``."""
        return self.origin[start], self.origin[end - 1] + 1


class PersonalData:
    """Finds and masks personal data of the configured kinds (none: masking is off and text passes unchanged)."""

    def __init__(self, kinds: Sequence[str] = PII_KINDS, patterns: Mapping[str, str] | None = None):
        unknown = [k for k in kinds if k not in BUILT_IN]
        if unknown:
            raise ValueError(f"unknown personal-data kinds {unknown}; known: {', '.join(BUILT_IN)}")
        table = {k: BUILT_IN[k] for k in BUILT_IN if k in kinds} | dict(patterns or {})
        self._patterns = [(name, re.compile(p)) for name, p in table.items()]

    @property
    def enabled(self) -> bool:
        """True when at least one kind is looked for."""
        return bool(self._patterns)

    def find(self, text: str) -> list[Finding]:
        """The findings in ``text`` (spans of ``text`` itself, whatever form its digits take), in order, never
        overlapping (the kind tried first wins a span; then what is found with the separators kept)."""
        found: list[Finding] = []
        normal = NormalCopy.of(text)
        for copy in (normal, normal.without_digit_separators()):
            for kind, pattern in self._patterns:
                check = CHECKS.get(kind)
                for m in pattern.finditer(copy.text):
                    if m.end() == m.start() or (check is not None and not check(m.group())):
                        continue
                    start, end = copy.span(m.start(), m.end())
                    if not any(f.start < end and start < f.end for f in found):
                        found.append(Finding(kind, start, end))
        return sorted(found, key=lambda f: f.start)

    def contains(self, text: str | None) -> bool:
        """True when ``text`` holds personal data."""
        return bool(text) and bool(self.find(text or ""))

    def mask(self, text: str | None) -> str | None:
        """``text`` with each finding replaced by ``[kind]`` (None stays None)."""
        if not text or not self._patterns:
            return text
        out, last = [], 0
        for f in self.find(text):
            out.append(text[last : f.start])
            out.append(f"[{f.kind}]")
            last = f.end
        return "".join(out) + text[last:]


@dataclass(frozen=True)
class PrivacyPolicy:
    """What a turn does with personal data: masks what is stored; optionally masks the LLM's copy or refuses."""

    stored: PersonalData
    detect: PersonalData
    mask_llm: bool = False
    refuse: bool = False
    refusal: str = ""

    @classmethod
    def from_settings(cls, s: PrivacySettings) -> PrivacyPolicy:
        """The policy ``privacy`` in config.yaml describes."""
        detect = PersonalData(s.kinds, s.patterns)
        return cls(
            stored=detect if s.mask else PersonalData(()),
            detect=detect,
            mask_llm=s.mask_llm,
            refuse=s.refuse,
            refusal=s.refusal.strip(),
        )

    def refused(self, question: str) -> bool:
        """True when ``question`` must be refused (refusal on, personal data in it)."""
        return self.refuse and self.detect.contains(question)

    def for_search(self, question: str) -> str:
        """The question as the bot searches it and sends it to the LLM."""
        return (self.detect.mask(question) or "") if self.mask_llm else question

    def for_history(self, history: History | None) -> History | None:
        """The chat history as the bot uses it: with ``mask_llm``, every message's text masked."""
        if not self.mask_llm or not history:
            return history
        return [{"role": m["role"], "content": self.detect.mask(m["content"]) or ""} for m in history]


NO_MASKING = PrivacyPolicy(PersonalData(()), PersonalData(()))
