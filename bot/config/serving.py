"""Settings of the front ends: the browser app, its logins, the HTTP API, the widget, and the limits on input."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Strict
from bot.config.secrets import env_secret
from bot.errors import ConfigError

MIN_SESSION_KEY_CHARS = 32


class AuthSettings(Strict):
    """Optional login for the browser app; the credentials come only from the environment."""

    enabled: bool = False
    """Ask for a login before the chat."""
    username_env: str = "KBBOT_USERNAME"
    """The environment variable holding the user name."""
    password_env: str = "KBBOT_PASSWORD"
    """The environment variable holding the password."""

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) when login is enabled; raises ConfigError naming missing variables."""
        if not self.enabled:
            return None
        user, password = env_secret(self.username_env, strip=False), env_secret(self.password_env, strip=False)
        if not user or not password:
            raise ConfigError(
                f"ui.auth.enabled is true but {self.username_env} and/or {self.password_env} "
                "are not set in the environment; set both or disable ui.auth"
            )
        return user, password


class AdminSettings(Strict):
    """The admin login at /admin/login (knowledge, unanswered inbox and conversation log tabs); the credentials come
    only from the environment. While either variable is unset the tabs are off and the chat works as before."""

    username_env: str = "KBBOT_ADMIN_USER"
    """The environment variable holding the admin user name."""
    password_env: str = "KBBOT_ADMIN_PASSWORD"
    """The environment variable holding the admin password."""
    session_hours: float = Field(default=12, gt=0)
    """How long an admin login lasts (hours); a restart of the app also logs admins out unless ``session_key_env``
    is set."""
    session_key_env: str = "KBBOT_SESSION_KEY"
    """The environment variable holding the secret (32 characters or more) that signs admin session cookies: the
    same one on every replica keeps an admin logged in whichever replica answers, and across restarts. Unset: a
    random key per process."""

    def session_key(self) -> bytes | None:
        """The cookie-signing key from ``session_key_env`` (None when unset); a ConfigError when it is too short."""
        secret = env_secret(self.session_key_env)
        if not secret:
            return None
        if len(secret) < MIN_SESSION_KEY_CHARS:
            raise ConfigError(
                f"the environment variable {self.session_key_env} holds a session key shorter than "
                f"{MIN_SESSION_KEY_CHARS} characters; use e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`"
            )
        return hashlib.sha256(b"kbbot admin session\n" + secret.encode()).digest()

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) when both variables are set, else None: the admin tabs are off."""
        user, password = env_secret(self.username_env, strip=False), env_secret(self.password_env, strip=False)
        return (user, password) if user and password else None


class UISettings(Strict):
    """The browser app."""

    title: str = "知识库问答 / Knowledge-base chat"
    """The page title."""
    host: str = "127.0.0.1"
    """Address to listen on: 127.0.0.1 keeps the app private to this machine (app.py --host 0.0.0.0 exposes it)."""
    port: int = 7860
    """Port to listen on (the HTTP API and the widget share it)."""
    examples: list[str] = Field(default_factory=list)
    """Welcome card questions on a fresh deployment, until the conversation log has most-asked ones (and always with
    ``examples_source: fixed``); only those in the loaded knowledge show."""
    examples_source: Literal["fixed", "popular", "both"] = "both"
    """What the welcome card shows after ``pinned``: ``examples`` only (fixed); the entries most asked lately
    (popular, from the conversation log; without enough turns yet, some of the knowledge's own questions); or the
    most asked ones, and ``examples`` while the log has none (both)."""
    pinned: list[str] = Field(default_factory=list)
    """Questions always shown first on the welcome card (page and widget), in this order; each must be the query
    or one of the ``questions`` of a loaded entry (one a category filter excludes is not shown)."""
    welcome_size: int = Field(default=6, ge=1, le=20)
    """Questions on the welcome card, pinned ones included."""
    welcome_days: int = Field(default=30, ge=1)
    """The most-asked entries of the welcome card are counted over this many last days of the conversation log."""
    welcome_min_count: int = Field(default=3, ge=1)
    """An entry is on the welcome card only when at least this many turns in ``welcome_days`` were answered from it
    (and no more of its rated answers got a 👎 than a 👍)."""
    retrieval_only_label: str = "仅检索模式（未配置 LLM）/ Retrieval-only (no LLM configured)"
    """Shown when no LLM key is set."""
    auth: AuthSettings = Field(default_factory=AuthSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    rate_limit_per_minute: int | None = Field(default=None, ge=0)
    """Deprecated: use ``limits.chat_per_minute``. When set it still wins (now per client address, not per
    session)."""
    concurrency: int = Field(default=16, ge=1)
    """Chat requests handled at once (Gradio queue); more wait in the queue."""


class LimitSettings(Strict):
    """Guards on user input: sizes, rates, logins and log volume."""

    max_message_chars: int = Field(default=2000, ge=10)
    """Longer messages are cut to this many characters, with a notice."""
    max_search_chars: int = Field(default=500, ge=20)
    """Each search reads at most this many characters of the message (or HyDE text): bounded work per message."""
    long_message_chars: int = Field(default=300, ge=10)
    """Messages longer than this (the expensive ones) are answered at most ``long_message_concurrency`` at once;
    short messages never wait for them."""
    long_message_concurrency: int = Field(default=2, ge=1)
    """Long messages answered at once."""
    long_message_wait_seconds: float = Field(default=10.0, ge=0)
    """One more long message waits up to this many seconds, then is asked to try again."""
    max_answer_chars: int = Field(default=8000, ge=100)
    """The LLM's reply is read up to this many characters, then the stream is closed and the answer marked cut."""
    max_step_chars: int = Field(default=2000, ge=100)
    """LLM text the bot reuses (HyDE, multi-query rewrites, grades, follow-up rewrites) is read up to this many
    characters; the rest is never read (an endpoint that ignores max_tokens costs no more)."""
    backend: Literal["memory", "postgres"] = "memory"
    """Where the per-minute, per-session and per-day message limits, the login lockouts, the admins' logouts and the
    WeCom channel's short histories are kept: this process's memory, or the PostgreSQL database of ``log.postgres``
    (every replica behind a load balancer counts against the same limit and lockout, refuses a logged-out admin
    cookie, and knows what a WeCom member said on another replica)."""
    chat_per_minute: int = Field(default=20, ge=0)
    """Chat messages per client address (browser) or API token, per minute; 0 = unlimited. Behind a reverse proxy
    list it in ``trusted_proxies``, or every client has the proxy's address."""
    typeahead_per_minute: int = Field(default=300, ge=0)
    """Type-ahead look-ups per client address per minute, on the page and in the widget (a few per second while
    someone types); 0 = unlimited. Beyond it nothing is offered until the minute passes."""
    retrieval_test_per_minute: int = Field(default=30, ge=0)
    """Retrieval tests (admin) per client address per minute; 0 = unlimited."""
    writes_per_minute: int = Field(default=10, ge=0)
    """Knowledge saves, deletes and imports per minute; file uploads count separately against the same number."""
    max_upload_mb: float = Field(default=5, gt=0)
    """Larger uploads are refused (413); uploaded files are deleted after import and at start."""
    max_body_kb: int = Field(default=1024, ge=64)
    """Any other request body (a chat message with the conversation so far, an API or widget call) larger than this
    is refused (413) as soon as its declared or received size passes it, before the app reads the rest; the API
    and the widget keep their own smaller caps (1 MB, 64 kB)."""
    login_failures: int = Field(default=5, ge=1)
    """This many wrong passwords from one address for one username lock that pair out for
    ``login_lockout_seconds`` (doubling)."""
    login_lockout_seconds: float = Field(default=30, gt=0)
    """The first lockout after ``login_failures`` wrong passwords, in seconds."""
    log_repeats_per_minute: int = Field(default=20, ge=1)
    """Identical log messages (per logger) written per minute; the rest are counted and summarised in one line."""
    max_log_chars: int = Field(default=4000, ge=200)
    """A log record's message and its traceback are each cut to this many characters (a huge bad request's
    echo)."""
    trusted_proxies: list[str] = Field(default_factory=list)
    """Reverse proxies (addresses or networks, e.g. [127.0.0.1] for nginx on this host) whose X-Forwarded-For names
    the client for the per-address limits; from anyone else the header is ignored. Empty: every client is the
    address it connects from."""


class TypeaheadSettings(Strict):
    """Type-ahead (输入联想): as a visitor types, the knowledge's questions that contain the text (or match it after
    the synonym groups) are offered below the input, on the page and in the widget (docs/web-app.md "Type-ahead")."""

    enabled: bool = True
    """Offer questions while the visitor types."""
    suggestions: int = Field(default=5, ge=1, le=10)
    """Questions offered at most (one per entry)."""
    min_chars: int = Field(default=2, ge=1, le=10)
    """Characters typed (spaces and punctuation not counted) before anything is offered."""
    max_chars: int = Field(default=64, ge=2, le=500)
    """Longer input gets no suggestions: it is a pasted question, not one being typed, and the work stays bounded."""


class APISettings(Strict):
    """The OpenAI-compatible HTTP API at /v1, on the browser app's host and port (docs/api.md); the token comes only
    from the environment."""

    enabled: bool = True
    """Serve the API."""
    token_env: str = "KBBOT_API_TOKEN"
    """The environment variable holding the token clients send as "Authorization: Bearer <token>"."""
    require_token: bool = True
    """With the variable unset every API call is refused; false opens the API to anyone who can reach the port
    (only while the variable is unset)."""

    def token(self) -> str | None:
        """The bearer token from the environment variable named by ``token_env``, or None."""
        value = env_secret(self.token_env)
        return value or None


class WidgetSettings(Strict):
    """The embeddable chat widget (docs/widget.md): ``<script src="https://your-host/widget.js" data-token="...">``
    on another site puts a chat bubble there. Off by default."""

    enabled: bool = False
    """Serve the widget."""
    token_env: str = "KBBOT_WIDGET_TOKEN"
    """The environment variable holding the widget token the page's script tag carries (data-token): public by
    nature, it names this widget; read from the environment like every credential, so it is never committed."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Origins (scheme://host[:port]) whose pages may use the widget (others get 403); the app's own origin (its
    demo page /widget/demo) always may."""
    max_messages_per_session: int = Field(default=50, ge=0)
    """Messages per widget session (a page visit); 0 = no limit."""
    max_messages_per_day: int = Field(default=500, ge=0)
    """Messages per client address per day (UTC); 0 = no limit."""
    show_sources: bool = False
    """Show the entries an answer came from under it."""

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        bad = [o for o in value if not re.fullmatch(r"https?://[^/\s]+", o)]
        if bad:
            raise ValueError(f"origins look like https://www.example.org (no path, no trailing slash); got {bad}")
        return value

    def token(self) -> str | None:
        """The widget token from the environment variable named by ``token_env``, or None."""
        return env_secret(self.token_env) or None
