"""The agent console at ``/agent``: named agents (``handoff.agents``, scrypt hashes) and admins log in, see the open
tickets with their transcripts (the longest waiting first, with how long), claim one, reply, and resolve it.

The login is throttled as the admin's is (a lockout per name + address, a cap per address). The cookie is
``<expiry>.<session>.<name>.<HMAC-SHA256>``, HttpOnly and SameSite=Strict, under the admin's session key when one is
set (shared by replicas) or a key made at start; logging out revokes it (on every replica with ``limits.backend:
postgres``). The JSON routes answer 401 without an agent's (or an admin's) cookie and take only JSON bodies, which a
form on another site cannot send. Everything shown is set as text by the console's script, never as HTML.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import math
import secrets
import threading
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from bot.config.settings import HandoffSettings, Settings, default_of
from bot.errors import BotError
from bot.handoff.desk import Desk
from bot.handoff.passwords import check_account
from bot.handoff.store import UnknownTicket
from bot.handoff.tickets import Status, Ticket
from bot.serving.logins import ThrottledLogin, locked_message
from bot.serving.ratelimit import shared_store
from bot.serving.shared_logins import login_throttle
from bot.ui.admin import LOGIN_PAGE, AdminAuth, login_page

if TYPE_CHECKING:
    from bot.serving.shared_limits import RateStore

log = logging.getLogger(__name__)

COOKIE = "kbbot_agent"
NOT_AGENT = "需要坐席登录 / Agent login required"
MAX_BODY_BYTES = 16_000
AGENT_LOGIN_PAGE = LOGIN_PAGE.replace("管理员登录 / Admin login", "坐席登录 / Agent login")


def _b64(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii").rstrip("=")


def _unb64(text: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


class AgentAuth:
    """The agents' accounts (name -> scrypt hash), their signed session cookies, and admins counted as agents."""

    cookie = COOKIE  # the session cookie's name (another role of named accounts keeps its own)
    purpose = b"kbbot agent session\n"  # what the signing key is derived for: one role's cookie is not another's

    def __init__(
        self,
        accounts: dict[str, str],
        admin: AdminAuth | None = None,
        session_hours: float = default_of(HandoffSettings, "agent_session_hours"),
        session_key: bytes | None = None,
        clock=time.time,
    ):
        self.accounts = dict(accounts)
        self.admin = admin
        self.lifetime = int(session_hours * 3600)
        self.clock = clock
        self._key = hashlib.sha256(self.purpose + (session_key or secrets.token_bytes(32))).digest()
        self._revoked: dict[str, int] = {}
        self._lock = threading.Lock()
        self.shared_logouts: RateStore | None = None
        self.throttle = ThrottledLogin(self.check_password)

    @classmethod
    def from_settings(cls, settings: Settings, admin: AdminAuth | None) -> AgentAuth:
        """From ``handoff.agents`` (and the admin, who is an agent too), throttled as the admin login is."""
        h = settings.handoff
        auth = cls(
            {a.name: a.password_hash for a in h.agents},
            admin,
            h.agent_session_hours,
            session_key=settings.ui.admin.session_key(),
        )
        auth.throttle = login_throttle(auth.check_password, settings)
        auth.shared_logouts = shared_store(settings)
        return auth

    @property
    def enabled(self) -> bool:
        """True when someone can log in (agents listed, or an admin configured)."""
        return bool(self.accounts) or (self.admin is not None and self.admin.enabled)

    def check_password(self, name: str, password: str) -> bool:
        """True for a listed agent's password, or the admin's credentials."""
        if self.admin is not None and self.admin.enabled and self.admin.check_password(name, password):
            return True
        return check_account(self.accounts, name, password)

    def _sign(self, expires: int, session: str, name: str) -> str:
        return hmac.new(self._key, f"{name}\n{expires}\n{session}".encode(), hashlib.sha256).hexdigest()

    def token(self, name: str) -> str:
        """A fresh session cookie value for agent ``name``."""
        expires, session = int(self.clock()) + self.lifetime, secrets.token_hex(8)
        return f"{expires}.{session}.{_b64(name)}.{self._sign(expires, session, name)}"

    def name_of(self, token: str | None) -> str | None:
        """The agent a valid, unexpired, not logged-out cookie value names; None otherwise."""
        parts = (token or "").split(".")
        if len(parts) != 4 or not parts[0].isdigit() or int(parts[0]) < self.clock():
            return None
        expires, session, encoded, signature = int(parts[0]), parts[1], parts[2], parts[3]
        name = _unb64(encoded)
        if name is None or not hmac.compare_digest(signature, self._sign(expires, session, name)):
            return None
        if session in self._revoked or (self.shared_logouts is not None and self.shared_logouts.revoked(session)):
            return None
        return name

    def agent(self, request: Any) -> str | None:
        """The agent making ``request``: by the agent cookie, else an admin by the admin cookie; None: nobody."""
        name = self.name_of(request.cookies.get(self.cookie))
        if name is not None:
            return name
        if self.admin is not None and self.admin.allows(request) and self.admin.credentials is not None:
            return self.admin.credentials[0]
        return None

    def revoke(self, token: str | None) -> None:
        """Log the cookie value ``token`` out (copies of it stop working)."""
        if self.name_of(token) is None:
            return
        assert token is not None
        expires, session = int(token.split(".")[0]), token.split(".")[1]
        now = self.clock()
        with self._lock:
            self._revoked = {s: e for s, e in self._revoked.items() if e >= now}
            self._revoked[session] = expires
        if self.shared_logouts is not None:
            self.shared_logouts.revoke(session, expires)


