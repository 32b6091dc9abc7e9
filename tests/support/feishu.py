"""Feishu as the tests see it: a simulator that signs and encrypts the documented event payloads and posts them to the
app over real HTTP (its crypto written here from Feishu's spec, independently of bot/api/feishu/crypto.py), and a
local stand-in for open.feishu.cn (tenant_access_token, bot info, send and reply) that records what it was sent."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.support.http_stub import StubServer

# The test app's credentials, in the shapes the developer console shows.
APP_ID = "cli_a1b2c3d4e5f60718"
APP_SECRET = "feishu-app-secret-for-tests"
VERIFICATION_TOKEN = "kbbotFeishuVerificationToken0"
ENCRYPT_KEY = "kbbotFeishuEncryptKey0123456789"
BOT_OPEN_ID = "ou_bot00000000000000000000000000"
USER = "ou_7d8a6e6df7621556ce0d21922b676706"  # the asking member's open_id
P2P_CHAT = "oc_5ce6d572455d361153b7cb51da133945"
GROUP_CHAT = "oc_ba8f2c1d0e9b4a7c6d5e4f3a2b1c0d9e"

# Feishu's own decryption sample (事件订阅 → 加密策略): with the Encrypt Key "test key" this decrypts to "hello world".
SAMPLE_KEY, SAMPLE_ENCRYPT, SAMPLE_PLAIN = "test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=", "hello world"


def encrypt(plain: str, key: str = ENCRYPT_KEY) -> str:
    """``plain`` as Feishu encrypts an event: sha256(key) as the AES key, a random IV in front, PKCS#7, base64."""
    data = plain.encode()
    pad = 16 - len(data) % 16
    iv = os.urandom(16)
    enc = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + enc.update(data + bytes([pad]) * pad) + enc.finalize()).decode()


def sign(timestamp: str, nonce: str, body: bytes, key: str = ENCRYPT_KEY) -> str:
    """Feishu's X-Lark-Signature: sha256 hex of timestamp + nonce + Encrypt Key, then the raw body."""
    return hashlib.sha256((timestamp + nonce + key).encode() + body).hexdigest()


def url_verification(challenge: str = "ajls384kdjx98XX", token: str = VERIFICATION_TOKEN) -> dict[str, Any]:
    """The documented URL check Feishu posts when the admin saves the request URL."""
    return {"challenge": challenge, "token": token, "type": "url_verification"}


def message_event(
    message_type: str,
    content: dict[str, Any],
    *,
    chat_type: str = "p2p",
    mentions: tuple[tuple[str, str, str], ...] = (),
    sender: str = USER,
    event_id: str | None = None,
    token: str = VERIFICATION_TOKEN,
) -> dict[str, Any]:
    """The documented ``im.message.receive_v1`` event (schema 2.0); ``mentions``: (key, open_id, name) triples."""
    now = str(int(time.time() * 1000))
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id or uuid.uuid4().hex,
            "event_type": "im.message.receive_v1",
            "create_time": now,
            "token": token,
            "app_id": APP_ID,
            "tenant_key": "2ca1d211f64f6438",
        },
        "event": {
            "sender": {
                "sender_id": {
                    "union_id": "on_8ed6aa67826108097d9ee143816345",
                    "user_id": "e33ggbyz",
                    "open_id": sender,
                },
                "sender_type": "user",
                "tenant_key": "2ca1d211f64f6438",
            },
            "message": {
                "message_id": "om_" + uuid.uuid4().hex,
                "root_id": "",
                "parent_id": "",
                "create_time": now,
                "update_time": now,
                "chat_id": P2P_CHAT if chat_type == "p2p" else GROUP_CHAT,
                "chat_type": chat_type,
                "message_type": message_type,
                "content": json.dumps(content, ensure_ascii=False),
                "mentions": [
                    {"key": key, "id": {"open_id": open_id, "union_id": "", "user_id": ""}, "name": name}
                    for key, open_id, name in mentions
                ],
                "user_agent": "Mozilla/5.0 Lark/7.1.8",
            },
        },
    }


def text_event(text: str, **kwargs: Any) -> dict[str, Any]:
    """A text message (content ``{"text": ...}``, mentions as their keys in it)."""
    return message_event("text", {"text": text}, **kwargs)


def at_bot(text: str, **kwargs: Any) -> dict[str, Any]:
    """A group text message that @mentions the bot first: "@_user_1 <text>"."""
    return text_event(
        f"@_user_1 {text}", chat_type="group", mentions=(("@_user_1", BOT_OPEN_ID, "知识库助手"),), **kwargs
    )


