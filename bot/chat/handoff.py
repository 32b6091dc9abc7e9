"""Handing a conversation to a person: spotting explicit requests, and telling a webhook with the transcript.

A request is a message that asks for a person ("转人工", "人工客服", "我要投诉", "talk to a human", "agent
please"), not one that merely contains the words: "人工智能学院在哪？", "人工湖", "转专业到人工智能难吗" and
"what are human resources' hours" name no person to talk to, and "投诉电话是多少？" / "客服电话多少" ask the
knowledge for a phone number. So a request pattern must match and no information word (phone, address, hours,
where, major...) may appear; messages longer than a request ever is are not requests.

The webhook gets ``{"reason", "transcript": [{role, content}], "time", "source"}`` as JSON from a background
thread, with a timeout and retries with backoff; it never blocks the chat nor raises. Failures are logged
(the host only: a webhook URL may embed a token) and kept in ``last_error`` / ``last_error_at`` for admins.
The optional secret comes only from the environment and is sent as an HMAC-SHA256 signature of the body.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import threading
import time
import unicodedata
import urllib.error
import urllib.request
from datetime import UTC, datetime
from urllib.parse import urlsplit

from bot.config.settings import HandoffSettings
from bot.messages import Message

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Kbbot-Signature"
# The transcript comes from the client (an API caller sends the history): the webhook gets its newest messages,
# each cut, and at most MAX_IN_FLIGHT calls run at once (more are dropped and recorded as an error).
MAX_MESSAGES = 50
MAX_CONTENT_CHARS = 4000
MAX_IN_FLIGHT = 16
MAX_ZH_CHARS = 40
MAX_EN_WORDS = 20
_PARTICLE = "吧啊呀呢吗哦嘛啦了么"
_ZH_REQUEST = re.compile(
    "|".join(
        [
            rf"(?<!非)人工(?=客服|服务|坐席|座席|接待|接听|回复|处理|介入|$|[{_PARTICLE}])",  # 转人工, 人工客服, 有人工吗
            rf"(?<!是)真人(?=客服|服务|聊|回|对话|说话|来|沟通|接|$|[{_PARTICLE}])",  # 找真人, 真人客服 (not 你是真人吗)
            r"(?:找|联系|接|转|要|叫|呼叫|换|给我|我要|求)(?:一下|个|一个)?(?:你们)?的?(?:在线|人工)?客服",
            rf"客服(?:在吗|在不在|呢|$|[{_PARTICLE}])",
            r"在线客服",
            r"(?:要|想|得|必须|我)投诉|^投诉|投诉(?:你们|一下|$)",
            r"(?:找|联系|叫|要|转|接|换|给我)(?:一下|个)?(?:你们)?的?"
            r"(?:工作人员|负责人|管理员|领导|经理|主管|值班人员|活人|人来)",
            r"(?:和|跟|与|找|让)(?:一个|个)?(?:真|活)?人(?:说话|聊|对话|沟通|谈|回答)",
            r"不(?:想|要)(?:和|跟)?(?:机器人|ai|机器)",
            r"来个人|叫人来|有没有人工|有活人",
        ]
    )
)
# A question about the service (its phone number, address, hours), or about a subject that contains the words.
_ZH_INFO = re.compile(
    r"电话|号码|热线|邮箱|地址|在哪|哪里|几点|时间|什么时候|是什么|什么是|多少|网址|网站|招聘|工资|岗位|专业|学院|课程|"
    r"智能|怎么写|模板|范文"
)
_PERSON = (
    r"(?:an? |the |some |your |one of your )?(?:real |live |actual |human |customer )?"
    r"(?:human|humans|person|people|agent|representative|rep|operator|staff|staff member|customer service|"
    r"customer support|support team|support|employee|manager|supervisor|advisor|adviser|someone|somebody)"
)
_PERSON_STRONG = (  # without "someone": "i need someone to explain this" asks the bot
    r"(?:an? |the |your )?(?:real |live |actual )?"
    r"(?:human|person|agent|representative|operator|staff member|customer service|customer support|manager|supervisor)"
)
_EN_REQUEST = re.compile(
    "|".join(
        [
            rf"\b(?:talk|speak|chat|get in touch)(?: to| with) {_PERSON}\b",
            rf"\b(?:connect|transfer|put|pass|forward|escalate|hand)(?: me| this| it)?(?: over| through)?(?: to| with) {_PERSON}\b",
            rf"^(?:please |pls )?(?:{_PERSON_STRONG}|real person|a real person|human being|humans?)(?: please| pls| now| asap| agent)*$",
            rf"\b(?:i want|i need|i'd like|id like|let me|can i|could i|may i|get me|give me|i wanna|i demand|bring me)"
            rf"(?: to)?(?: talk| speak)?(?: to| with)? {_PERSON_STRONG}\b",
            r"\b(?:i want to|i'd like to|i wanna|i need to|let me|i wish to|i will|i'm going to)"
            r"(?: make| file| lodge| submit| register)?(?: a)? complain(?:t)?\b",
            r"\bi have a complaint\b|^complaint$|^escalate\b",
            r"\b(?:is there|are there|any) (?:a |any )?(?:real )?(?:human|humans|person|people)(?: there| here)?$",
            r"\b(?:not|no|stop|enough)(?: more)?(?: talking to)? (?:a |the |this )?(?:bot|robot|machine)s?\b",
        ]
    )
)
_EN_INFO = re.compile(
    r"\b(?:phone|number|email|e-mail|address|hours|website|url|salary|job|jobs|career|major|course|courses|"
    r"degree|resources|rights|anatomy|body|biology|computer|interaction|estate|travel|secret|based|model|models|"
    r"policy|form|template|letter)\b"
    # a question about machines talking to people: "can a robot talk to a person?"
    r"|^(?:can|could|do|does|will|would) (?:a |an |the )?(?:robots?|bots?|ai|machines?|chatbots?)\b"
)


def _compact(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def _words(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    return " ".join(re.findall(r"[a-z0-9']+", text))


def is_handoff_request(message: str) -> bool:
    """True when the message asks for a person (Chinese or English), not when it asks about one."""
    compact = _compact(message)
    if not compact:
        return False
    chinese = re.search(r"[\u4e00-\u9fff]", compact)
    if chinese and len(compact) <= MAX_ZH_CHARS and _ZH_REQUEST.search(compact) and not _ZH_INFO.search(compact):
        return True
    words = _words(message)
    return 0 < len(words.split()) <= MAX_EN_WORDS and bool(_EN_REQUEST.search(words)) and not _EN_INFO.search(words)


def _host(url: str) -> str:
    """The scheme and host of a URL, for logs: the path or query of a webhook URL may hold a token."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a port out of range, a broken IPv6 literal
        return "(invalid URL)"