def console_file(name: str) -> str:
    """A file of the console (bot/ui/static/)."""
    return resources.files("bot.ui").joinpath(f"static/{name}").read_text(encoding="utf-8")


def waited(ticket: Ticket, now: float) -> int:
    """Seconds the visitor has waited: since the ticket opened (open), or since their last message (claimed)."""
    from datetime import datetime

    since = ticket.created if ticket.status is Status.OPEN else ticket.activity
    return max(0, int(now - datetime.fromisoformat(since).timestamp()))


class AgentConsole:
    """The console's routes over one desk (the default knowledge base's)."""

    def __init__(self, desk: Desk, auth: AgentAuth):
        self.desk = desk
        self.auth = auth

    def router(self) -> APIRouter:
        """``/agent`` (the page), its login and logout, its script, and the JSON routes under ``/agent/api``."""
        router = APIRouter(prefix="/agent")
        for path, handler, methods in (
            ("", self.page, ["GET"]),
            ("/login", self.login_form, ["GET"]),
            ("/login", self.login, ["POST"]),
            ("/logout", self.logout, ["GET"]),
            ("/console.js", self.script, ["GET"]),
            ("/api/tickets", self.tickets, ["GET"]),
            ("/api/tickets/{ticket_id:int}", self.ticket, ["GET"]),
            ("/api/tickets/{ticket_id:int}/claim", self.claim, ["POST"]),
            ("/api/tickets/{ticket_id:int}/reply", self.reply, ["POST"]),
            ("/api/tickets/{ticket_id:int}/resolve", self.resolve, ["POST"]),
        ):
            router.add_api_route(path, handler, methods=methods, include_in_schema=False)
        return router

    # -- pages ----------------------------------------------------------------------
    async def page(self, request: Request) -> Response:
        """The console, or the login form for anyone who is not an agent."""
        name = await run_in_threadpool(self.auth.agent, request)
        if name is None:
            return RedirectResponse("agent/login", status_code=303)
        return HTMLResponse(
            console_file("agent.html"), headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"}
        )

    async def script(self, request: Request) -> Response:
        """The console's script (no data in it: what it shows comes from the JSON routes)."""
        return Response(console_file("agent.js"), media_type="text/javascript; charset=utf-8")

    def login_form(self, message: str = "", status: int = 200) -> HTMLResponse:
        """The login form (with an error line when ``message``)."""

        if not self.auth.enabled:
            message = message or (
                "坐席控制台未启用：请在 handoff.agents 中添加坐席，或设置管理员账号。"
                "/ The console is off: list agents in handoff.agents or set the admin variables."
            )
        return login_page(AGENT_LOGIN_PAGE, message, status)

    async def login(self, request: Request) -> Response:
        """Check the name and password behind the lockout; on success set the cookie and open the console."""
        address = request.client.host if request.client else "unknown"
        form = await request.form()
        name, password = str(form.get("username") or ""), str(form.get("password") or "")
        ok = await run_in_threadpool(self.auth.throttle.attempt, name, password, address)
        if not ok:
            wait = self.auth.throttle.retry_after(name, address)
            if wait > 0:
                page = self.login_form(locked_message(wait), 429)
                page.headers["Retry-After"] = str(math.ceil(wait))
                return page
            log.warning("agent login refused from %s", address)
            return self.login_form("用户名或密码错误 / Wrong username or password", 401)
        response = RedirectResponse("../agent", status_code=303)
        response.set_cookie(
            COOKIE,
            self.auth.token(name),
            max_age=self.auth.lifetime,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def logout(self, request: Request) -> Response:
        """End the agent's session on the server and forget the cookie."""
        self.auth.revoke(request.cookies.get(COOKIE))
        response = RedirectResponse("login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- JSON -------------------------------------------------------------------------
    async def _agent(self, request: Request) -> str:
        name = await run_in_threadpool(self.auth.agent, request)
        if name is None:
            raise _Refused(401, NOT_AGENT)
        return name

    async def _json(self, request: Request) -> dict[str, Any]:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise _Refused(415, "需要 JSON 请求体 / A JSON body is required")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(413, f"请求体过大 / The body exceeds {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise _Refused(400, "请求体不是有效的 JSON / The body is not valid JSON") from None
        if not isinstance(data, dict):
            raise _Refused(400, "请求体必须是 JSON 对象 / The body must be a JSON object")
        return data

    async def _run(self, request: Request, action, *, body: bool = False) -> Response:
        """Run ``action(agent, data)`` in the threadpool as the request's agent; refusals and desk errors as JSON.
        A change (``body``) takes only a JSON body: a form on another site cannot send one."""
        try:
            agent = await self._agent(request)
            data = await self._json(request) if body else {}
            result = await run_in_threadpool(action, agent, data)
        except _Refused as refused:
            return JSONResponse({"error": refused.message}, status_code=refused.status)
        except UnknownTicket as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except BotError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse(result, headers={"Cache-Control": "no-store"})

    async def tickets(self, request: Request) -> Response:
        """``GET /agent/api/tickets?status=open``: tickets with their wait, the agent's name, and notices that
        failed (``problems``)."""
        wanted = request.query_params.get("status", "open")

        def listing(agent: str, _: dict) -> dict[str, Any]:
            status = None if wanted == "all" else Status(wanted) if wanted in Status._value2member_map_ else None
            if wanted != "all" and status is None:
                raise _Refused(400, f"status must be one of: all, {', '.join(s.value for s in Status)}")
            now = time.time()
            return {
                "agent": agent,
                "tickets": [{**t.to_dict(), "waited": waited(t, now)} for t in self.desk.queue(status)],
                "problems": [
                    {"channel": p.channel, "ticket": p.ticket, "attempts": p.attempts, "error": p.error, "due": p.due}
                    for p in self.desk.problems()
                ],
            }

        return await self._run(request, listing)

    async def ticket(self, request: Request) -> Response:
        """``GET /agent/api/tickets/{id}``: the ticket, its transcript and the messages after it."""
        ticket_id = int(request.path_params["ticket_id"])

        def one(agent: str, _: dict) -> dict[str, Any]:
            ticket, messages = self.desk.ticket(ticket_id)
            return {
                **ticket.to_dict(),
                "waited": waited(ticket, time.time()),
                "messages": [m.to_dict() for m in messages],
            }

        return await self._run(request, one)

    async def claim(self, request: Request) -> Response:
        """``POST …/claim``: ``{"won": true}``, or false with who holds it (409)."""
        ticket_id = int(request.path_params["ticket_id"])

        def take(agent: str, _: dict) -> dict[str, Any]:
            claim = self.desk.claim(ticket_id, agent)
            if not claim.won:
                holder = claim.ticket.agent if claim.ticket.status is Status.CLAIMED else claim.ticket.status.value
                raise BotError(f"已被 {holder} 接待 / Already taken: {holder}")
            return {"won": True, "ticket": claim.ticket.to_dict()}

        return await self._run(request, take, body=True)

    async def reply(self, request: Request) -> Response:
        """``POST …/reply`` ``{"text"}``: the message as stored (409 unless this agent holds the ticket)."""
        ticket_id = int(request.path_params["ticket_id"])

        def send(agent: str, data: dict) -> dict[str, Any]:
            text = data.get("text")
            if not isinstance(text, str):
                raise _Refused(400, "text 必须是字符串 / 'text' must be a string")
            return self.desk.reply(ticket_id, agent, text).to_dict()

        return await self._run(request, send, body=True)

    async def resolve(self, request: Request) -> Response:
        """``POST …/resolve``: the closed ticket (the visitor is told the bot answers again)."""
        ticket_id = int(request.path_params["ticket_id"])
        return await self._run(request, lambda agent, _: self.desk.resolve(ticket_id, agent).to_dict(), body=True)


class _Refused(Exception):
    """A request the console refuses: an HTTP status and a bilingual message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def agent_console(desk: Desk, settings: Settings, admin: AdminAuth | None) -> AgentConsole:
    """The console over ``desk`` for the agents of ``settings`` and the admin ``admin``."""
    return AgentConsole(desk, AgentAuth.from_settings(settings, admin))
