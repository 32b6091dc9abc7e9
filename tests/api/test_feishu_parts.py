"""The Feishu channel's parts without a server: the crypto against Feishu's own sample and the simulator's independent
implementation, the event JSON (mentions, rich text, schema 1.0, malformed), the outgoing text, the settings, and
the events taken kept in the state folder across a restart."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from bot.api.feishu.crypto import CryptoError, FeishuCrypto
from bot.api.feishu.messages import Event, EventError, Mention, Outgoing, event_of, incoming
from bot.config.channels import FeishuSettings
from bot.config.knowledge_bases import knowledge_base_settings
from bot.config.variants import update
from bot.errors import ConfigError
from tests.support import feishu as sim

pytestmark = pytest.mark.unit


def test_feishus_own_sample_decrypts_and_another_key_or_garbage_says_why():
    assert FeishuCrypto(sim.SAMPLE_KEY).decrypt(sim.SAMPLE_ENCRYPT) == sim.SAMPLE_PLAIN
    with pytest.raises(CryptoError, match="Encrypt Key"):
        FeishuCrypto("another key").decrypt(sim.SAMPLE_ENCRYPT)
    with pytest.raises(CryptoError, match="base64"):
        FeishuCrypto(sim.SAMPLE_KEY).decrypt("not base64!")
    with pytest.raises(CryptoError, match="IV and whole AES blocks"):
        FeishuCrypto(sim.SAMPLE_KEY).decrypt("YWJjZGVmZ2hpamtsbW5vcA==")  # 16 bytes: an IV and nothing else


def test_our_crypto_and_the_simulators_agree():
    crypto = FeishuCrypto(sim.ENCRYPT_KEY)
    event = json.dumps(sim.text_event("中文 and English"), ensure_ascii=False)
    assert crypto.decrypt(sim.encrypt(event)) == event
    body = b'{"encrypt": "abc"}'
    assert crypto.sign("1700000000", "n0nce", body) == sim.sign("1700000000", "n0nce", body)
    assert crypto.valid(sim.sign("1700000000", "n0nce", body).upper(), "1700000000", "n0nce", body)
    assert not crypto.valid(sim.sign("1700000000", "n0nce", body + b" "), "1700000000", "n0nce", body)
    assert sim.ENCRYPT_KEY not in repr(crypto)


def test_a_group_message_names_its_mentions_and_its_question_leaves_out_the_bot_s():
    event = sim.text_event(
        "@_user_1 问一下 @_user_2 的学费",
        chat_type="group",
        mentions=(("@_user_1", sim.BOT_OPEN_ID, "知识库助手"), ("@_user_2", "ou_someone", "李四")),
    )
    message = incoming(event_of(event))
    assert (message.chat_type, message.chat_id, message.sender) == ("group", sim.GROUP_CHAT, sim.USER)
    assert message.mentions[1] == Mention("@_user_2", "ou_someone", "李四")
    assert message.mentions_bot(sim.BOT_OPEN_ID) and not message.mentions_bot("") and not message.mentions_bot("ou_x")
    assert message.question(sim.BOT_OPEN_ID) == "问一下 @李四 的学费"
    assert message.conversation == f"{sim.GROUP_CHAT}:{sim.USER}"


def test_rich_text_is_read_as_its_text_links_and_mentions():
    post = {
        "zh_cn": {
            "title": "请教",
            "content": [
                [{"tag": "at", "user_id": "@_user_1", "user_name": "知识库助手"}, {"tag": "text", "text": " 学费"}],
                [{"tag": "a", "text": "缴费页面", "href": "https://pay.example.edu"}, {"tag": "img", "image_key": "x"}],
            ],
        }
    }
    event = sim.message_event("post", post, mentions=(("@_user_1", sim.BOT_OPEN_ID, "知识库助手"),))
    assert incoming(event_of(event)).question(sim.BOT_OPEN_ID) == "请教\n学费\n缴费页面"
    image = incoming(event_of(sim.message_event("image", {"image_key": "img_v2"})))
    assert image.kind == "image" and image.text == ""


def test_bodies_that_are_not_feishus_events_are_refused_with_the_reason():
    with pytest.raises(EventError, match="neither"):
        event_of({"hello": "world"})
    with pytest.raises(EventError, match="event_id"):
        event_of({"schema": "2.0", "header": {"event_type": "im.message.receive_v1"}})
    event = sim.text_event("x")
    del event["event"]["message"]["chat_id"]
    with pytest.raises(EventError, match="chat_id"):
        incoming(event_of(event))
    event = sim.text_event("x")
    event["event"]["message"]["content"] = "{not json"
    with pytest.raises(EventError, match="not JSON"):
        incoming(event_of(event))
    v1 = event_of({"uuid": "41b5f371157e3c0d", "token": "t", "ts": "1.0", "type": "event_callback", "event": {}})
    assert v1 == Event("event_callback", "t", "41b5f371157e3c0d", schema="1.0")


def test_an_answer_quoting_an_at_tag_cannot_notify_anyone():
    sent = Outgoing.text('见 <at user_id="all">所有人</at> 与 < AT user_id="ou_1">x</at>').content["text"]
    assert "<at" not in sent.lower() and "< at" not in sent.lower() and "所有人" in sent
    assert json.loads(Outgoing.text("学费 ½").json_content()) == {"text": "学费 ½"}


def test_settings_are_off_by_default_and_reject_unknown_keys_and_bad_paths():
    assert FeishuSettings().enabled is False and FeishuSettings().remember_events_seconds > 6 * 3600
    with pytest.raises(ValidationError, match="extra"):
        FeishuSettings.model_validate({"encrypt_key": "secret in the config file"})
    with pytest.raises(ValidationError, match="/feishu/events"):
        FeishuSettings.model_validate({"path": "feishu/"})
    with pytest.raises(ValidationError, match="open.feishu.cn"):
        FeishuSettings.model_validate({"api_base": "open.feishu.cn"})


def test_only_the_default_knowledge_base_serves_feishu(settings):
    on = update(settings, {"feishu.enabled": True, "knowledge_bases": {"it": {}, "hr": {"feishu": {"enabled": True}}}})
    assert knowledge_base_settings(on, "it").feishu.enabled is False  # one event URL: the default's
    with pytest.raises(ConfigError, match=r"knowledge_bases\.hr\.feishu\.enabled"):
        knowledge_base_settings(on, "hr")
