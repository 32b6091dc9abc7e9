"""Admin sessions across replicas: one signing key from ``ui.admin.session_key_env`` makes a login on one replica
valid on the others (and across restarts); without it each process signs with its own random key."""

from __future__ import annotations

import pytest

from bot.errors import ConfigError
from bot.ui.admin import AdminAuth

pytestmark = pytest.mark.unit

KEY = "k" * 40


@pytest.fixture
def admin_env(settings, monkeypatch):
    monkeypatch.setenv(settings.ui.admin.username_env, "boss")
    monkeypatch.setenv(settings.ui.admin.password_env, "s3cret-pass")
    return settings


def test_one_session_key_makes_a_login_valid_on_every_replica(admin_env, monkeypatch):
    monkeypatch.setenv(admin_env.ui.admin.session_key_env, KEY)
    first, second = AdminAuth.from_settings(admin_env), AdminAuth.from_settings(admin_env)
    cookie = first.token()
    assert first.valid(cookie) and second.valid(cookie)
    assert not second.valid(cookie[:-1] + ("0" if cookie[-1] != "0" else "1"))  # still signed, not just accepted


def test_without_a_session_key_each_process_signs_its_own(admin_env, monkeypatch):
    monkeypatch.delenv(admin_env.ui.admin.session_key_env, raising=False)
    first, second = AdminAuth.from_settings(admin_env), AdminAuth.from_settings(admin_env)
    assert first.valid(first.token()) and not second.valid(first.token())


def test_a_short_session_key_is_refused_naming_the_variable(admin_env, monkeypatch):
    monkeypatch.setenv(admin_env.ui.admin.session_key_env, "tiny-QX7")
    with pytest.raises(ConfigError, match="KBBOT_SESSION_KEY holds a session key shorter than 32") as err:
        AdminAuth.from_settings(admin_env)
    assert "QX7" not in str(err.value)  # the message never shows the key
