"""Personal data is found in every form people type it: full-width or Arabic-Indic digits, a dot or a single space
between digits, a full-width ＠ (Hypothesis over the forms); the mask covers the original span and nothing else."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.conversations.inbox import normalise
from bot.conversations.privacy import PersonalData, PrivacyPolicy

pytestmark = pytest.mark.unit

FORMS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DIGIT_FORMS = {
    "ascii": 0x30,
    "full-width": 0xFF10,
    "arabic-indic": 0x0660,
    "extended arabic-indic": 0x06F0,
    "devanagari": 0x0966,
}
SEPARATORS = ["", ".", " ", "\u3000", "·"]
AT_SIGNS = ["@", "＠", "﹫"]
FINDER = PersonalData()


def luhn_digit(body: str) -> str:
    """The check digit that makes ``body`` + it pass the Luhn check."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        n = int(ch)
        if i % 2 == 0:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return str(-total % 10)


mobiles = st.builds(
    lambda a, rest: f"1{a}{rest}", st.sampled_from("3456789"), st.text("0123456789", min_size=9, max_size=9)
)
id_cards = st.builds(
    lambda region, year, month, day, serial, check: f"{region}{year}{month:02d}{day:02d}{serial}{check}",
    st.integers(110000, 659999).map(str),
    st.integers(1930, 2020).map(str),
    st.integers(1, 12),
    st.integers(1, 28),
    st.text("0123456789", min_size=3, max_size=3),
    st.sampled_from("0123456789X"),
)
bank_cards = st.text("0123456789", min_size=15, max_size=15).map(
    lambda body: "62" + body[:13] + luhn_digit("62" + body[:13])
)
NUMBERS = {"mobile": mobiles, "id_card": id_cards, "bank_card": bank_cards}
# Around the number: Chinese text and punctuation (no digits or Latin letters, which would join the number).
AROUND = st.text(st.sampled_from("我的手机号是收不到验证码请帮查一下，。？！ "), max_size=12)


def typed(number: str, digits: str, separator: str) -> str:
    """``number`` typed with ``digits``' form, ``separator`` between every two characters."""
    zero = DIGIT_FORMS[digits]
    return separator.join(chr(zero + int(c)) if c.isdigit() else c for c in number)


def ascii_digits(text: str) -> str:
    """Every decimal digit of ``text`` in ASCII, everything else dropped."""
    return "".join(str(unicodedata.decimal(c)) for c in text if unicodedata.decimal(c, None) is not None)


@FORMS
@given(
    kind=st.sampled_from(sorted(NUMBERS)),
    data=st.data(),
    digits=st.sampled_from(sorted(DIGIT_FORMS)),
    separator=st.sampled_from(SEPARATORS),
    before=AROUND,
    after=AROUND,
)
def test_a_number_in_any_typed_form_is_masked_whole_and_only_it(kind, data, digits, separator, before, after):
    number = data.draw(NUMBERS[kind])
    text = f"{before}{typed(number, digits, separator)}{after}"
    masked = FINDER.mask(text)
    assert masked == f"{before}[{kind}]{after}", (text, masked)
    assert number not in ascii_digits(masked) and FINDER.find(masked) == []


@FORMS
@given(
    user=st.text("abcdefghijklmnopqrstuvwxyz0123456789._", min_size=1, max_size=12).filter(lambda u: u[0].isalnum()),
    host=st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10),
    at=st.sampled_from(AT_SIGNS),
    full_width=st.booleans(),
    before=AROUND,
    after=AROUND,
)
def test_an_email_with_a_full_width_at_or_letters_is_masked(user, host, at, full_width, before, after):
    address = f"{user}{at}{host}.edu.cn"
    if full_width:  # every ASCII character in its full-width form
        address = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in address)
    masked = FINDER.mask(f"{before}{address}{after}")
    assert masked == f"{before}[email]{after}"


def test_the_normal_form_stored_beside_the_question_keeps_no_digit_of_it():
    question = "我的手机号是１３８.１２３４.５６７８，收不到验证码"
    stored = FINDER.mask(question) or ""
    assert stored == "我的手机号是[mobile]，收不到验证码"
    assert "13812345678" not in normalise(stored) and not any(c.isdigit() for c in normalise(stored))


def test_numbers_that_are_not_personal_data_stay_in_every_form():
    for text in ("２０２４年是百年校庆", "价格 １,２９９.００ 元", "版本 1.2.3.4", "房间 101 102 103", "٢٠٢٤ 年"):
        assert FINDER.mask(text) == text


def test_refusal_and_the_llms_mask_use_the_same_finder():
    policy = PrivacyPolicy(PersonalData(), PersonalData(), mask_llm=True, refuse=True)
    for question in ("电话 ١٣٨١٢٣٤٥٦٧٨", "邮箱 zhang＠example.com", "1 3 8 1 2 3 4 5 6 7 8 收不到"):
        assert policy.refused(question)
        assert "[" in policy.for_search(question) and not ascii_digits(policy.for_search(question)).count("138")
