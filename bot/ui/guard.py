"""Guards of the served app: text that cannot reach out, limits per client address, throttled logins, upload caps.

- ``safe_markdown``: what the chat shows is escaped HTML with markdown images neutralised, so an answer or entry
  holding ``![x](http://host/track)`` or ``<img src=...>`` never makes a viewer's browser fetch anything.
- ``ClientLimits`` / ``limited``: per-minute limits keyed by the client's address (not its browser session, which a
  script renews at will) for chat, the retrieval test, knowledge writes and uploads.
- ``GuardMiddleware``: a Content-Security-Policy on every response (images only from this server), a cap on every
  request body (``BodyCaps``), the upload rate, and the client address for the login check.
- ``login_auth``: Gradio's login check, throttled by ``bot.serving.logins.ThrottledLogin`` (shared with the admin
  login and the API's token check).
"""

from __future__ import annotations

import html
import inspect
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
from starlette.types import Message, Receive, Scope, Send

from bot.config.serving import LimitSettings
from bot.config.settings import Settings
from bot.serving.logins import CLIENT_ADDRESS, ThrottledLogin, credentials_check
from bot.serving.ratelimit import RateLimiter, SlidingWindowLimiter, chat_per_minute, rate_limiter
from bot.serving.shared_logins import login_throttle
from bot.texts import BODY_TOO_LARGE, TOO_MANY, UPLOAD_GONE, UPLOADS_ADMIN_ONLY, UPLOADS_LIMITED

log = logging.getLogger(__name__)

# Images, media and plugins only from this server (data:/blob: for Gradio's own icons and previews).
CSP = "img-src 'self' data: blob:; media-src 'self' data: blob:; object-src 'none'; base-uri 'self'"


def safe_markdown(text: str) -> str:
    """``text`` for a markdown view: HTML escaped, and ``![`` written ``!&#91;`` so no markdown image is formed.

    ``html.unescape`` gives the original text back (the chat history is read back that way).
    """
    return html.escape(text or "", quote=False).replace("![", "!&#91;")


def client_key(request: Any) -> str:
    """The rate-limit key of a Gradio (or Starlette) request: its client address, ``addr:unknown`` without one."""
    client = getattr(request, "client", None)
    host = getattr(client, "host", None)
    return f"addr:{host or 'unknown'}"


class ClientLimits:
    """The browser app's per-address limits, from ``limits:`` (and the deprecated ``ui.rate_limit_per_minute``)."""

    def __init__(self, settings: Settings):
        per = settings.limits
        self.chat = rate_limiter(settings, "web-chat", chat_per_minute(settings))
        self.retrieval = rate_limiter(settings, "web-retrieval-test", per.retrieval_test_per_minute)
        self.writes = rate_limiter(settings, "web-writes", per.writes_per_minute)
        self.typeahead = rate_limiter(settings, "web-typeahead", per.typeahead_per_minute)


def limited(
    fn: Callable[..., Any], limiter: RateLimiter, refuse: Callable[[str], Any], discard_upload: bool = False
) -> Callable[..., Any]:
    """``fn`` as a Gradio callback that first counts one event for the caller's address; beyond the limit it returns
    ``refuse(message)``. With ``discard_upload`` its first argument, an uploaded file, is deleted afterwards."""
    params = list(inspect.signature(fn).parameters.values())
    wants_request = bool(params) and params[-1].name == "request"  # ``fn`` is handed the request too
    params = params[:-1] if wants_request else params
    count = len(params)

    def callback(*args: Any) -> Any:
        request = args[count] if len(args) > count else None
        upload = args[0] if discard_upload and args else None
        try:
            if not limiter.allow(client_key(request)):
                return refuse(TOO_MANY)
            if upload and isinstance(upload, (str, os.PathLike)) and not Path(upload).exists():
                return refuse(UPLOAD_GONE)
            return fn(*args[:count], request) if wants_request else fn(*args[:count])
        finally:
            discard_uploaded_file(upload)

    callback.__name__ = getattr(fn, "__name__", "callback")
    callback.__doc__ = fn.__doc__
    # Gradio passes gr.Request to a positional parameter annotated with it.
    callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*params, inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    )
    callback.__annotations__ = {"request": gr.Request}
    return callback


def write_guard(limits: ClientLimits | None) -> Callable[..., Callable[..., Any]]:
    """``guard(fn, outputs, discard_upload=False)`` for the knowledge tab's writing callbacks: ``fn`` limited by
    ``limits.writes`` per address (unlimited without ``limits``); a refusal fills the first of ``outputs`` outputs
    with the message and skips the rest."""
    limiter = limits.writes if limits is not None else SlidingWindowLimiter(0)

    def guard(fn: Callable[..., Any], outputs: int, discard_upload: bool = False) -> Callable[..., Any]:
        def refuse(message: str) -> tuple:
            return (f"<div class='kb-notice'>❌ {html.escape(message)}</div>",) + (gr.skip(),) * (outputs - 1)

        return limited(fn, limiter, refuse, discard_upload)

    return guard