_PLACEHOLDER = re.compile(r"<[^<>\s/=\"']{1,12}>")


def unfilled_placeholders(text: str) -> list[str]:
    """The ``<...>`` placeholders of a copied example left in ``text`` (short, without spaces or markup)."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(text)))


class Handoff:
    """The configured hand-off: request detection, the reply, when to escalate, and the webhook."""

    def __init__(self, settings: HandoffSettings):
        self.settings = settings
        self.enabled = settings.enabled
        self.reply: str = settings.reply
        self.after_misses: int = settings.after_misses
        self.on_confirm_no: bool = settings.on_confirm_no
        self.backoff = 0.5  # seconds before the first retry, doubling after each
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.last_ok_at: float | None = None
        self._lock = threading.Lock()
        self._pending: list[threading.Thread] = []

    @classmethod
    def from_settings(cls, s: HandoffSettings) -> Handoff:
        """The hand-off described by the ``handoff`` settings block (a warning when its reply still holds the
        example's <placeholders>: users would read "电话 <电话>")."""
        left = unfilled_placeholders(s.reply) if s.enabled else []
        if left:
            log.warning("handoff.reply still holds placeholders to fill in: %s", ", ".join(left))
        return cls(s)

    def is_request(self, message: str) -> bool:
        """True when hand-off is enabled and the message asks for a person."""
        return self.enabled and is_handoff_request(message)

    def notify(self, transcript: list[Message], reason: str) -> None:
        """Post the transcript to the webhook from a background thread; returns at once and never raises."""
        try:
            url = self.settings.webhook.url
            if not self.enabled or not url:
                return
            payload = {
                "reason": str(reason),
                "transcript": [
                    {"role": str(m.get("role", ""))[:20], "content": str(m.get("content", ""))[:MAX_CONTENT_CHARS]}
                    for m in transcript
                    if isinstance(m, dict)
                ][-MAX_MESSAGES:],
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
                "source": "kbbot",
            }
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            thread = threading.Thread(target=self._deliver, args=(url, body), name="handoff-webhook", daemon=True)
            with self._lock:
                self._pending = [t for t in self._pending if t.is_alive()]
                full = len(self._pending) >= MAX_IN_FLIGHT
                if not full:
                    self._pending.append(thread)
            if full:
                self._failed(f"{MAX_IN_FLIGHT} webhook calls already in flight; this hand-off was not sent")
                return
            thread.start()
        except Exception as exc:  # never let the chat fail because of the webhook
            self._failed(f"could not start the webhook call: {type(exc).__name__}")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for webhook calls in flight (for shutdown and tests); True when none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            pending = list(self._pending)
        for thread in pending:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in pending)

    def _deliver(self, url: str, body: bytes) -> None:
        try:
            self._post(url, body)
        except Exception as exc:  # the thread must never die with a traceback (nor print the URL in one)
            self._failed(f"webhook {_host(url)} failed: {type(exc).__name__}")

    def _post(self, url: str, body: bytes) -> None:
        hook = self.settings.webhook
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "kbbot-handoff"}
        secret = hook.secret()
        if secret:
            digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        error = ""
        for attempt in range(hook.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=hook.timeout) as response:
                    response.read(1024)
                with self._lock:
                    self.last_ok_at = time.time()
                return
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}"
            except urllib.error.URLError as exc:
                error = f"{type(exc.reason).__name__}: {exc.reason}" if exc.reason else "URLError"
            except Exception as exc:  # timeouts, resets, anything: logged, never raised into a thread's death
                error = type(exc).__name__ + (f": {exc}" if str(exc) else "")
        error = error.replace(url, _host(url))  # an error text may quote the URL, and its path may hold a token
        self._failed(f"webhook {_host(url)} failed after {hook.retries + 1} attempt(s): {error}")

    def _failed(self, message: str) -> None:
        with self._lock:
            self.last_error, self.last_error_at = message, time.time()
        log.warning("hand-off %s", message)
