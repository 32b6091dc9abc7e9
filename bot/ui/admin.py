"""Admins apart from chat users: a login at ``/admin/login`` (credentials from the environment) that sets a signed
cookie, and Blocks whose admin events refuse, server-side, every request without it. The login is throttled as the
chat login is (:class:`bot.serving.logins.ThrottledLogin`: a lockout per username + address, a cap per address).

Gradio exposes every event as an HTTP endpoint (``/gradio_api/call/<api_name>``, the queue by ``fn_index``), so
hiding the admin tabs is only for looks: :class:`AdminBlocks` checks the cookie in ``process_api``, the one path
every event takes. The cookie is ``<expiry>.<session>.<HMAC-SHA256>`` under a key made at start (a restart logs
admins out), or derived from ``ui.admin.session_key_env`` (shared by replicas), HttpOnly and SameSite=Strict (no
cross-site requests carry it). Logging out revokes the cookie on the
server (a copied cookie stops working too; with ``limits.backend: postgres`` on every replica). Without admin
credentials nobody is an admin.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING, Any

import gradio as gr
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from gradio.context import Context

from bot.config.settings import AdminSettings, Settings, default_of
from bot.serving.logins import ThrottledLogin, locked_message
from bot.serving.ratelimit import shared_store
from bot.serving.shared_logins import login_throttle
from bot.texts import ADMIN_OFF, NOT_ADMIN
from bot.ui.events import PRIVATE

if TYPE_CHECKING:
    from bot.serving.shared_limits import RateStore

log = logging.getLogger(__name__)

COOKIE = "kbbot_admin"
LOGIN_PAGE = """<!doctype html><html lang="zh"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>管理员登录 / Admin login</title>
<style>body{{font-family:"Source Sans Pro","WenQuanYi Micro Hei","PingFang SC","Microsoft YaHei",sans-serif;
background:#f7f7f8;color:#1f2937;margin:0;padding:10vh 16px}}
main{{max-width:380px;margin:0 auto;background:#fff;border:1px solid #e5e7eb;border-radius:12px;padding:24px 28px;
box-shadow:0 1px 3px rgba(0,0,0,.06)}}h2{{margin:0 0 18px;font-size:20px}}label{{font-size:14px;color:#4b5563}}
input{{display:block;width:100%;margin:6px 0 16px;padding:9px 10px;font-size:16px;box-sizing:border-box;
border:1px solid #d1d5db;border-radius:8px}}input:focus{{outline:2px solid #fdba74;border-color:#f97316}}
button{{width:100%;padding:10px;font-size:16px;border:0;border-radius:8px;background:#f97316;color:#fff;
cursor:pointer}}button:hover{{background:#ea580c}}a{{color:#ea580c;font-size:14px}}
.err{{color:#b91c1c;background:#fef2f2;border-radius:8px;padding:8px 10px}}</style></head><body><main>
<h2>管理员登录 / Admin login</h2>{message}
<form method="post" action="login"><label>用户名 / Username<input name="username" id="kb-admin-user"
 autocomplete="username" required></label><label>密码 / Password<input name="password" id="kb-admin-password"
 type="password" autocomplete="current-password" required></label>
<button type="submit" id="kb-admin-submit">登录 / Log in</button></form>
<p><a href="../">← 返回对话 / Back to the chat</a></p></main></body></html>"""


def login_page(template: str, message: str = "", status: int = 200) -> HTMLResponse:
    """A login page from ``template`` (admin, agent or publisher), with an escaped error line when ``message``."""
    line = f"<p class='err' id='kb-admin-error'>{html.escape(message)}</p>" if message else ""
    return HTMLResponse(
        template.format(message=line),
        status_code=status,
        headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
    )


class AdminAuth:
    """Admin credentials (``ui.admin``), signed session cookies and the ``/admin`` login routes."""

    def __init__(
        self,
        credentials: tuple[str, str] | None,
        session_hours: float = default_of(AdminSettings, "session_hours"),
        clock=time.time,
        throttle: ThrottledLogin | None = None,
        session_key: bytes | None = None,
        scope: str = "",
        cookie_path: str = "/",
        variables: tuple[str, str] = (
            default_of(AdminSettings, "username_env"),
            default_of(AdminSettings, "password_env"),
        ),
    ):
        """``throttle``: the login lockout around :meth:`check_password` (the chat login's policy; built from
        ``limits`` by :meth:`from_settings`, ThrottledLogin's defaults without it). ``scope``: the knowledge base
        this admin may edit, among several (its cookie has its own name and signature, sent under ``cookie_path``
        only), so an admin of one is refused by another even with the same session key. ``variables``: the
        environment variables that hold the credentials (named on the login page while they are unset)."""
        self.credentials = credentials
        self.variables = variables
        self.scope = scope
        self.cookie = f"{COOKIE}_{scope}" if scope else COOKIE
        self.cookie_path = cookie_path
        self.lifetime = int(session_hours * 3600)
        self.clock = clock
        # one key on every replica (ui.admin.session_key_env) keeps a login valid on all of them
        self._key = session_key or secrets.token_bytes(32)
        self._revoked: dict[str, int] = {}  # session -> expiry of cookies logged out before they expire
        self._revoked_lock = threading.Lock()
        # with limits.backend: postgres, logouts are also rows every replica reads (bot/serving/shared_limits.py)
        self.shared_logouts: RateStore | None = None
        self.throttle = throttle or ThrottledLogin(self.check_password)

    @classmethod
    def from_settings(cls, settings: Settings, scope: str = "", cookie_path: str = "/") -> AdminAuth:
        """From ``ui.admin``: the credentials are read from its environment variables now; logins are throttled
        as the chat login is (``limits.login_failures``, ``limits.login_lockout_seconds``)."""
        cfg = settings.ui.admin
        admin = cls(
            cfg.credentials(),
            cfg.session_hours,
            session_key=cfg.session_key(),
            scope=scope,
            cookie_path=cookie_path,
            variables=(cfg.username_env, cfg.password_env),
        )
        admin.throttle = login_throttle(admin.check_password, settings)
        admin.shared_logouts = shared_store(settings)
        return admin

    @property
    def enabled(self) -> bool:
        """True when admin credentials are configured (otherwise the admin tabs are off)."""
        return self.credentials is not None

    def check_password(self, username: str, password: str) -> bool:
        """True for the configured admin's username and password (constant-time comparisons)."""
        if self.credentials is None:
            return False
        user_ok = hmac.compare_digest(username.encode(), self.credentials[0].encode())
        return hmac.compare_digest(password.encode(), self.credentials[1].encode()) and user_ok

    def _sign(self, expires: int, session: str) -> str:
        user = self.credentials[0] if self.credentials else ""
        scoped = f"{self.scope}\n" if self.scope else ""  # the default's cookies stay valid across this change
        message = f"{scoped}{user}\n{expires}\n{session}"
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def token(self) -> str:
        """A fresh admin session cookie value (valid for ``session_hours``, or until logged out)."""
        expires = int(self.clock()) + self.lifetime
        session = secrets.token_hex(8)  # each login its own session: a logout ends that one only
        return f"{expires}.{session}.{self._sign(expires, session)}"

    def valid(self, token: str | None) -> bool:
        """True for an unexpired, not logged out cookie value this app signed."""
        if not self.enabled or not token:
            return False
        expires, session, signature = (token.split(".") + ["", ""])[:3]
        if not expires.isdigit() or int(expires) < self.clock() or not session:
            return False
        if not hmac.compare_digest(signature, self._sign(int(expires), session)) or session in self._revoked:
            return False
        # Shared logouts: when the database cannot say, the logouts this replica saw still hold (the chat and the
        # knowledge tabs keep working with the database down, as the limits do).
        return self.shared_logouts is None or not self.shared_logouts.revoked(session)

    def revoke(self, token: str | None) -> None:
        """End the session of the cookie value ``token`` now (logout): a copy of it is refused from here on."""
        if not self.valid(token):
            return
        assert token is not None  # valid() is false for None
        expires, session, _ = token.split(".")
        now = self.clock()
        with self._revoked_lock:  # forget revocations of cookies that expired anyway: the list stays small
            self._revoked = {s: e for s, e in self._revoked.items() if e >= now}
            self._revoked[session] = int(expires)
        if self.shared_logouts is not None:
            self.shared_logouts.revoke(session, int(expires))

    def cookie_of(self, request: Any) -> str | None:
        """This admin's cookie value in a request's Cookie header, or None."""
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(request.headers.get("cookie") or "")
        except Exception:
            return None
        return jar[self.cookie].value if self.cookie in jar else None

    def allows(self, request: Any) -> bool:
        """True when a (Gradio or FastAPI) request carries a valid admin cookie."""
        if request is None:
            return False
        if isinstance(request, list):  # a batch: every request must be an admin's
            return bool(request) and all(self.allows(r) for r in request)
        if not hasattr(request, "headers"):
            return False
        return self.valid(self.cookie_of(request))

    # -- routes ---------------------------------------------------------------
    def router(self) -> APIRouter:
        """``GET/POST /admin/login`` and ``GET /admin/logout`` (``/admin`` redirects to the login)."""
        router = APIRouter(prefix="/admin")
        router.add_api_route("", lambda: RedirectResponse("admin/login", 303), methods=["GET"], include_in_schema=False)
        router.add_api_route("/login", self.login_form, methods=["GET"], include_in_schema=False)
        router.add_api_route("/login", self.login, methods=["POST"], include_in_schema=False)
        router.add_api_route("/logout", self.logout, methods=["GET"], include_in_schema=False)
        return router

    def login_form(self, message: str = "", status: int = 200) -> HTMLResponse:
        """The login page (with an error line when ``message``); while admin is off, a 404 saying how to turn it
        on."""
        if not self.enabled:
            message, status = ADMIN_OFF.format(user=self.variables[0], password=self.variables[1]), 404
        return login_page(LOGIN_PAGE, message, status)

    async def login(self, request: Request) -> Response:
        """Check the posted username and password behind the login lockout; on success set the cookie and go to
        the app. 401 for a wrong password, 429 (saying when to retry) while the username + address is locked."""
        if not self.enabled:
            return self.login_form()
        address = request.client.host if request.client else "unknown"
        form = await request.form()
        username, password = str(form.get("username") or ""), str(form.get("password") or "")
        if not self.throttle.attempt(username, password, address):
            wait = self.throttle.retry_after(username, address)
            if wait > 0:  # locked out, by this failure or earlier ones
                page = self.login_form(locked_message(wait), 429)
                page.headers["Retry-After"] = str(math.ceil(wait))
                return page
            log.warning("admin login refused from %s", address)
            return self.login_form("用户名或密码错误 / Wrong username or password", 401)
        response = RedirectResponse("../", status_code=303)
        response.set_cookie(
            self.cookie,
            self.token(),
            max_age=self.lifetime,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=self.cookie_path,
        )
        return response

    def logout(self, request: Request) -> Response:
        """End the admin session on the server (the cookie is revoked, copies too), forget it, back to the chat."""
        self.revoke(self.cookie_of(request))
        response = RedirectResponse("../", status_code=303)
        response.delete_cookie(self.cookie, path=self.cookie_path)
        return response


class AdminBlocks(gr.Blocks):
    """gr.Blocks whose events registered inside :meth:`admin_only` refuse requests without an admin cookie."""

    def __init__(self, admin: AdminAuth, **kwargs: Any):
        super().__init__(**kwargs)
        self.admin = admin
        self.admin_fns: set[int] = set()
        self.admin_loaders: list[tuple[Callable[[], Any], list[Any]]] = []

    @contextmanager
    def admin_only(self) -> Iterator[None]:
        """Every event (and value loader) registered in this block is for admins only."""
        before = set(self.fns)
        try:
            yield
        finally:
            self.admin_fns |= set(self.fns) - before

    def is_admin_fn(self, block_fn: Any) -> bool:
        """True when ``block_fn`` (a BlockFunction or its index) was registered inside :meth:`admin_only`."""
        if isinstance(block_fn, int):
            return block_fn in self.admin_fns
        return any(self.fns.get(i) is block_fn for i in self.admin_fns)

    async def process_api(
        self, block_fn: Any, inputs: list[Any], state: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """Run an event, unless it is an admin event and the request is not an admin's."""
        if self.is_admin_fn(block_fn) and not self.admin.allows(request):
            raise gr.Error(NOT_ADMIN, visible=False, print_exception=False)
        return await super().process_api(block_fn, inputs, state, request, *args, **kwargs)


def fill_for_admins(fn: Callable[[], Any], outputs: list[Any]) -> None:
    """Fill ``outputs`` with ``fn()`` when an admin's page loads, and for nobody else.

    Admin components must not take a function as their value: Gradio calls it at build time (the result lands
    in ``/config``, served to every visitor) and attaches its load event outside :meth:`AdminBlocks.admin_only`,
    where no cookie is checked. ``fn`` returns one value per output (a bare value for one output).
    """
    demo = Context.root_block
    if not isinstance(demo, AdminBlocks):
        raise RuntimeError("admin components are laid out inside AdminBlocks")
    demo.admin_loaders.append((fn, list(outputs)))


def _filled(loaders: list[tuple[Callable[[], Any], list[Any]]], allowed: bool) -> list[Any]:
    values: list[Any] = []
    for fn, outputs in loaders:
        skip = [gr.skip()] * len(outputs)
        if not allowed:
            values.extend(skip)
            continue
        try:
            result = fn()
        except Exception:  # one broken loader must not keep the admin tabs hidden
            log.exception("admin page loader %s failed", getattr(fn, "__qualname__", fn))
            values.extend(skip)
            continue
        values.extend(result if len(outputs) > 1 else [result])
    return values


def admin_view(demo: AdminBlocks, tabs: list[Any], link: Any) -> None:
    """On page load, show the admin ``tabs`` to admins only, and a login (or logout) link, and fill the admin
    components registered with :func:`fill_for_admins` for admins only (inside the Blocks, after the admin tabs)."""

    admin = demo.admin
    loaders = list(demo.admin_loaders)

    def view(request: gr.Request):
        allowed = admin.allows(request)
        text = (
            "已登录管理员 / Logged in as admin · [退出 / Log out](admin/logout)"
            if allowed
            else "[管理员登录 / Admin login](admin/login)"
        )
        shown = [gr.update(visible=allowed) for _ in tabs]
        updates = (*shown, gr.update(value=text, visible=admin.enabled), *_filled(loaders, allowed))
        # Gradio takes a lone output's value as is: a 1-tuple would fail its postprocess (and log a traceback).
        return updates if len(updates) > 1 else updates[0]

    demo.load(view, None, [*tabs, link, *[o for _, outputs in loaders for o in outputs]], **PRIVATE)
