"""The admin login (``POST /admin/login``) is throttled as the chat login is (bot.serving.logins.ThrottledLogin): wrong
passwords lock the username + address pair out (429, a message saying when to retry, even the right password is
refused), the lockout ends, a success clears the record, and another address is not affected. A clock is injected:
no test sleeps."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from bot.config.variants import replace
from bot.serving.logins import ADDRESS_FAILURES_PER_MINUTE, ThrottledLogin, locked_message
from bot.ui.admin import COOKIE, AdminAuth

pytestmark = pytest.mark.unit

ADMIN = ("boss", "s3cret-pass")


@pytest.fixture
def admin():
    """(AdminAuth with a 3-failure, 30 s lockout on a settable clock, the clock as a one-item list)."""
    clock = [0.0]
    auth = AdminAuth(ADMIN)
    auth.throttle = ThrottledLogin(auth.check_password, failures=3, lockout=30, clock=lambda: clock[0])
    return auth, clock


def client(auth: AdminAuth, address: str = "10.0.0.1") -> TestClient:
    """A test client of the admin routes whose requests come from ``address``."""
    api = FastAPI()
    api.include_router(auth.router())
    return TestClient(api, client=(address, 50000), follow_redirects=False)


def login(http: TestClient, password: str, username: str = ADMIN[0]):
    return http.post("/admin/login", data={"username": username, "password": password})


def test_wrong_passwords_lock_the_pair_and_the_right_password_is_refused_while_locked(admin):
    auth, clock = admin
    http = client(auth)
    assert [login(http, f"wrong-{n}").status_code for n in range(2)] == [401, 401]
    locked = login(http, "wrong-2")  # the third failure locks the pair, and says so
    assert locked.status_code == 429 and COOKIE not in locked.cookies
    assert locked.headers["retry-after"] == "30" and "Wrong username or password" not in locked.text
    assert "30 秒后再试" in locked.text and locked.text.index("30 秒") < locked.text.index("try again in 30 s")
    clock[0] = 10
    refused = login(http, ADMIN[1])
    assert refused.status_code == 429 and COOKIE not in refused.cookies and refused.headers["retry-after"] == "20"
    assert "try again in 20 s" in refused.text


def test_the_lockout_ends_and_a_success_clears_the_record(admin):
    auth, clock = admin
    http = client(auth)
    assert [login(http, "x").status_code for _ in range(3)] == [401, 401, 429]
    clock[0] = 31  # lockout over (no sleeping: the throttle's clock)
    ok = login(http, ADMIN[1])
    assert ok.status_code == 303 and auth.valid(ok.cookies[COOKIE])
    assert [login(http, "x").status_code for _ in range(2)] == [401, 401]
    assert login(http, ADMIN[1]).status_code == 303  # clears the two failures: two more do not lock
    assert [login(http, "x").status_code for _ in range(2)] == [401, 401]
    assert login(http, ADMIN[1]).status_code == 303


def test_a_locked_address_does_not_lock_another(admin):
    auth, _ = admin
    first, second = client(auth, "10.0.0.1"), client(auth, "10.0.0.2")
    assert [login(first, "x").status_code for _ in range(3)] == [401, 401, 429]
    assert login(first, ADMIN[1]).status_code == 429
    assert login(second, ADMIN[1]).status_code == 303
    assert [login(second, "x").status_code for _ in range(2)] == [401, 401]  # its own count starts at zero


def test_spraying_usernames_from_one_address_is_capped(admin):
    auth, clock = admin
    http, other = client(auth, "10.0.0.1"), client(auth, "10.0.0.2")
    codes = [login(http, "guess", f"user{n}").status_code for n in range(ADDRESS_FAILURES_PER_MINUTE)]
    assert codes[:-1] == [401] * (ADDRESS_FAILURES_PER_MINUTE - 1) and codes[-1] == 429
    refused = login(http, ADMIN[1])  # the admin's own pair never failed, but the address is over its cap
    assert refused.status_code == 429 and "try again in 60 s" in refused.text
    assert login(other, ADMIN[1]).status_code == 303
    clock[0] = 60
    assert login(http, ADMIN[1]).status_code == 303


def test_the_admin_login_takes_the_chat_logins_settings(settings, monkeypatch):
    monkeypatch.setenv(settings.ui.admin.username_env, ADMIN[0])
    monkeypatch.setenv(settings.ui.admin.password_env, ADMIN[1])
    settings = replace(settings, "limits.login_failures", 2)
    settings = replace(settings, "limits.login_lockout_seconds", 7)
    auth = AdminAuth.from_settings(settings)
    assert (auth.throttle.failures, auth.throttle.lockout) == (2, 7)
    http = client(auth)
    assert [login(http, "x").status_code for _ in range(2)] == [401, 429]
    assert "try again in 7 s" in login(http, ADMIN[1]).text


def test_the_locked_message_says_when_to_retry_chinese_first():
    assert locked_message(0.2).startswith("登录失败次数过多") and "1 秒" in locked_message(0.2)
    assert "try again in 45 s" in locked_message(44.1)
    assert "15 分钟" in locked_message(900) and "try again in 15 min" in locked_message(900)


def test_logout_revokes_the_session_on_the_server_a_copied_cookie_too(admin):
    from types import SimpleNamespace

    auth, clock = admin
    auth.clock = lambda: clock[0]
    http = client(auth)
    cookie = login(http, ADMIN[1]).cookies[COOKIE]
    other = auth.token()  # another admin's session
    copied = SimpleNamespace(headers={"cookie": f"{COOKIE}={cookie}"})  # e.g. taken from a shared machine
    assert auth.allows(copied)
    assert http.get("/admin/logout", headers={"Cookie": f"{COOKIE}={cookie}"}).status_code == 303
    assert not auth.allows(copied) and not auth.valid(cookie)  # main: valid for the rest of its 12 h
    assert auth.valid(other)  # only that session ended
    clock[0] = 13 * 3600  # both expired: the revocation list forgets them when the next logout comes
    fresh = auth.token()
    auth.revoke(fresh)
    assert list(auth._revoked) == [fresh.split(".")[1]]
