"""Hand-off: explicit requests for a person trigger, look-alikes do not; its settings; the webhook channel against a
real local server (retries, timeouts, signatures, redirects refused)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import pytest

from bot.config.settings import HandoffSettings, HandoffWebhookSettings, load_settings
from bot.handoff.channels import SIGNATURE_HEADER, DeliveryError, WebhookChannel
from bot.handoff.desk import Desk
from bot.handoff.requests import is_handoff_request
from tests.support.knowledge import ROOT
from tests.support.ports import free_port
from tests.support.webhook import Hook

pytestmark = pytest.mark.unit

ZH_REQUESTS = [
    "转人工",
    "轉人工",  # traditional characters
    "我要找真人客服",
    "转人工！",
    "人工客服",
    "人工",
    "人工服务",
    "找真人",
    "我要投诉",
    "真人客服",
    "找客服",
    "我要人工",
    "转人工客服",
    "请帮我转人工",
    "给我转人工",
    "能不能转人工",
    "怎么转人工",
    "有人工吗",
    "有没有人工",
    "我要找真人",
    "换个真人来",
    "我想跟真人聊",
    "我要和真人说话",
    "叫你们工作人员来",
    "找你们负责人",
    "联系客服",
    "在线客服",
    "客服在吗",
    "我要投诉你们",
    "我想投诉食堂",
    "投诉！",
    "人工人工人工",
    "不想和机器人聊了",
    "找管理员",
    "转接人工服务",
    "麻烦转一下人工",
    "我要人工客服",
    "来个人",
    "人 工 客 服",
    "ＲＥＮＧＯＮＧ转人工",
    "转人工吧",
    "要真人",
]
EN_REQUESTS = [
    "talk to a human",
    "agent please",
    "real person",
    "human please",
    "I want to talk to a real person",
    "can I speak to an agent?",
    "speak to a human",
    "let me talk to someone",
    "connect me to an agent",
    "transfer me to a human",
    "get me a human",
    "human!",
    "HUMAN",
    "operator",
    "representative please",
    "i need a human",
    "I want a real person",
    "customer service please",
    "talk to customer service",
    "I'd like to speak with a representative",
    "put me through to a person",
    "live agent",
    "agent",
    "I want to complain",
    "I'd like to file a complaint",
    "i have a complaint",
    "is there a human there?",
    "no more bots",
    "I'm not talking to a bot",
    "can i talk to a person please",
    "speak with your manager",
    "escalate this",
    "chat with a live agent",
    "talk to someone real",
    "i wanna talk to a human",
]
# Questions that contain the words but ask the knowledge (or about something else), never for a person.
LOOKALIKES = [
    "人工智能学院在哪？",
    "人工湖",
    "投诉电话是多少？",
    "人工智能是什么",
    "客服电话多少",
    "人工湖在哪里",
    "人工智能专业怎么样",
    "转专业到人工智能难吗",
    "人工降雨是怎么回事",
    "人工岛",
    "人工草坪足球场",
    "人工客服电话是多少",
    "客服邮箱",
    "投诉邮箱是什么",
    "投诉信怎么写",
    "客服几点上班",
    "人工神经网络课程",
    "你是真人吗",
    "真人秀",
    "真人CS在哪玩",
    "怎么找工作",
    "找工作难吗",
    "客服专业就业方向",
    "在线客服时间",
    "机器人社团怎么加入",
    "人工智能与机器人实验室",
    "human resources office hours",
    "what is human rights law",
    "where is the human anatomy lab",
    "customer service phone number",
    "travel agent near campus",
    "real estate agent",
    "agent based modelling course",
    "what is a customer service representative job",
    "human computer interaction course",
    "how do humans learn",
    "can a robot talk like a person",
    "complaint form template",
    "email of the support team",
    "support vector machine",
    "人工费多少",
    "找老师请假怎么办",
    "真人图书馆活动",
]


def test_enough_variants_of_each_kind():
    assert len(ZH_REQUESTS) >= 30 and len(EN_REQUESTS) >= 30 and len(LOOKALIKES) >= 30


@pytest.mark.parametrize("message", ZH_REQUESTS + EN_REQUESTS)
def test_requests_for_a_person_trigger(message):
    assert is_handoff_request(message)


@pytest.mark.parametrize("message", LOOKALIKES)
def test_lookalikes_do_not_trigger(message):
    assert not is_handoff_request(message)


@pytest.mark.parametrize(
    "message", ["", "  ", "？？", "你好", "谢谢", "what can you do", "转人工" + "，请问图书馆几点开门" * 5]
)
def test_other_messages_do_not_trigger(message):
    assert not is_handoff_request(message)


def test_disabled_never_triggers():
    assert not Desk(HandoffSettings(enabled=False), None).is_request("转人工")


def test_the_old_reply_setting_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"handoff\.reply is gone.*handoff\.contact"):
        HandoffSettings.model_validate({"reply": "好的，已为您记录转人工的请求"})


def test_config_yaml_handoff_block(tmp_path):
    cfg = tmp_path / "config.yaml"
    extra = (
        "\nhandoff:\n  after_misses: 3\n  webhook:\n    url: http://127.0.0.1:9/hook\n    secret_env: MY_HOOK_SECRET\n"
    )
    cfg.write_text((ROOT / "config.yaml").read_text(encoding="utf-8") + extra, encoding="utf-8")
    s = load_settings(cfg).handoff
    assert s.after_misses == 3 and s.webhook.url == "http://127.0.0.1:9/hook" and s.webhook.retries == 2
    cfg.write_text((ROOT / "config.yaml").read_text(encoding="utf-8") + "\nhandoff:\n  webhook:\n    secret: x\n")
    with pytest.raises(Exception, match=r"handoff\.webhook\.secret"):
        load_settings(cfg)


@pytest.fixture
def hook():
    server = Hook()
    yield server
    server.close()


PAYLOAD = {
    "ticket": 7,
    "reason": "asked",
    "channel": "web",
    "question": "图书馆几点开门？",
    "transcript": [
        {"said": "visitor", "text": "图书馆几点开门？"},
        {"said": "bot", "text": "抱歉…"},
        {"said": "visitor", "text": "转人工"},
    ],
}


def webhook(url: str, **options) -> WebhookChannel:
    return WebhookChannel(HandoffWebhookSettings(url=url, **options))


def test_webhook_receives_the_ticket(hook):
    webhook(hook.url, timeout=2).deliver(PAYLOAD)
    ((body, headers),) = hook.received
    assert body == {**PAYLOAD, "source": "kbbot"} and SIGNATURE_HEADER not in headers


def test_secret_from_the_environment_signs_the_body(hook, monkeypatch, caplog):
    monkeypatch.setenv("KBBOT_TEST_HOOK_SECRET", "s3cr3t-value")
    with caplog.at_level(logging.DEBUG):
        webhook(hook.url, secret_env="KBBOT_TEST_HOOK_SECRET").deliver(PAYLOAD)
    _, headers = hook.received[0]
    expected = hmac.new(b"s3cr3t-value", headers["raw"], hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"sha256={expected}"
    assert "s3cr3t-value" not in caplog.text


def test_unset_secret_variable_sends_no_signature(hook, monkeypatch):
    monkeypatch.delenv("KBBOT_TEST_HOOK_SECRET", raising=False)
    webhook(hook.url, secret_env="KBBOT_TEST_HOOK_SECRET").deliver(PAYLOAD)
    assert SIGNATURE_HEADER not in hook.received[0][1]


def test_server_down_fails_naming_the_host_only():
    with pytest.raises(DeliveryError) as failed:
        webhook(f"http://127.0.0.1:{free_port()}/hook/secret-path-token", retries=2, timeout=1).deliver(PAYLOAD)
    assert "3 attempt(s)" in str(failed.value) and "Connect" in str(failed.value)
    assert "secret-path-token" not in str(failed.value)


def test_500_then_success_is_retried():
    server = Hook([500, 503, 200])
    try:
        webhook(server.url, retries=2).deliver(PAYLOAD)
        assert len(server.received) == 3
    finally:
        server.close()


def test_retries_run_out_on_500():
    server = Hook([500, 500])
    try:
        with pytest.raises(DeliveryError, match="HTTP 500"):
            webhook(server.url, retries=1).deliver(PAYLOAD)
        assert len(server.received) == 2
    finally:
        server.close()


def test_hanging_server_times_out():
    server = Hook(["hang", "hang"])
    try:
        with pytest.raises(DeliveryError, match="Timeout"):
            webhook(server.url, retries=1, timeout=0.3).deliver(PAYLOAD)
        assert len(server.received) == 2
    finally:
        server.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_never_followed_nor_taken_as_delivered(status):
    server = Hook([status])
    try:
        with pytest.raises(DeliveryError, match=f"HTTP {status}, a redirect.*set handoff.webhook.url"):
            webhook(server.url).deliver(PAYLOAD)
        assert len(server.received) == 1 and server.gets == []  # not re-sent as a GET without the body
    finally:
        server.close()


def test_webhook_url_must_be_http():
    with pytest.raises(ValueError, match="must start with http"):
        HandoffWebhookSettings(url="ftp://example.org/hook")


def test_commented_examples_in_config_yaml_are_valid():
    """Uncommenting the example blocks in config.yaml gives valid settings: a contact, hours, a webhook, agents."""
    import yaml

    from bot.chat.chitchat import ChitChat
    from bot.config.settings import ChitChatSettings

    lines = (ROOT / "config.yaml").read_text(encoding="utf-8").splitlines()
    blocks = {}
    for block in ("handoff", "chitchat"):
        example = []
        for line in lines[lines.index(f"# {block}:") :]:
            if not line.startswith("#"):
                break
            example.append(line[2:])
        blocks[block] = yaml.safe_load("\n".join(example))[block]
    handoff = HandoffSettings.model_validate(blocks["handoff"])
    defaults = HandoffSettings()
    assert (handoff.after_misses, handoff.on_confirm_no) == (defaults.after_misses, defaults.on_confirm_no)
    assert handoff.contact and handoff.hours.weekly["mon"] == ["09:00-12:00", "13:30-17:30"]
    assert handoff.webhook.url and handoff.webhook.secret_env == "KBBOT_HANDOFF_SECRET"
    assert [a.name for a in handoff.agents] == ["alice"]
    chitchat = ChitChat.from_settings(ChitChatSettings.model_validate(blocks["chitchat"]))
    assert chitchat.match("你好").reply.startswith("你好！我是XX大学")  # type: ignore[union-attr]


def test_handoff_on_the_ladder_messages():
    """Every request for a person in the benchmark's messages triggers; nothing else does (look-alikes included)."""
    rows = [
        json.loads(line)
        for name in ("ladder_sysu.jsonl", "ladder_starter.jsonl")
        for line in (ROOT / "benchmarks" / "data" / name).read_text(encoding="utf-8").splitlines()
    ]
    assert [r["question"] for r in rows if r["kind"] == "handoff" and not is_handoff_request(r["question"])] == []
    assert [r["question"] for r in rows if r["kind"] != "handoff" and is_handoff_request(r["question"])] == []
