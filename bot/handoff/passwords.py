"""Agents' passwords as scrypt hashes (the standard library's): ``scrypt$n$r$p$salt$hash`` in base64, never the
password itself; a check takes as long for an unknown name as for a known one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

N, R, P = 2**14, 8, 1  # about 50 ms per check on one core: cheap for a login, dear for a guessing run
LENGTH = 32
_DUMMY = "scrypt$16384$8$1$" + "A" * 24 + "$" + "A" * 44  # checked for unknown names, so timing says nothing


def hash_password(password: str) -> str:
    """A new salted scrypt hash of ``password`` (what ``handoff.agents[].password_hash`` holds)."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=N, r=R, p=P, dklen=LENGTH)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    """True when ``password`` matches the hash ``stored`` (False for a malformed hash)."""
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        expected = base64.b64decode(digest)
        found = hashlib.scrypt(
            password.encode("utf-8"), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected)
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(found, expected)


def check_account(accounts: Mapping[str, str], name: str, password: str) -> bool:
    """True when ``name`` is one of ``accounts`` (name -> hash) and ``password`` is its password."""
    stored = accounts.get(name)
    ok = verify_password(password, stored or _DUMMY)
    return ok and stored is not None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
