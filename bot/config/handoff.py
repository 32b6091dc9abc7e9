"""Settings of the hand-off to a person: when it is offered, the agents who answer, business hours, and how staff
are told (the webhook, WeCom app messages, e-mail). Secrets (the webhook's signing secret, the SMTP password) are
named here by environment variable and read only from there; agents' passwords are stored as scrypt hashes."""

from __future__ import annotations

import re
from datetime import date, time
from typing import Any

from pydantic import Field, field_validator, model_validator

from bot.config.base import Strict, check_time_zone
from bot.config.secrets import env_secret

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_SPAN = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-4]):([0-5]\d)$")


class HandoffWebhookSettings(Strict):
    """Where a hand-off POSTs the ticket as JSON ({"reason", "ticket", "transcript", "time", "source"}), from the
    persistent outbox, with a timeout and retries; a failure is shown to admins, never to the user. A redirect is
    refused (a 301/302/303 would turn the POST into a GET without the body)."""

    url: str | None = None
    """The webhook URL (http:// or https://); null = none."""
    timeout: float = Field(default=5.0, gt=0)
    """Seconds per attempt."""
    retries: int = Field(default=2, ge=0, le=10)
    """Retries of a failed post within one delivery round (the outbox tries again later after that)."""
    secret_env: str | None = None
    """The environment variable holding the signing secret: the body is signed as X-Kbbot-Signature:
    sha256=<HMAC-SHA256 hex> when it is set."""

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    def secret(self) -> str | None:
        """The signing secret from the environment variable named by ``secret_env``, or None."""
        value = env_secret(self.secret_env)
        return value or None


class EmailSettings(Strict):
    """E-mail to staff for each new ticket, over SMTP (STARTTLS or TLS when the server offers it)."""

    to: list[str] = Field(default_factory=list)
    """Addresses that get a mail for each new ticket (empty: no e-mail)."""
    host: str = ""
    """The SMTP server."""
    port: int = Field(default=587, ge=1, le=65535)
    """Its port (587: submission with STARTTLS, 465: TLS, 25: plain)."""
    security: str = "starttls"
    """starttls, tls or none (none only for a relay on this machine or in tests)."""
    sender: str = ""
    """The From address."""
    username: str = ""
    """The SMTP login (empty: no login)."""
    password_env: str = "KBBOT_SMTP_PASSWORD"
    """The environment variable holding the SMTP password."""
    timeout: float = Field(default=10.0, gt=0)
    """Seconds an SMTP conversation may take."""

    @field_validator("security")
    @classmethod
    def _security(cls, value: str) -> str:
        if value not in ("starttls", "tls", "none"):
            raise ValueError("use starttls, tls or none")
        return value

    @model_validator(mode="after")
    def _complete(self) -> EmailSettings:
        if self.to and not (self.host and self.sender):
            raise ValueError("handoff.notify.email.to needs host and sender")
        return self

    def password(self) -> str:
        """The SMTP password from the environment ("" when unset)."""
        return env_secret(self.password_env, strip=False)


class NotifySettings(Strict):
    """How staff hear of a new ticket besides the agent console: WeCom app messages and e-mail. Notices wait in a
    persistent outbox in the log's database and are retried until they go through (an outage delays, never loses)."""

    wecom_users: list[str] = Field(default_factory=list)
    """WeCom UserIDs of staff who get an app message per new ticket (the ``wecom`` app's credentials send it)."""
    email: EmailSettings = Field(default_factory=EmailSettings)
    retry_seconds: float = Field(default=30.0, gt=0)
    """The wait before a failed notice is tried again, doubled after each failure up to ``max_retry_seconds``."""
    max_retry_seconds: float = Field(default=900.0, gt=0)
    """The longest wait between two attempts."""
    poll_seconds: float = Field(default=2.0, gt=0, le=60)
    """How often the outbox worker looks for notices to send and idle conversations to hand back."""
    lease_seconds: float = Field(default=120.0, gt=0)
    """How long a notice in delivery is not taken by another worker: a worker killed mid-send leaves its notice to
    be sent again after this (at least once); longer than a channel's longest attempt (timeouts, retries)."""


