"""WeCom as the tests see it: a simulator that encrypts and signs the documented callback fixtures and posts them to
the app over real HTTP (its crypto written here from WeCom's spec, independently of bot/api/wecom/crypto.py), and a
local stand-in for qyapi.weixin.qq.com (gettoken + message/send) that records what it was sent."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import threading
import time
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler
from typing import TypedDict
from urllib.parse import parse_qs, urlsplit

import httpx
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.support.http_stub import StubServer

# The test app's credentials (a 43-character EncodingAESKey of letters and digits, as the console generates).
TOKEN = "kbbotTestToken0123"
AES_KEY = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
CORP_ID = "ww0123456789abcdef"
AGENT_ID = 1000002
SECRET = "wecom-app-secret-for-tests"


class Sample(TypedDict):
    """WeCom's published sample: credentials, two signed requests (signature, timestamp, nonce) and their payloads."""

    token: str
    aes_key: str
    corp_id: str
    verify: tuple[str, str, str]
    echostr: str
    echo_plain: str
    post: tuple[str, str, str]
    encrypt: str


# WeCom's own sample (its WXBizMsgCrypt Sample.py): URL verification and a text message "你好" from ChenJiaShun.
SAMPLE: Sample = {
    "token": "hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo",
    "aes_key": "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt",
    "corp_id": "ww1436e0e65a779aee",
    "verify": ("012bc692d0a58dd4b10f8dfe5c4ac00ae211ebeb", "1476416373", "47744683"),
    "echostr": "fsi1xnbH4yQh0+PJxcOdhhK6TDXkjMyhEPA7xB2TGz6b+g7xyAbEkRxN/3cNXW9qdqjnoVzEtpbhnFyq6SVHyA==",
    "echo_plain": "1288432023552776189",
    "post": ("0c3914025cb4b4d68103f6bfc8db550f79dcf48e", "1476422779", "1597212914"),
    "encrypt": (
        "Kl7kjoSf6DMD1zh7rtrHjFaDapSCkaOnwu3bqLc5tAybhhMl9pFeK8NslNPVdMwmBQTNoW4mY7AIjeLvEl3NyeTkAgGzBhzTtRLNshw2AEew"
        "+kkYcD+Fq72Kt00fT0WnN87hGrW8SqGc+NcT3mu87Ha3dz1pSDi6GaUA6A0sqfde0VJPQbZ9U+3JWcoD4Z5jaU0y9GSh010wsHF8KZD24Yhm"
        "ZH4ch4Ka7ilEbjbfvhKkNL65HHL0J6EYJIZUC2pFrdkJ7MhmEbU2qARR4iQHE7wy24qy0cRX3Mfp6iELcDNfSsPGjUQVDGxQDCWjayJOpcwocug"
        "ux082f49HKYg84EpHSGXAyh+/oxwaWbvL6aSDPOYuPDGOCI8jmnKiypE+"
    ),
}


def text_message(content: str, user: str = "zhangsan", msg_id: str = "1234567890123456") -> str:
    """The documented text message (消息格式 → 文本消息), addressed to the test corp."""
    return (
        f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><FromUserName><![CDATA[{user}]]></FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[text]]></MsgType>"
        f"<Content><![CDATA[{content}]]></Content><MsgId>{msg_id}</MsgId><AgentID>{AGENT_ID}</AgentID></xml>"
    )


def image_message(user: str = "zhangsan", msg_id: str = "2234567890123456") -> str:
    """The documented image message."""
    return (
        f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><FromUserName><![CDATA[{user}]]></FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[image]]></MsgType>"
        "<PicUrl><![CDATA[https://example.invalid/p.jpg]]></PicUrl><MediaId><![CDATA[media_id]]></MediaId>"
        f"<MsgId>{msg_id}</MsgId><AgentID>{AGENT_ID}</AgentID></xml>"
    )


def enter_agent(user: str = "zhangsan") -> str:
    """The documented enter_agent event (a member opens the app)."""
    return (
        f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><FromUserName><![CDATA[{user}]]></FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[event]]></MsgType>"
        f"<Event><![CDATA[enter_agent]]></Event><EventKey><![CDATA[]]></EventKey><AgentID>{AGENT_ID}</AgentID></xml>"
    )


