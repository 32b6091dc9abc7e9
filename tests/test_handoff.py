"""Hand-off: explicit requests for a person trigger, look-alikes do not; the webhook against a real local server."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time

import pytest

from bot.chat.handoff import SIGNATURE_HEADER, Handoff, unfilled_placeholders
from bot.config.settings import HandoffSettings, HandoffWebhookSettings, load_settings
from bot.messages import Message
from tests.support.knowledge import ROOT
from tests.support.webhook import Hook

# A webhook thread that dies with a traceback is a failure, not a warning.
pytestmark = [pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning"), pytest.mark.unit]

ZH_REQUESTS = [
    "转人工",
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


@pytest.fixture(scope="module")
def handoff() -> Handoff:
    return Handoff.from_settings(HandoffSettings())


def test_enough_variants_of_each_kind():
    assert len(ZH_REQUESTS) >= 30 and len(EN_REQUESTS) >= 30 and len(LOOKALIKES) >= 30


@pytest.mark.parametrize("message", ZH_REQUESTS + EN_REQUESTS)
def test_requests_for_a_person_trigger(handoff, message):
    assert handoff.is_request(message)


@pytest.mark.parametrize("message", LOOKALIKES)
def test_lookalikes_do_not_trigger(handoff, message):
    assert not handoff.is_request(message)


@pytest.mark.parametrize(
    "message", ["", "  ", "？？", "你好", "谢谢", "what can you do", "转人工" + "，请问图书馆几点开门" * 5]
)
def test_other_messages_do_not_trigger(handoff, message):
    assert not handoff.is_request(message)


def test_disabled_never_triggers():
    assert not Handoff.from_settings(HandoffSettings(enabled=False)).is_request("转人工")


def test_settings_reach_the_object():
    s = HandoffSettings(reply="请拨打 020-1234 / Call 020-1234", after_misses=0, on_confirm_no=True)
    h = Handoff.from_settings(s)
    assert (h.reply, h.after_misses, h.on_confirm_no) == ("请拨打 020-1234 / Call 020-1234", 0, True)
    assert h.last_error is None and h.last_error_at is None


def test_default_reply_is_bilingual_and_holds_no_placeholder_a_user_would_read():
    zh, en = HandoffSettings().reply.split("\n")
    assert "人工" in zh and "person" in en
    assert unfilled_placeholders(zh + en) == []


def test_a_reply_with_the_examples_placeholders_left_in_is_reported_at_start(caplog):
    example = "正在为您转接人工服务。电话 <电话>，网址 <链接>。/ phone <phone>, <link>"
    with caplog.at_level("WARNING", logger="bot.chat.handoff"):
        Handoff.from_settings(HandoffSettings(reply=example))
    assert "<电话>, <链接>, <phone>, <link>" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="bot.chat.handoff"):
        Handoff.from_settings(HandoffSettings(reply="请拨打 020-1234，或访问 <https://example.org/help>。"))
        Handoff.from_settings(HandoffSettings(reply=example, enabled=False))
    assert caplog.text == ""


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


TRANSCRIPT: list[Message] = [
    {"role": "user", "content": "图书馆几点开门？"},
    {"role": "assistant", "content": "抱歉…"},
    {"role": "user", "content": "转人工"},
]


def make(url: str | None, **webhook) -> Handoff:
    h = Handoff.from_settings(HandoffSettings(webhook=HandoffWebhookSettings(url=url, **webhook)))
    h.backoff = 0.01
    return h


def test_webhook_receives_the_transcript(hook):
    h = make(hook.url, timeout=2)
    h.notify(TRANSCRIPT + [{"role": "user", "content": 3, "extra": "dropped"}, "not a message"], "request")  # type: ignore[list-item, typeddict-unknown-key, typeddict-item]  # malformed on purpose
    assert h.wait(5)
    ((body, headers),) = hook.received
    assert body["reason"] == "request" and body["source"] == "kbbot"
    assert body["transcript"] == TRANSCRIPT + [{"role": "user", "content": "3"}]
    assert body["time"].endswith("+00:00") and SIGNATURE_HEADER not in headers
    assert h.last_error is None and h.last_ok_at is not None


def test_secret_from_the_environment_signs_the_body(hook, monkeypatch, caplog):
    monkeypatch.setenv("KBBOT_TEST_HOOK_SECRET", "s3cr3t-value")
    h = make(hook.url, secret_env="KBBOT_TEST_HOOK_SECRET")
    with caplog.at_level(logging.DEBUG):
        h.notify(TRANSCRIPT, "misses")
        assert h.wait(5)
    _, headers = hook.received[0]
    expected = hmac.new(b"s3cr3t-value", headers["raw"], hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"sha256={expected}"
    assert "s3cr3t-value" not in caplog.text


def test_unset_secret_variable_sends_no_signature(hook, monkeypatch):
    monkeypatch.delenv("KBBOT_TEST_HOOK_SECRET", raising=False)
    h = make(hook.url, secret_env="KBBOT_TEST_HOOK_SECRET")
    h.notify(TRANSCRIPT, "request")
    assert h.wait(5) and SIGNATURE_HEADER not in hook.received[0][1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_is_logged_and_kept_never_raised(caplog):
    h = make(f"http://127.0.0.1:{free_port()}/hook/secret-path-token", retries=2, timeout=1)
    with caplog.at_level(logging.WARNING, logger="bot.chat.handoff"):
        h.notify(TRANSCRIPT, "request")
        assert h.wait(5)
    assert h.last_error is not None and "3 attempt(s)" in h.last_error and "Connection" in h.last_error
    assert h.last_error_at is not None and time.time() - h.last_error_at < 10 and h.last_ok_at is None
    assert "failed after 3 attempt(s)" in caplog.text and "secret-path-token" not in caplog.text


def test_500_then_success_is_retried():
    server = Hook([500, 503, 200])
    try:
        h = make(server.url, retries=2)
        h.notify(TRANSCRIPT, "request")
        assert h.wait(5)
        assert len(server.received) == 3 and h.last_error is None and h.last_ok_at is not None
    finally:
        server.close()


def test_retries_run_out_on_500():
    server = Hook([500, 500])
    try:
        h = make(server.url, retries=1)
        h.notify(TRANSCRIPT, "request")
        assert h.wait(5)
        assert len(server.received) == 2 and h.last_error is not None and "HTTP 500" in h.last_error
    finally:
        server.close()


def test_hanging_server_times_out_and_notify_returns_at_once():
    server = Hook(["hang", "hang"])
    try:
        h = make(server.url, retries=1, timeout=0.3)
        start = time.perf_counter()
        h.notify(TRANSCRIPT, "request")
        assert time.perf_counter() - start < 0.05  # the chat never waits for the webhook
        assert not h.wait(0.1)  # still in flight
        assert h.wait(5)
        assert len(server.received) == 2 and h.last_error is not None and "timed out" in h.last_error
    finally:
        server.close()


def test_no_url_or_disabled_sends_nothing(hook):
    make(None).notify(TRANSCRIPT, "request")
    off = Handoff.from_settings(HandoffSettings(enabled=False, webhook=HandoffWebhookSettings(url=hook.url)))
    off.notify(TRANSCRIPT, "request")
    assert off.wait(1) and hook.received == []


def test_webhook_url_must_be_http():
    with pytest.raises(ValueError, match="must start with http"):
        HandoffWebhookSettings(url="ftp://example.org/hook")


def test_long_transcript_is_cut(hook):
    h = make(hook.url)
    h.notify([{"role": "user", "content": f"{i}" + "长" * 5000} for i in range(80)], "misses")
    assert h.wait(5)
    sent = hook.received[0][0]["transcript"]
    assert len(sent) == 50 and sent[0]["content"].startswith("30") and len(sent[-1]["content"]) == 4000


def test_calls_in_flight_are_capped():
    server = Hook(["hang"] * 20)
    try:
        h = make(server.url, retries=0, timeout=2)
        for _ in range(17):
            h.notify(TRANSCRIPT, "request")
        assert h.last_error is not None and "in flight" in h.last_error
    finally:
        server.close()
        assert h.wait(5)


def test_bad_url_and_bad_transcript_never_raise():
    h = make("http://127.0.0.1:99999/secret-path-token", retries=0)
    h.notify(TRANSCRIPT, "request")
    assert h.wait(5) and h.last_error is not None and "secret-path-token" not in h.last_error
    h2 = make("http://127.0.0.1:9/x", retries=0)
    h2.notify(None, "request")  # type: ignore[arg-type]
    assert h2.last_error is not None and "could not start" in h2.last_error


def test_commented_examples_in_config_yaml_are_valid():
    """Uncommenting the example blocks in config.yaml gives valid settings: the defaults, a webhook, a reply."""
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
    assert (handoff.reply, handoff.after_misses, handoff.on_confirm_no) == (
        defaults.reply,
        defaults.after_misses,
        defaults.on_confirm_no,
    )
    assert handoff.webhook.url and handoff.webhook.secret_env == "KBBOT_HANDOFF_SECRET"
    chitchat = ChitChat.from_settings(ChitChatSettings.model_validate(blocks["chitchat"]))
    assert chitchat.match("你好").reply.startswith("你好！我是XX大学")  # type: ignore[union-attr]


def test_handoff_on_the_ladder_messages(handoff):
    """Every request for a person in the benchmark's messages triggers; nothing else does (look-alikes included)."""
    rows = [
        json.loads(line)
        for name in ("ladder_sysu.jsonl", "ladder_starter.jsonl")
        for line in (ROOT / "benchmarks" / "data" / name).read_text(encoding="utf-8").splitlines()
    ]
    assert [r["question"] for r in rows if r["kind"] == "handoff" and not handoff.is_request(r["question"])] == []
    assert [r["question"] for r in rows if r["kind"] != "handoff" and handoff.is_request(r["question"])] == []