def upload_folder() -> Path:
    """Where Gradio stores uploaded files (``GRADIO_TEMP_DIR``, else the system temp folder's ``gradio``)."""
    from gradio.utils import get_upload_folder

    return Path(get_upload_folder()).resolve()


def discard_uploaded_file(path: Any) -> None:
    """Delete an uploaded file (and its now empty folder) when it lies in Gradio's upload folder; else nothing."""
    if not path or not isinstance(path, (str, os.PathLike)):
        return
    file = Path(path).resolve()
    root = upload_folder()
    if root not in file.parents:
        return
    file.unlink(missing_ok=True)
    folder = file.parent
    if folder != root:
        try:
            folder.rmdir()
        except OSError:  # not empty (another upload), or already gone
            pass


def use_own_upload_folder(settings: Settings) -> Path:
    """Point Gradio's uploads at ``state_dir/uploads`` (unless GRADIO_TEMP_DIR is set) and empty it: nothing a
    previous run received stays on disk. Call before the app is launched."""
    if os.environ.get("GRADIO_TEMP_DIR"):
        return Path(os.environ["GRADIO_TEMP_DIR"])
    folder = settings.resolve(settings.state_dir) / "uploads"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["GRADIO_TEMP_DIR"] = str(folder)
    return folder


MB = 1024 * 1024
# A multipart upload carries its boundaries and part headers around the file.
UPLOAD_FORM_BYTES = 64 * 1024


def is_upload(path: str) -> bool:
    """True for Gradio's upload route (``/gradio_api/upload``, also under a mounted page's path)."""
    return path.rstrip("/").endswith("/upload")


@dataclass(frozen=True)
class BodyCaps:
    """The most bytes a request body may carry: an upload, and any other request."""

    upload: int
    other: int

    @classmethod
    def from_limits(cls, limits: LimitSettings) -> BodyCaps:
        """The caps of ``limits.max_upload_mb`` (plus the form around the file) and ``limits.max_body_kb``."""
        return cls(upload=int(limits.max_upload_mb * MB) + UPLOAD_FORM_BYTES, other=limits.max_body_kb * 1024)

    def limit(self, path: str) -> int:
        """The cap of a request to ``path``."""
        return self.upload if is_upload(path) else self.other


