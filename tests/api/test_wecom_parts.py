"""The WeCom channel's parts without a server: the crypto against WeCom's own sample and the simulator's independent
implementation, the settings' checks, the callback XML (the parts it shares with Feishu: tests/api/test_im_parts.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.api.wecom.crypto import CryptoError, WeComCrypto, WrongReceiver
from bot.api.wecom.messages import MessageError, incoming
from bot.api.wecom.passive import PASSIVE, SEND_API, ReplyWay
from bot.config.channels import WeComSettings
from bot.errors import ConfigError
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


def test_an_answer_goes_out_one_way_the_first_settled():
    ready_first, gave_up_first = ReplyWay(), ReplyWay()
    assert ready_first.settle(PASSIVE) == PASSIVE and ready_first.settle(SEND_API) == PASSIVE
    assert gave_up_first.settle(SEND_API) == SEND_API and gave_up_first.settle(PASSIVE) == SEND_API