def sign(token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    """WeCom's msg_signature."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypt])).encode()).hexdigest()


def _cipher(aes_key: str) -> Cipher:
    key = base64.b64decode(aes_key + "=")
    return Cipher(algorithms.AES(key), modes.CBC(key[:16]))


def encrypt(message: str, aes_key: str = AES_KEY, receive_id: str = CORP_ID) -> str:
    """``message`` as WeCom encrypts it: random(16) + length + message + receiveid, PKCS#7 to 32, AES-CBC, base64."""
    body = message.encode()
    plain = os.urandom(16) + struct.pack(">I", len(body)) + body + receive_id.encode()
    pad = 32 - len(plain) % 32
    enc = _cipher(aes_key).encryptor()
    return base64.b64encode(enc.update(plain + bytes([pad]) * pad) + enc.finalize()).decode()


def decrypt(encrypted: str, aes_key: str = AES_KEY) -> tuple[str, str]:
    """(message, receiveid) of an encrypted message."""
    dec = _cipher(aes_key).decryptor()
    plain = dec.update(base64.b64decode(encrypted)) + dec.finalize()
    plain = plain[: -plain[-1]]
    (length,) = struct.unpack(">I", plain[16:20])
    return plain[20 : 20 + length].decode(), plain[20 + length :].decode()


class WeComSimulator:
    """Posts callbacks to ``url`` (the app's wecom.path) as WeCom does, signed with ``token`` (or forged)."""

    def __init__(self, url: str, token: str = TOKEN, aes_key: str = AES_KEY, corp_id: str = CORP_ID):
        self.url, self.token, self.aes_key, self.corp_id = url, token, aes_key, corp_id

    def query(self, encrypted: str, forge: bool = False, timestamp: int | None = None) -> dict[str, str]:
        """msg_signature, timestamp and nonce for ``encrypted`` (a wrong signature when ``forge``)."""
        ts, nonce = str(int(time.time()) if timestamp is None else timestamp), str(int.from_bytes(os.urandom(4)))
        signature = sign("not-the-token" if forge else self.token, ts, nonce, encrypted)
        return {"msg_signature": signature, "timestamp": ts, "nonce": nonce}

    def verify_url(self, echo: str = "8917304522613358", **kwargs) -> httpx.Response:
        """The GET WeCom sends when the admin saves the callback URL."""
        echostr = encrypt(echo, self.aes_key, self.corp_id)
        return httpx.get(self.url, params={**self.query(echostr, **kwargs), "echostr": echostr}, timeout=30)

    def signed(self, inner: str, receive_id: str | None = None, **kwargs) -> tuple[bytes, dict[str, str]]:
        """(body, query) of one callback carrying ``inner`` (a message's XML) encrypted in the documented envelope."""
        encrypted = encrypt(inner, self.aes_key, receive_id or self.corp_id)
        body = (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName><AgentID><![CDATA[{AGENT_ID}]]></AgentID>"
            f"<Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>"
        )
        return body.encode(), self.query(encrypted, **kwargs)

    def post(self, inner: str, receive_id: str | None = None, **kwargs) -> httpx.Response:
        """One callback POST carrying ``inner`` (a message's XML) encrypted in the documented envelope."""
        return self.post_raw(*self.signed(inner, receive_id, **kwargs))

    def post_raw(self, body: bytes, params: dict[str, str]) -> httpx.Response:
        """A POST of any body (malformed ones included)."""
        return httpx.post(self.url, params=params, content=body, timeout=30)

    def reply(self, response: httpx.Response) -> dict[str, str]:
        """The passive reply's fields (ToUserName, Content, ...), after checking its signature and receiveid."""
        root = ET.fromstring(response.content)
        encrypted, signature = root.findtext("Encrypt") or "", root.findtext("MsgSignature") or ""
        timestamp, nonce = root.findtext("TimeStamp") or "", root.findtext("Nonce") or ""
        assert signature == sign(self.token, timestamp, nonce, encrypted), "the reply's signature is wrong"
        message, receive_id = decrypt(encrypted, self.aes_key)
        assert receive_id == self.corp_id
        return {child.tag: child.text or "" for child in ET.fromstring(message)}


class Qyapi:
    """A local stand-in for qyapi.weixin.qq.com: gettoken and message/send, recording every call; ``down`` answers
    503 to everything, ``expire_next`` answers the next send with errcode 42001 (an expired token)."""

    def __init__(self):
        self.sent: list[dict] = []
        self.tokens_issued = 0
        self.calls: list[str] = []
        self.down = False
        self.expire_next = False
        self.arrived = threading.Condition()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, data: dict) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                url = urlsplit(self.path)
                api.calls.append(url.path)
                query = parse_qs(url.query)
                if api.down:
                    return self._json(503, {"errcode": -1, "errmsg": "system busy"})
                if url.path != "/cgi-bin/gettoken" or query.get("corpsecret") != [SECRET]:
                    return self._json(200, {"errcode": 40001, "errmsg": "invalid credential"})
                api.tokens_issued += 1
                token = f"access-token-{api.tokens_issued}"
                self._json(200, {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200})

            def do_POST(self):
                url = urlsplit(self.path)
                api.calls.append(url.path)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                token = parse_qs(url.query).get("access_token", [""])[0]
                if api.down:
                    return self._json(503, {"errcode": -1, "errmsg": "system busy"})
                if api.expire_next:
                    api.expire_next = False
                    return self._json(200, {"errcode": 42001, "errmsg": "access_token expired"})
                if token != f"access-token-{api.tokens_issued}":
                    return self._json(200, {"errcode": 40014, "errmsg": "invalid access_token"})
                with api.arrived:
                    api.sent.append({**body, "access_token": token})
                    api.arrived.notify_all()
                self._json(200, {"errcode": 0, "errmsg": "ok", "msgid": f"m{len(api.sent)}"})

            def log_message(self, *args):
                pass

        self.server = StubServer(Handler).start()
        self.url = self.server.base

    def wait_sent(self, count: int, timeout: float = 30.0) -> list[dict]:
        """The messages sent once there are ``count`` of them (AssertionError after ``timeout``)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.sent) >= count, timeout), f"sent: {self.sent}"
            return list(self.sent)

    def close(self) -> None:
        """Stop the server."""
        self.server.stop()
