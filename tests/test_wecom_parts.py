"""The WeCom channel's parts without a server: the crypto against WeCom's own sample and the simulator's independent
implementation, the settings' checks, the plain-text rendering of answers and offers, the per-user memory."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.api.wecom.crypto import CryptoError, WeComCrypto, WrongReceiver
from bot.api.wecom.memory import Histories, Seen
from bot.api.wecom.messages import MessageError, incoming
from bot.api.wecom.render import MAX_BYTES, fit, plain, render
from bot.chat.answer import Answer, Option, Strategy
from bot.chat.offers import CLARIFY_TAIL, clarify_text, read_offer
from bot.config.channels import WeComSettings
from bot.errors import ConfigError
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from bot.texts import DID_YOU_MEAN, PICK_HINT
from tests.support import wecom as sim

pytestmark = pytest.mark.unit


def test_wecoms_own_sample_verifies_and_decrypts():
    crypto = WeComCrypto(sim.SAMPLE["token"], sim.SAMPLE["aes_key"], sim.SAMPLE["corp_id"])
    assert crypto.valid(*sim.SAMPLE["verify"], sim.SAMPLE["echostr"])
    assert crypto.decrypt(sim.SAMPLE["echostr"]) == sim.SAMPLE["echo_plain"]
    assert crypto.valid(*sim.SAMPLE["post"], sim.SAMPLE["encrypt"])
    message = incoming(crypto.decrypt(sim.SAMPLE["encrypt"]))
    assert (message.kind, message.user, message.content, message.msg_id) == (
        "text",
        "ChenJiaShun",
        "你好",
        "1456453720",
    )
    assert not crypto.valid("0" * 40, *sim.SAMPLE["post"][1:], sim.SAMPLE["encrypt"])


def test_our_crypto_and_the_simulators_agree_both_ways():
    crypto = WeComCrypto(sim.TOKEN, sim.AES_KEY, sim.CORP_ID)
    text = "<xml><Content><![CDATA[中文 and English]]></Content></xml>" * 3
    assert crypto.decrypt(sim.encrypt(text)) == text
    assert sim.decrypt(crypto.encrypt(text)) == (text, sim.CORP_ID)
    assert crypto.sign("1", "2", "abc") == sim.sign(sim.TOKEN, "1", "2", "abc")


def test_undecryptable_messages_say_why():
    crypto = WeComCrypto(sim.TOKEN, sim.AES_KEY, sim.CORP_ID)
    with pytest.raises(WrongReceiver, match="corp id"):
        crypto.decrypt(sim.encrypt("<xml/>", receive_id="ww-other"))
    with pytest.raises(CryptoError, match="base64"):
        crypto.decrypt("not base64!")
    with pytest.raises(CryptoError, match="AES blocks"):
        crypto.decrypt("YWJj")
    other_key = "Z" * 43
    with pytest.raises(CryptoError):  # another key: the padding (or the corp id) comes out wrong
        crypto.decrypt(sim.encrypt("<xml/>", aes_key=other_key))


@pytest.mark.parametrize("key", ["short", "%" * 43])
def test_a_malformed_encoding_aes_key_is_a_config_error(key):
    with pytest.raises(ConfigError, match="EncodingAESKey"):
        WeComCrypto("t", key, "corp")


def test_settings_reject_unknown_keys_and_an_incomplete_app():
    with pytest.raises(ValidationError, match="extra"):
        WeComSettings.model_validate({"tokn_env": "X"})
    with pytest.raises(ValidationError, match="corp_id"):
        WeComSettings.model_validate({"enabled": True})
    with pytest.raises(ValidationError, match="path"):
        WeComSettings.model_validate({"path": "wecom/"})
    assert WeComSettings().enabled is False and WeComSettings().reply_budget_seconds < 5


def test_messages_that_are_not_wecoms_are_refused():
    with pytest.raises(MessageError, match="MsgType"):
        incoming("<xml><Content>hi</Content></xml>")
    with pytest.raises(MessageError, match="not XML"):
        incoming("<xml>")


def answer(text: str, strategy: Strategy = Strategy.VERBATIM, options: tuple[Option, ...] = ()) -> Answer:
    return Answer(question="q", text=text, strategy=strategy, mode="sparse", options=options)


def test_markdown_becomes_plain_text():
    text = "## 标题\n**加粗** 和 `代码`，见 [文档](https://example.org/a)。\n* 一项\n![图](https://x/y.png)"
    assert plain(text) == "标题\n加粗 和 代码，见 文档 (https://example.org/a)。\n- 一项\n图"


def test_a_clarify_question_keeps_the_cores_numbering_once_with_the_pick_hint():
    core = clarify_text(["本科生学费是多少？", "研究生学费是多少？"])
    shown = render(
        answer(core, Strategy.CLARIFY, (Option("a", "本科生学费是多少？"), Option("b", "研究生学费是多少？")))
    )
    assert shown.count("1.") == 1 and shown.count("2.") == 1 and CLARIFY_TAIL not in shown
    offer = read_offer(shown)
    assert offer is not None, shown
    assert shown.endswith(PICK_HINT) and offer.questions == ("本科生学费是多少？", "研究生学费是多少？")


def test_did_you_mean_suggestions_are_renumbered_so_a_number_picks_one():
    text = f"没有找到答案。\n\n{DID_YOU_MEAN}\n- 甲？\n- 乙？"
    shown = render(answer(text, Strategy.LAST_RESORT, (Option("a", "甲？"), Option("b", "乙？"))))
    assert "- 甲？" not in shown and "1. 甲？" in shown and "2. 乙？" in shown
    offer = read_offer(shown)
    assert offer is not None and offer.questions == ("甲？", "乙？")
    one = render(answer(f"没有找到答案。\n\n{DID_YOU_MEAN}\n- 甲？", Strategy.LAST_RESORT, (Option("a", "甲？"),)))
    offer = read_offer(one)
    assert offer is not None and offer.kind == "confirm"


def test_sources_are_listed_only_when_asked_and_only_under_answers():
    entry = Entry(id="faq:a", query="怎么连接校园网？", document="...")
    hit = Hit(entry=entry, relevance=0.9, score=9.0, searcher="sparse")
    answered = Answer(question="q", text="连接 SYSU-WiFi。", strategy=Strategy.VERBATIM, mode="sparse", hits=[hit])
    assert render(answered, show_sources=True).endswith("来源 / Sources:\n- 怎么连接校园网？")
    assert "来源" not in render(answered)
    handed = Answer(question="q", text="转人工", strategy=Strategy.HANDOFF, mode="sparse", hits=[hit])
    assert "来源" not in render(handed, show_sources=True)


def test_long_answers_fit_in_one_text_message():
    cut = fit("汉" * 2000)
    assert len(cut.encode()) <= MAX_BYTES and cut.endswith("cut short）")
    assert fit("short") == "short"


def test_histories_expire_are_bounded_and_per_user():
    now = [0.0]
    memory = Histories(size=4, ttl=60, max_users=2, clock=lambda: now[0])
    memory.add("a", "q1", "r1")
    memory.add("a", "q2", "r2")
    memory.add("a", "q3", "r3")
    assert [m["content"] for m in memory.get("a")] == ["q2", "r2", "q3", "r3"] and memory.get("b") == []
    memory.add("b", "x", "y")
    memory.add("c", "x", "y")  # a third user: the least recently active ("a") is dropped
    assert memory.get("a") == [] and len(memory) == 2
    now[0] = 61.0
    assert memory.get("b") == []


def test_taken_keys_survive_a_restart_and_the_file_keeps_only_live_ones(tmp_path):
    now = [1_000.0]
    path = tmp_path / "wecom" / "taken.txt"
    seen = Seen(ttl=10, clock=lambda: now[0], path=path)
    assert seen.first("id:1") and seen.first("ev:lisi:1:enter_agent")
    restarted = Seen(ttl=10, clock=lambda: now[0], path=path)
    assert not restarted.first("id:1") and not restarted.first("ev:lisi:1:enter_agent")
    assert "lisi" not in path.read_text()  # keys are kept hashed
    now[0] = 1_011.0
    assert Seen(ttl=10, clock=lambda: now[0], path=path).first("id:1")  # past the ttl: a new message
    assert len(path.read_text().splitlines()) == 1  # the file was pruned by age when read


def test_a_cut_last_line_and_an_unwritable_folder_cost_nothing_but_the_memory(tmp_path, caplog):
    from bot.chat.shared_limits import hashed_key

    path = tmp_path / "taken.txt"
    path.write_text(f"1000.000 {hashed_key('id:1')}\n1000.5", encoding="ascii")  # a crash cut the last line
    assert not Seen(ttl=10, clock=lambda: 1_001.0, path=path).first("id:1")
    blocked = tmp_path / "file"
    blocked.write_text("x")
    seen = Seen(ttl=10, path=blocked / "taken.txt")  # its folder is a file
    assert seen.first("id:1") and not seen.first("id:1")
    assert "cannot" in caplog.text


def test_seen_takes_a_key_once_within_its_ttl():
    now = [0.0]
    seen = Seen(ttl=10, clock=lambda: now[0])
    assert seen.first("id:1") and not seen.first("id:1") and seen.first("id:2")
    now[0] = 11.0
    assert seen.first("id:1")