class CappedExchange:
    """One request's receive and send, with its body counted: past ``limit`` bytes the client gets 413 and the app
    a disconnect, so nobody buffers the rest; the CSP header goes on every response, and "Connection: close" on one
    answered before its request's body was read."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit: int, csp: bytes):
        self.scope = scope
        self._receive = receive
        self._send = send
        self.limit = limit
        self.csp = csp
        self.received = 0
        self.started = False
        self.refused = False
        self.body_pending = has_body(scope)

    async def receive(self) -> Message:
        """The next ASGI message of the request; a disconnect once the body passed the cap."""
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.body_pending = bool(message.get("more_body", False))
            if self.received > self.limit:
                await self.refuse()
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: Message) -> None:
        """Send one ASGI message with the CSP header; nothing after the 413 of a refused body."""
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-security-policy"]
            headers.append((b"content-security-policy", self.csp))
            if self.body_pending:
                # An answer before the body was read (a refusal): the server would read and discard the rest of the
                # body, however large, to keep the connection; closed, it reads no more.
                headers = [(k, v) for k, v in headers if k.lower() != b"connection"] + [(b"connection", b"close")]
            message = {**message, "headers": headers}
        await self._send(message)

    async def refuse(self) -> None:
        """Answer 413 (unless a response has begun) and stop passing anything on."""
        from starlette.responses import JSONResponse

        log.info(
            "request body to %s over %d bytes refused from %s",
            str(self.scope.get("path", ""))[:200],
            self.limit,
            (self.scope.get("client") or ("unknown", 0))[0],
        )
        if not self.started:
            # In the OpenAI error shape the API's clients read (its own cap answers the same way); any client can
            # show the message.
            error = {"message": BODY_TOO_LARGE.format(limit=self.limit), "type": "invalid_request_error"}
            too_large = JSONResponse(
                {"error": {**error, "param": None, "code": "request_too_large"}},
                status_code=413,
                headers={"Connection": "close"},
            )
            await too_large(self.scope, self._receive, self.send)
        self.refused = True


class GuardMiddleware:
    """ASGI middleware: the CSP header on every response, the body cap of every request, the upload rate per
    address, the client address for the login check (``CLIENT_ADDRESS``)."""

    def __init__(
        self,
        app: Any,
        uploads: RateLimiter | None = None,
        csp: str = CSP,
        may_upload: Callable[[Any], bool] | None = None,
        caps: BodyCaps | None = None,
    ):
        """``may_upload(request)``: whether a request may upload at all (the admin check); None: anyone may.
        ``caps``: the request body caps (the defaults of ``limits``)."""
        self.app = app
        self.uploads = uploads
        self.csp = csp.encode("latin-1")
        self.may_upload = may_upload
        self.caps = caps or BodyCaps.from_limits(LimitSettings())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = (scope.get("client") or ("unknown", 0))[0]
        token = CLIENT_ADDRESS.set(host)
        exchange = CappedExchange(scope, receive, send, self.caps.limit(scope.get("path", "")), self.csp)
        try:
            refused = self._upload_refused(scope, host)
            if refused is not None:
                await refused(scope, receive, exchange.send)
                return
            if declared_length(scope) > exchange.limit:
                await exchange.refuse()
                return
            try:
                await self.app(scope, exchange.receive, exchange.send)
            except Exception:
                # The app may fail on the disconnect it was handed; the client has its 413 already.
                if not exchange.refused:
                    raise
        finally:
            CLIENT_ADDRESS.reset(token)

    def _upload_refused(self, scope: Scope, host: str) -> Any:
        """The response refusing an upload (403 for anyone but an admin, 429 over the rate), or None."""
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse

        if scope.get("method") != "POST" or not is_upload(scope.get("path", "")):
            return None
        if self.may_upload is not None and not self.may_upload(Request(scope)):
            return PlainTextResponse(UPLOADS_ADMIN_ONLY, status_code=403)
        if self.uploads is not None and not self.uploads.allow(f"addr:{host}"):
            return PlainTextResponse(UPLOADS_LIMITED, status_code=429)
        return None


def has_body(scope: Scope) -> bool:
    """True when the request says a body follows (a Content-Length above 0, or chunked)."""
    chunked = any(k.lower() == b"transfer-encoding" and b"chunked" in v.lower() for k, v in scope.get("headers", []))
    return chunked or declared_length(scope) > 0


def declared_length(scope: Scope) -> int:
    """The request's Content-Length (0 when absent or unreadable: the body is then counted as it arrives)."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def login_auth(auth: Any, settings: Settings) -> Any:
    """Gradio's ``auth`` argument throttled: a (username, password) pair or a check callable; None stays None."""
    if auth is None or isinstance(auth, ThrottledLogin):
        return auth
    if isinstance(auth, (tuple, list)) and len(auth) == 2 and all(isinstance(a, str) for a in auth):
        check = credentials_check(*auth)
    elif isinstance(auth, (tuple, list)):  # a list of (username, password) pairs
        checks = [credentials_check(u, p) for u, p in auth]

        def check(user: str, password: str) -> bool:
            results = [c(user, password) for c in checks]  # every pair is compared: no early exit
            return any(results)
    elif callable(auth):
        check = auth
    else:
        return auth
    return login_throttle(check, settings)


class ServerGuard:
    """What app.serve adds to Gradio's launch for one app: middleware, the body and upload caps, a throttled login."""

    def __init__(self, settings: Settings, may_upload: Callable[[Any], bool] | None = None):
        """``may_upload(request)``: who may upload (the admin check; only admins import knowledge files)."""
        self.settings = settings
        self.may_upload = may_upload
        # Uploads reach Gradio's /upload route before any callback: they are checked and counted there.
        self.uploads = rate_limiter(settings, "web-uploads", settings.limits.writes_per_minute)

    def launch_options(self, launch: dict[str, Any]) -> dict[str, Any]:
        """``launch`` (Gradio launch keyword arguments) with the guard's middleware, size cap and login added."""
        from starlette.middleware import Middleware

        out = dict(launch)
        app_kwargs = dict(out.get("app_kwargs") or {})
        app_kwargs["middleware"] = [
            *app_kwargs.get("middleware", []),
            Middleware(
                GuardMiddleware,
                uploads=self.uploads,
                may_upload=self.may_upload,
                caps=BodyCaps.from_limits(self.settings.limits),
            ),
        ]
        out["app_kwargs"] = app_kwargs
        # uvicorn (started by Gradio, no option for it) trusts X-Forwarded-For from FORWARDED_ALLOW_IPS, by default
        # loopback: any local client could then pick its address and escape every per-address limit.
        os.environ["FORWARDED_ALLOW_IPS"] = ",".join(self.settings.limits.trusted_proxies)
        out.setdefault("max_file_size", int(self.settings.limits.max_upload_mb * 1024 * 1024))
        if out.get("auth") is not None:
            out["auth"] = login_auth(out["auth"], self.settings)
        return out