class AgentAccount(Strict):
    """One named agent of the console (/agent): a name and a password hash."""

    name: str
    """Shown to visitors beside the agent's replies ("👤 alice")."""
    password_hash: str
    """``python -m bot handoff hash-password`` prints it (scrypt; the password itself is never stored)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(r"[\w.@-]{1,40}", value):
            raise ValueError("use 1-40 letters, digits, '.', '@', '-' or '_'")
        return value

    @field_validator("password_hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        if not value.startswith("scrypt$") or value.count("$") != 5:
            raise ValueError("not a password hash; make one with `python -m bot handoff hash-password`")
        return value


class HoursSettings(Strict):
    """When people answer: a time zone, a weekly schedule and holidays. Empty schedule: always open."""

    timezone: str = "Asia/Shanghai"
    """An IANA time zone (zoneinfo), e.g. Asia/Shanghai, Europe/Berlin."""
    weekly: dict[str, list[str]] = Field(default_factory=dict)
    """Weekday (mon … sun) -> opening spans "HH:MM-HH:MM" (a day not listed is closed); empty: always open."""
    holidays: list[date] = Field(default_factory=list)
    """Dates (YYYY-MM-DD) closed all day."""

    _zone = field_validator("timezone")(staticmethod(check_time_zone))

    @field_validator("weekly")
    @classmethod
    def _weekly(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for day, spans in value.items():
            if day not in WEEKDAYS:
                raise ValueError(f"unknown weekday {day!r}; use {', '.join(WEEKDAYS)}")
            for span in spans:
                found = _SPAN.match(span)
                if not found or (found.group(3), found.group(4)) <= (found.group(1), found.group(2)):
                    raise ValueError(f"{day}: {span!r} is not a span like 09:00-17:30 (end after start)")
        return value

    def spans(self, weekday: int) -> list[tuple[time, time | None]]:
        """The opening spans of a weekday (0 = Monday) as (start, end); an end of 24:00 is None."""
        out = []
        for span in self.weekly.get(WEEKDAYS[weekday], []):
            start, end = span.split("-")
            out.append((time.fromisoformat(start), None if end == "24:00" else time.fromisoformat(end)))
        return sorted(out, key=lambda s: s[0])


class HandoffSettings(Strict):
    """Handing a conversation to a person: on request ("转人工", "talk to a human"; never "人工智能学院在哪"), or a
    yes to the offer made after misses. With agents (or an admin) and the conversation log a ticket opens and a
    person answers in the same chat (docs/handoff.md); without them the reply gives ``contact``."""

    enabled: bool = True
    """Offer hand-offs."""
    contact: str = ""
    """How to reach a person when nobody answers in the chat (no agents, or the log is off), e.g. "请致电
    020-8411 2233（工作日 9:00-17:00）/ Call 020-8411 2233 (weekdays 9-17)". Empty: the site's published contacts."""
    after_misses: int = Field(default=2, ge=0)
    """Offer a person (a button) after this many consecutive misses in one conversation (0 = never)."""
    on_confirm_no: bool = False
    """Offer a person when the user says "no" to a confirmation question ("您是想问「X」吗？")."""
    idle_timeout: float = Field(default=900.0, ge=30)
    """Seconds a claimed conversation may go without a message from either side before the bot answers again."""
    open_timeout_hours: float = Field(default=72.0, gt=0)
    """Hours an unclaimed ticket waits before it expires."""
    agents: list[AgentAccount] = Field(default_factory=list)
    """The agents who may log in at /agent (admins may too)."""
    agent_session_hours: float = Field(default=12.0, gt=0)
    """How long an agent login lasts."""
    hours: HoursSettings = Field(default_factory=HoursSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    webhook: HandoffWebhookSettings = Field(default_factory=HandoffWebhookSettings)

    @model_validator(mode="before")
    @classmethod
    def _no_reply(cls, data: Any) -> Any:
        if isinstance(data, dict) and "reply" in data:
            raise ValueError(
                "handoff.reply is gone: the reply now says what really happens (a person answers here, when the desk "
                "opens, or how to reach one); put your phone number or link in handoff.contact"
            )
        return data

    @field_validator("agents")
    @classmethod
    def _unique(cls, value: list[AgentAccount]) -> list[AgentAccount]:
        names = [a.name for a in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"agent names must be unique; listed twice: {', '.join(twice)}")
        return value
