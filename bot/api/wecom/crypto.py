"""WeCom's callback crypto (加解密方案, WXBizMsgCrypt): the message signature, and AES-256-CBC of the message.

signature = sha1 of the sorted [token, timestamp, nonce, encrypt] joined; AESKey = base64(EncodingAESKey + "="),
IV = AESKey[:16], PKCS#7 padding to 32 bytes; plaintext = 16 random bytes + 4-byte big-endian length + msg +
receiveid (the corp id). ``cryptography`` does the AES; the rest is here, checked step by step.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import struct

from bot.errors import ConfigError
from bot.optional import optional_import

BLOCK = 32  # WeCom pads to 32 bytes (not AES's 16)
INSTALL = "install it with: pip install 'kbbot[wecom]' (or pip install cryptography)"


class CryptoError(ValueError):
    """A message that does not decrypt to a well-formed WeCom plaintext (say why; never echo the secret)."""


class WrongReceiver(CryptoError):
    """A message that decrypts but names another corp id (receiveid) than this app's."""


def signature(token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    """The msg_signature WeCom computes over one message."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypt])).encode("utf-8")).hexdigest()


def aes_key(encoding_aes_key: str) -> bytes:
    """The 32-byte AES key of a 43-character EncodingAESKey; ConfigError when it is not one."""
    if len(encoding_aes_key) != 43:
        raise ConfigError("the WeCom EncodingAESKey has 43 characters (应用 → 接收消息 → EncodingAESKey); check it")
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except binascii.Error:
        raise ConfigError("the WeCom EncodingAESKey is not base64 (letters and digits only); check it") from None
    return key


class WeComCrypto:
    """Sign, check, encrypt and decrypt messages of one app (its token, EncodingAESKey and corp id)."""

    def __init__(self, token: str, encoding_aes_key: str, receive_id: str):
        self.token = token
        self.key = aes_key(encoding_aes_key)
        self.receive_id = receive_id
        optional_import("cryptography", "wecom (the WeCom channel)", INSTALL)

    def valid(self, msg_signature: str, timestamp: str, nonce: str, encrypt: str) -> bool:
        """True when ``msg_signature`` is WeCom's signature of this message (compared in constant time)."""
        expected = signature(self.token, timestamp, nonce, encrypt)
        return hmac.compare_digest(expected.encode(), msg_signature.lower().encode("utf-8", "replace"))

    def sign(self, timestamp: str, nonce: str, encrypt: str) -> str:
        """This app's msg_signature over a reply."""
        return signature(self.token, timestamp, nonce, encrypt)

    def _cipher(self):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        return Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16]))

    def encrypt(self, message: str, random: bytes | None = None) -> str:
        """``message`` encrypted for WeCom: base64 of AES-CBC(16 random bytes + length + message + corp id)."""
        body = message.encode("utf-8")
        plain = (random or os.urandom(16)) + struct.pack(">I", len(body)) + body + self.receive_id.encode("utf-8")
        pad = BLOCK - len(plain) % BLOCK
        encryptor = self._cipher().encryptor()
        return base64.b64encode(encryptor.update(plain + bytes([pad]) * pad) + encryptor.finalize()).decode("ascii")

    def decrypt(self, encrypt: str) -> str:
        """The message inside ``encrypt``; CryptoError when it is not base64, not padded, or for another corp."""
        try:
            data = base64.b64decode(encrypt, validate=True)
        except (binascii.Error, ValueError):
            raise CryptoError("the Encrypt field is not base64") from None
        if not data or len(data) % 16:
            raise CryptoError("the Encrypt field is not whole AES blocks")
        decryptor = self._cipher().decryptor()
        plain = decryptor.update(data) + decryptor.finalize()
        pad = plain[-1]
        if not 1 <= pad <= BLOCK or plain[-pad:] != bytes([pad]) * pad:
            raise CryptoError("the message does not decrypt with this EncodingAESKey (bad padding)")
        plain = plain[:-pad]
        if len(plain) < 20:
            raise CryptoError("the decrypted message is too short")
        (length,) = struct.unpack(">I", plain[16:20])
        if 20 + length > len(plain):
            raise CryptoError("the decrypted message's length is wrong")
        received = plain[20 + length :].decode("utf-8", "replace")
        if not hmac.compare_digest(received.encode("utf-8"), self.receive_id.encode("utf-8")):
            raise WrongReceiver("the message is for another corp id (receiveid); check wecom.corp_id")
        try:
            return plain[20 : 20 + length].decode("utf-8")
        except UnicodeDecodeError:
            raise CryptoError("the decrypted message is not UTF-8") from None
