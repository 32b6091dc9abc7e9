"""Where hand-off notices go: the webhook (signed JSON), e-mail over SMTP, WeCom app messages to staff, and an
agent's reply pushed to a WeCom visitor. Each delivers one payload from the outbox or raises DeliveryError with a
reason that names no secret (a webhook URL's path may hold a token: only its host is named)."""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import ssl
from email.message import EmailMessage
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from bot.config.handoff import EmailSettings, HandoffSettings, HandoffWebhookSettings

SIGNATURE_HEADER = "X-Kbbot-Signature"
MAX_LINES = 50  # transcript lines a notice carries (the newest)
MAX_LINE_CHARS = 4000


class DeliveryError(Exception):
    """A notice that did not go through this time (the outbox tries again later)."""


class Channel(Protocol):
    """One way of telling someone: ``deliver`` sends a payload or raises DeliveryError."""

    name: str

    def deliver(self, payload: dict[str, Any]) -> None:
        """Send ``payload`` once (with the channel's own short retries); DeliveryError when it did not go."""
        ...


class TextSender(Protocol):
    """Sends a text message to a WeCom user (the WeCom channel's send API client)."""

    def send_text(self, user: str, content: str) -> bool:
        """True when WeCom took the message."""
        ...


def host_of(url: str) -> str:
    """The scheme and host of a URL, for logs and errors: the path or query of a webhook URL may hold a token."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a port out of range, a broken IPv6 literal
        return "(invalid URL)"


def notice_text(payload: dict[str, Any]) -> str:
    """A staff notice as plain text: the ticket, why, the question, the transcript (who said each line)."""
    said = {
        "visitor": "访客 / visitor",
        "bot": "机器人 / bot",
        "unverified": "⚠️ 客户端所称的机器人回复 / claimed bot reply",
    }
    lines = [
        f"新的转人工请求 #{payload.get('ticket')} / New hand-off #{payload.get('ticket')}",
        f"原因 / Reason: {payload.get('reason')} · 渠道 / Channel: {payload.get('channel')}",
        f"问题 / Question: {payload.get('question')}",
        "",
    ]
    for line in payload.get("transcript", [])[-MAX_LINES:]:
        lines.append(f"[{said.get(line.get('said'), line.get('said'))}] {str(line.get('text'))[:MAX_LINE_CHARS]}")
    lines += ["", "请在坐席控制台 /agent 接待 / Answer it in the agent console at /agent."]
    return "\n".join(lines)


class WebhookChannel:
    """POSTs the payload as JSON to ``handoff.webhook.url``, signed when a secret is set; a redirect is refused."""

    name = "webhook"

    def __init__(self, settings: HandoffWebhookSettings):
        assert settings.url, "a webhook channel needs handoff.webhook.url"
        self.url, self.settings = settings.url, settings

    def deliver(self, payload: dict[str, Any]) -> None:
        """One POST with up to ``retries`` quick retries; DeliveryError naming the host and the last failure."""
        body = json.dumps({**payload, "source": "kbbot"}, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "kbbot-handoff"}
        secret = self.settings.secret()
        if secret:
            headers[SIGNATURE_HEADER] = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        error = ""
        # A redirect is never followed: a 301/302/303 would be re-sent as a GET without the body, and a 307/308 to
        # another host would carry the signed transcript somewhere the deployer did not name.
        with httpx.Client(timeout=self.settings.timeout, follow_redirects=False) as http:
            for _ in range(self.settings.retries + 1):
                try:
                    response = http.post(self.url, content=body, headers=headers)
                except httpx.HTTPError as exc:  # the message may quote the URL: the kind of error only
                    error = type(exc).__name__
                    continue
                if 200 <= response.status_code < 300:
                    return
                if response.is_redirect:
                    target = host_of(response.headers.get("location", ""))
                    raise DeliveryError(
                        f"webhook {host_of(self.url)} answered HTTP {response.status_code}, a redirect to {target}; "
                        "redirects are not followed: set handoff.webhook.url to the final URL"
                    )
                error = f"HTTP {response.status_code}"
        raise DeliveryError(f"webhook {host_of(self.url)} failed after {self.settings.retries + 1} attempt(s): {error}")


class EmailChannel:
    """A plain-text mail per new ticket to ``handoff.notify.email.to`` over SMTP."""

    name = "email"

    def __init__(self, settings: EmailSettings):
        self.settings = settings

    def deliver(self, payload: dict[str, Any]) -> None:
        """Send the mail; DeliveryError naming the server and the SMTP failure (never the password)."""
        s = self.settings
        mail = EmailMessage()
        mail["Subject"] = f"[kbbot] 转人工 #{payload.get('ticket')} / Hand-off #{payload.get('ticket')}"
        mail["From"], mail["To"] = s.sender, ", ".join(s.to)
        mail.set_content(notice_text(payload))
        try:
            if s.security == "tls":
                context = ssl.create_default_context()
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=context)
            else:
                smtp = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
        except (OSError, smtplib.SMTPException) as exc:
            raise DeliveryError(f"e-mail via {s.host}:{s.port} failed: {type(exc).__name__}") from None
        # No ``with``: its QUIT on a connection the server closed would hide why it failed (a 535, say).
        try:
            if s.security == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if s.username:
                smtp.login(s.username, s.password())
            smtp.send_message(mail)
        except (OSError, smtplib.SMTPException) as exc:
            code = f" {exc.smtp_code}" if isinstance(exc, smtplib.SMTPResponseException) else ""
            raise DeliveryError(f"e-mail via {s.host}:{s.port} failed: {type(exc).__name__}{code}") from None
        finally:
            smtp.close()


class WeComStaffChannel:
    """A WeCom app message per new ticket to the staff listed in ``handoff.notify.wecom_users``."""

    name = "wecom_staff"

    def __init__(self, sender: TextSender, users: list[str]):
        self.sender, self.users = sender, list(users)

    def deliver(self, payload: dict[str, Any]) -> None:
        """Send the notice to every listed user at once; DeliveryError when WeCom did not take it."""
        if not self.sender.send_text("|".join(self.users), notice_text(payload)):
            raise DeliveryError("WeCom app message to staff not delivered (see the WeCom send errors in the log)")


class VisitorPushChannel:
    """An agent's reply (or the desk's notice) pushed to the IM visitor of the conversation (WeCom, Feishu)."""

    def __init__(self, channel: str, sender: TextSender):
        self.name = visitor_push(channel)
        self.label = {"wecom": "WeCom", "feishu": "Feishu"}.get(channel, channel)
        self.sender = sender

    def deliver(self, payload: dict[str, Any]) -> None:
        """Send the text to the visitor; DeliveryError when the IM platform did not take it."""
        if not self.sender.send_text(str(payload["user"]), str(payload["text"])):
            raise DeliveryError(
                f"{self.label} message to the visitor not delivered (see the {self.label} send errors in the log)"
            )


def visitor_push(channel: str) -> str:
    """The outbox channel that pushes agents' replies to visitors of the front end ``channel`` ("wecom_visitor")."""
    return f"{channel}_visitor"


def configured_channels(settings: HandoffSettings) -> dict[str, Channel]:
    """The staff channels ``handoff`` configures that need nothing from a front end: the webhook, e-mail."""
    channels: dict[str, Channel] = {}
    if settings.webhook.url:
        channels[WebhookChannel.name] = WebhookChannel(settings.webhook)
    if settings.notify.email.to:
        channels[EmailChannel.name] = EmailChannel(settings.notify.email)
    return channels