class FeishuSimulator:
    """Posts events to ``url`` (the app's feishu.path) as Feishu does: encrypted and signed (or plain, forged...)."""

    def __init__(self, url: str, key: str = ENCRYPT_KEY):
        self.url, self.key = url, key

    def body(self, event: dict[str, Any], encrypted: bool = True) -> bytes:
        """The request body of ``event``: ``{"encrypt": ...}`` or the event's JSON itself."""
        plain = json.dumps(event, ensure_ascii=False)
        return json.dumps({"encrypt": encrypt(plain, self.key)} if encrypted else event, ensure_ascii=False).encode()

    def headers(self, body: bytes, timestamp: int | None = None, forge: bool = False) -> dict[str, str]:
        """The three signature headers for ``body`` (a wrong signature when ``forge``)."""
        ts, nonce = str(int(time.time()) if timestamp is None else timestamp), uuid.uuid4().hex[:16]
        signature = sign(ts, nonce, body, "not-the-key" if forge else self.key)
        return {"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce, "X-Lark-Signature": signature}

    def post(
        self,
        event: dict[str, Any],
        *,
        encrypted: bool = True,
        signed: bool = True,
        forge: bool = False,
        timestamp: int | None = None,
    ) -> httpx.Response:
        """One POST carrying ``event``, as Feishu sends it (``signed=False``: without the signature headers)."""
        body = self.body(event, encrypted)
        return self.post_raw(body, self.headers(body, timestamp, forge) if signed else {})

    def post_raw(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """A POST of any body (malformed ones included)."""
        return httpx.post(self.url, content=body, headers={"Content-Type": "application/json", **headers}, timeout=30)


class OpenPlatform:
    """A local stand-in for open.feishu.cn: tenant_access_token/internal, bot/v3/info, im/v1/messages (send) and
    im/v1/messages/:id/reply, recording each call. ``down`` answers 503 to everything; ``refuse_next`` answers the
    next message call with code 99991663 (an invalid token, as Feishu does, with HTTP 400); ``expire`` is the
    lifetime of the tokens it issues, after which it refuses them; a repeated ``uuid`` is shown once, as on Feishu."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.tokens: dict[str, float] = {}  # token -> time it expires
        self.refused = 0
        self.down = False
        self.refuse_next = False
        self.expire = 7200
        self.arrived = threading.Condition()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, data: dict[str, Any]) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _token_ok(self) -> bool:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if token not in platform.tokens:
                    self._json(400, {"code": 99991661, "msg": "Missing access token for authorization."})
                    return False
                if platform.refuse_next or time.time() > platform.tokens[token]:
                    platform.refuse_next, platform.refused = False, platform.refused + 1
                    self._json(400, {"code": 99991663, "msg": "Invalid access token for authorization."})
                    return False
                return True

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                platform.calls.append(f"GET {url.path}")
                if platform.down:
                    return self._json(503, {"code": -1, "msg": "service unavailable"})
                if url.path != "/open-apis/bot/v3/info":
                    return self._json(404, {"code": 404, "msg": "not found"})
                if self._token_ok():
                    bot = {"activate_status": 2, "app_name": "知识库助手", "open_id": BOT_OPEN_ID, "ip_white_list": []}
                    self._json(200, {"code": 0, "msg": "ok", "bot": bot})

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                platform.calls.append(f"POST {url.path}")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if platform.down:
                    return self._json(503, {"code": -1, "msg": "service unavailable"})
                if url.path == "/open-apis/auth/v3/tenant_access_token/internal":
                    if body != {"app_id": APP_ID, "app_secret": APP_SECRET}:
                        return self._json(400, {"code": 10014, "msg": "app secret invalid"})
                    token = f"t-{len(platform.tokens) + 1}"
                    platform.tokens[token] = time.time() + platform.expire
                    return self._json(
                        200, {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": platform.expire}
                    )
                if not self._token_ok():
                    return None
                query = parse_qs(url.query)
                if url.path == "/open-apis/im/v1/messages":
                    target = {
                        "receive_id_type": query.get("receive_id_type", [""])[0],
                        "receive_id": body["receive_id"],
                    }
                elif url.path.startswith("/open-apis/im/v1/messages/") and url.path.endswith("/reply"):
                    target = {"reply_to": url.path.split("/")[-2]}
                else:
                    return self._json(404, {"code": 404, "msg": "not found"})
                with platform.arrived:
                    if not any(m["uuid"] == body.get("uuid") for m in platform.sent):
                        platform.sent.append({**target, **body, "text": json.loads(body["content"]).get("text")})
                        platform.arrived.notify_all()
                self._json(200, {"code": 0, "msg": "success", "data": {"message_id": f"om_sent{len(platform.sent)}"}})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = StubServer(Handler).start()
        self.url = self.server.base

    @property
    def tokens_issued(self) -> int:
        """How many tenant_access_tokens were issued."""
        return len(self.tokens)

    def wait_sent(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The messages sent once there are ``count`` of them (AssertionError after ``timeout``)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.sent) >= count, timeout), f"sent: {self.sent}"
            return list(self.sent)

    def close(self) -> None:
        """Stop the server."""
        self.server.stop()
