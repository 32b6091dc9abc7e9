"""The smaller holes of issue 28, on the real served app: forwarded addresses (28.7), anonymous uploads (28.13),
logout (28.5), CSV formulas (28.11), unsafe file names (28.10) and oversized validation errors (28.9)."""

from __future__ import annotations

import httpx
import pytest

from tests.test_guard import serve_app  # noqa: F401  (fixture)


def login_failures(base: str, spoof: bool) -> list[int]:
    """Status codes of 8 wrong admin passwords, each claiming a new address in X-Forwarded-For when ``spoof``."""
    codes = []
    for n in range(8):
        headers = {"X-Forwarded-For": f"203.0.113.{n + 1}"} if spoof else {}
        answer = httpx.post(
            base + "/admin/login", data={"username": "admin", "password": f"guess-{n}"}, headers=headers, timeout=30
        )
        codes.append(answer.status_code)
    return codes


@pytest.fixture
def forwarded_env(monkeypatch):
    """The app sets FORWARDED_ALLOW_IPS for uvicorn: put back what was there after the test."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")


def test_x_forwarded_for_from_an_untrusted_client_does_not_escape_the_lockout(settings, serve_app, forwarded_env):  # noqa: F811
    settings.limits.login_failures = 3
    base = serve_app()
    assert login_failures(base, spoof=True)[2:] == [429] * 6  # main: every spoofed address started afresh (401s)


def test_x_forwarded_for_from_a_configured_proxy_names_the_client(settings, serve_app, forwarded_env):  # noqa: F811
    settings.limits.login_failures = 3
    settings.limits.trusted_proxies = ["127.0.0.1"]
    base = serve_app()
    assert login_failures(base, spoof=True) == [401] * 8  # eight clients, one failure each
