"""Feishu's event crypto (事件订阅 → 加密策略): the request signature, and AES-256-CBC of an encrypted event.

signature = hex sha256 of (X-Lark-Request-Timestamp + X-Lark-Request-Nonce + Encrypt Key), UTF-8, followed by the
raw request body; key = sha256 of the Encrypt Key; ``encrypt`` = base64(16-byte IV + AES-CBC(PKCS#7(event JSON))).
``cryptography`` does the AES; the rest is here, checked step by step.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from bot.optional import optional_import

BLOCK = 16
INSTALL = "install it with: pip install 'kbbot[feishu]' (or pip install cryptography)"


class CryptoError(ValueError):
    """An ``encrypt`` field that does not decrypt to UTF-8 with this Encrypt Key (says why; never echoes the key)."""


class FeishuCrypto:
    """Check the signature of, and decrypt, the events of one app (its Encrypt Key)."""

    def __init__(self, encrypt_key: str):
        self._encrypt_key = encrypt_key
        self._key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
        optional_import("cryptography", "feishu (the Feishu channel)", INSTALL)

    def __repr__(self) -> str:  # never the key
        return "FeishuCrypto()"

    def sign(self, timestamp: str, nonce: str, body: bytes) -> str:
        """The X-Lark-Signature Feishu computes over one request."""
        return hashlib.sha256((timestamp + nonce + self._encrypt_key).encode("utf-8") + body).hexdigest()

    def valid(self, signature: str, timestamp: str, nonce: str, body: bytes) -> bool:
        """True when ``signature`` is Feishu's signature of this request (compared in constant time)."""
        expected = self.sign(timestamp, nonce, body)
        return hmac.compare_digest(expected.encode(), signature.strip().lower().encode("utf-8", "replace"))

    def decrypt(self, encrypt: str) -> str:
        """The event JSON inside ``encrypt``; CryptoError when it is not base64, not whole blocks or not padded."""
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        try:
            data = base64.b64decode(encrypt, validate=True)
        except (binascii.Error, ValueError):
            raise CryptoError("the encrypt field is not base64") from None
        if len(data) < 2 * BLOCK or len(data) % BLOCK:
            raise CryptoError("the encrypt field is not an IV and whole AES blocks")
        decryptor = Cipher(algorithms.AES(self._key), modes.CBC(data[:BLOCK])).decryptor()
        plain = decryptor.update(data[BLOCK:]) + decryptor.finalize()
        pad = plain[-1]
        if not 1 <= pad <= BLOCK or plain[-pad:] != bytes([pad]) * pad:
            raise CryptoError("the event does not decrypt with this Encrypt Key (bad padding)")
        try:
            return plain[:-pad].decode("utf-8")
        except UnicodeDecodeError:
            raise CryptoError("the event does not decrypt with this Encrypt Key (not UTF-8)") from None
