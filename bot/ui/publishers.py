"""The publisher role (``knowledge.require_approval``): named publishers and their login.

Publishers (``knowledge.publishers``, scrypt hashes) log in at ``/publisher/login`` as agents do at
``/agent/login``; with approval required, the knowledge tab publishes (a draft, a change to a published entry, a
deletion, an import) only for a request that carries a publisher's cookie as well as the admin's. Admins are not
publishers unless listed.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from bot.config.settings import Settings
from bot.serving.logins import locked_message
from bot.serving.ratelimit import shared_store
from bot.serving.shared_logins import login_throttle
from bot.ui.admin import LOGIN_PAGE, login_page
from bot.ui.agents import AgentAuth

log = logging.getLogger(__name__)

PUBLISHER_LOGIN_PAGE = LOGIN_PAGE.replace("管理员登录 / Admin login", "发布者登录 / Publisher login")


class PublisherAuth(AgentAuth):
    """The publishers' accounts and their signed session cookies (no admin counts as one)."""

    cookie = "kbbot_publisher"
    purpose = b"kbbot publisher session\n"

    @classmethod
    def publishers(cls, settings: Settings) -> PublisherAuth:
        """From ``knowledge.publishers``, throttled as the admin login is."""
        auth = cls(
            {p.name: p.password_hash for p in settings.knowledge.publishers},
            None,
            settings.ui.admin.session_hours,
            session_key=settings.ui.admin.session_key(),
        )
        auth.throttle = login_throttle(auth.check_password, settings)
        auth.shared_logouts = shared_store(settings)
        return auth

    def publisher(self, request: Any) -> str | None:
        """The publisher making ``request`` (a Gradio or FastAPI request), or None."""
        cookies = getattr(request, "cookies", None) or {}
        return self.name_of(cookies.get(self.cookie))

    def router(self) -> APIRouter:
        """``/publisher/login`` (GET, POST) and ``/publisher/logout``."""
        router = APIRouter(prefix="/publisher")
        router.add_api_route("/login", self.login_form, methods=["GET"], include_in_schema=False)
        router.add_api_route("/login", self.login, methods=["POST"], include_in_schema=False)
        router.add_api_route("/logout", self.logout, methods=["GET"], include_in_schema=False)
        return router

    def login_form(self, message: str = "", status: int = 200) -> HTMLResponse:
        """The login form (with an error line when ``message``)."""
        return login_page(PUBLISHER_LOGIN_PAGE, message, status)

    async def login(self, request: Request) -> Response:
        """Check the name and password behind the lockout; on success set the cookie and go to the app."""
        address = request.client.host if request.client else "unknown"
        form = await request.form()
        name, password = str(form.get("username") or ""), str(form.get("password") or "")
        if not await run_in_threadpool(self.throttle.attempt, name, password, address):
            wait = self.throttle.retry_after(name, address)
            if wait > 0:
                page = self.login_form(locked_message(wait), 429)
                page.headers["Retry-After"] = str(math.ceil(wait))
                return page
            log.warning("publisher login refused from %s", address)
            return self.login_form("用户名或密码错误 / Wrong username or password", 401)
        response = RedirectResponse("../", status_code=303)
        response.set_cookie(
            self.cookie,
            self.token(name),
            max_age=self.lifetime,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def logout(self, request: Request) -> Response:
        """End the publisher's session on the server and forget the cookie."""
        self.revoke(request.cookies.get(self.cookie))
        response = RedirectResponse("../", status_code=303)
        response.delete_cookie(self.cookie, path="/")
        return response
