"""E-mail to staff against a real SMTP server (aiosmtpd) started by the test: a new ticket's mail arrives with the
masked, marked transcript; the SMTP login's password comes from the environment and never shows in an error; an
SMTP outage delays the mail, which arrives once the server is back, exactly once."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes
from email.message import Message

import pytest

pytest.importorskip("aiosmtpd", reason="pip install aiosmtpd (the test extra)")

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from bot.config.handoff import EmailSettings, HandoffSettings
from bot.conversations.privacy import PersonalData
from bot.conversations.turn_log import TurnLog
from bot.handoff.channels import DeliveryError, EmailChannel
from bot.handoff.desk import Desk
from bot.handoff.outbox import Outbox
from bot.handoff.store import TicketStore
from bot.handoff.tickets import Conversation, Reason
from tests.support.ports import free_port

pytestmark = pytest.mark.unit

SMTP_PASSWORD = "smtp-s3cret-pass"


class Inbox:
    """An aiosmtpd handler keeping every mail it is given."""

    def __init__(self):
        self.mails: list[Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.mails.append(message_from_bytes(envelope.content))
        return "250 OK"


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.password == SMTP_PASSWORD.encode()
    return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers the failure (535)


def smtp_server(port: int, inbox: Inbox) -> Controller:
    controller = Controller(inbox, hostname="127.0.0.1", port=port, authenticator=authenticator, auth_require_tls=False)
    controller.start()
    return controller


def email(port: int) -> EmailSettings:
    return EmailSettings(
        to=["desk@example.org", "lead@example.org"],
        host="127.0.0.1",
        port=port,
        security="none",
        sender="kbbot@example.org",
        username="kbbot",
        password_env="KBBOT_TEST_SMTP_PASSWORD",
        timeout=5,
    )


def test_a_new_tickets_mail_arrives_after_an_outage_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KBBOT_TEST_SMTP_PASSWORD", SMTP_PASSWORD)
    port = free_port()
    log = TurnLog(tmp_path / "turns.sqlite")
    clock = lambda: datetime.now(UTC)
    desk = Desk(
        HandoffSettings(),
        TicketStore(log, clock),
        mask=PersonalData().mask,
        staffed=True,
        staff_channels=["email"],
        clock=clock,
    )
    history = [{"role": "user", "content": "我的邮箱 someone@example.org 收不到通知"}]
    handed = desk.hand_off(Conversation("web", "mail-test-secret-0123"), "转人工", history, Reason.ASKED)
    assert handed.ticket is not None and desk.store is not None
    outbox = Outbox(desk.store, {"email": EmailChannel(email(port))}, retry_seconds=0.01, max_retry_seconds=0.01)
    assert outbox.run_once() == 0  # the SMTP server is down: the mail waits
    [problem] = desk.problems()
    assert problem.channel == "email" and "ConnectionRefused" in problem.error and SMTP_PASSWORD not in problem.error
    inbox = Inbox()
    server = smtp_server(port, inbox)
    try:
        import time

        time.sleep(0.05)  # past the retry wait
        assert outbox.run_once() == 1 and outbox.run_once() == 0
        [mail] = inbox.mails
        assert mail["To"] == "desk@example.org, lead@example.org" and f"#{handed.ticket.id}" in mail["Subject"]
        body = mail.get_payload(decode=True).decode("utf-8")  # type: ignore[union-attr]
        assert "[访客 / visitor] 我的邮箱 [email] 收不到通知" in body and "someone@example.org" not in body
        assert desk.problems() == [] and desk.store.pending() == 0
    finally:
        server.stop()
        log.close()


def test_a_wrong_smtp_password_is_an_error_naming_the_server_never_the_password(monkeypatch):
    monkeypatch.setenv("KBBOT_TEST_SMTP_PASSWORD", "not-the-password")
    port = free_port()
    server = smtp_server(port, Inbox())
    try:
        with pytest.raises(DeliveryError) as failed:
            EmailChannel(email(port)).deliver({"ticket": 1, "transcript": []})
        assert f"127.0.0.1:{port}" in str(failed.value) and "535" in str(failed.value)
        assert "not-the-password" not in str(failed.value)
    finally:
        server.stop()


def test_email_settings_need_a_server_and_a_sender():
    with pytest.raises(ValueError, match="needs host and sender"):
        EmailSettings(to=["desk@example.org"])
    with pytest.raises(ValueError, match="starttls, tls or none"):
        EmailSettings(security="ssl")
