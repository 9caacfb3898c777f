"""Who a bounce is about, and which words win: a refusal of our sender, a block, a quota, a rate or a
temporary failure never suppresses the recipient's address (service/smtp/reasons.py, its precedence).

The status and text pairs are what real servers answered (issue #32's held-out bounces); the messages
are the Exim set's (tests/inbound/samples/exim, written by a real Exim on loopback)."""

import email

import asyncpg
import pytest

from service.cli import campaign_status
from service.inbound import bounces
from service.inbound.formats import text
from service.settings import Settings
from service.smtp import reasons
from tests.conftest import einmal
from tests.inbound import test_bounce_inbound as inbound
from tests.inbound.test_bounce_trust import send_rows, suppressed, verp
from tests.support import bounce_samples


@pytest.mark.parametrize(
    ("status", "diagnostic"),
    [
        ("5.1.8", "501 5.1.8 <bounces@example.org>: Sender address rejected: Domain not found"),
        ("5.1.7", "553 5.1.7 The sender address is not a valid address"),
        ("5.1.0", "550 5.1.0 <bounces@example.org> sender rejected"),
        (
            "5.0.0",
            "SMTP error from remote mail server after MAIL FROM:<bounces@example.org> SIZE=1647: "
            "550 Verification failed for <bounces@example.org>: no such user",
        ),
        ("5.1.1", "host mx.example.com said: 550 5.1.1 user unknown (in reply to MAIL FROM command)"),
    ],
)
def test_a_refusal_of_our_sender_is_reason_sender_and_changes_nothing(status: str, diagnostic: str) -> None:
    assert reasons.classify(status, diagnostic) == "sender"
    assert reasons.effect("hard", "sender") == reasons.NONE == reasons.effect("soft", "sender")


@pytest.mark.parametrize(
    ("status", "diagnostic", "reason"),
    [
        ("5.1.1", "550 5.7.1 IP address blacklisted by recipient", "policy"),
        ("5.1.1", "552 5.2.2 Over quota", "mailbox_full"),
        ("5.1.1", "550 5.1.1 <a@example.com>: mailbox over quota", "mailbox_full"),
        ("5.1.1", "550 5.1.1 <bounces@example.org> has sent to too many recipients this hour", "policy"),
    ],
)
def test_the_servers_own_words_win_over_a_generic_address_status(status: str, diagnostic: str, reason: str) -> None:
    assert reasons.classify(status, diagnostic) == reason


@pytest.mark.parametrize(
    ("status", "diagnostic"),
    [
        ("5.4.4", "Name service error for domain example.com: Host not found, try again"),
        (
            "5.0.0",
            "Host or domain name not found. Name service error for name=example.com type=MX: Malformed or "
            "unexpected name server reply",
        ),
        ("5.1.2", "Domain lookup SERVFAIL, try again later"),
    ],
)
def test_a_temporary_failure_is_never_an_address_reason(status: str, diagnostic: str) -> None:
    assert reasons.classify(status, diagnostic) not in reasons.ADDRESS


def test_a_rate_limit_is_not_a_disabled_account() -> None:
    said = (
        "550-5.2.1 The user you are trying to contact is receiving mail at a rate that prevents additional "
        "messages from being delivered. Please resend your message at a later point."
    )
    assert reasons.classify("5.2.1", said) == "policy"
    assert reasons.classify("5.2.1", "The email account that you tried to reach is disabled.") == "disabled"


def test_exims_retry_timeout_after_a_full_mailbox_is_a_soft_bounce() -> None:
    (report,) = bounces.parse(bounce_samples.message("exim", "local_over_quota.eml"))
    assert (report.kind, report.reason, report.recipient, report.effect()) == (
        "soft",
        "mailbox_full",
        "small@local.test",
        reasons.COUNT,
    )


@pytest.mark.parametrize(
    "case", ["mail_from_sender_rejected", "mail_from_sender_invalid", "mail_from_refused_plain", "rcpt_sender_rejected"]
)
def test_an_exim_bounce_of_a_refused_sender_names_the_recipient_but_is_about_us(case: str) -> None:
    (report,) = bounces.parse(bounce_samples.message("exim", f"{case}.eml"))
    assert (report.kind, report.reason, report.recipient, report.effect()) == (
        "hard",
        "sender",
        "someone@fail.test",
        reasons.NONE,
    )


def test_a_postfix_bounce_of_a_refusal_at_mail_from_is_about_us() -> None:
    (report,) = bounces.parse(bounce_samples.message("postfix", "remote_sender_refused.eml"))
    assert (report.kind, report.status, report.reason, report.recipient, report.effect()) == (
        "hard",
        "5.1.8",
        "sender",
        "someone@sender.test",
        reasons.NONE,
    )


def test_a_transcript_that_echoes_our_sender_before_a_recipient_refusal_is_about_the_recipient() -> None:
    (report,) = bounces.parse(bounce_samples.message("flufl", "simple_01.txt"))  # "250 <ours>, Sender ok"
    assert (report.recipient, report.reason) == ("bbbsss@example.com", "mailbox_full")


NOTICE_WITHOUT_RECIPIENT = b"""From: Mail Delivery System <MAILER-DAEMON@relay.test>
To: bounces@example.org
Subject: Mail delivery failed: returning message to sender
Message-ID: <n1@relay.test>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="B"

--B
Content-Type: text/plain

Your message could not be delivered. This is a permanent error: 550 mailbox unavailable.

--B
Content-Type: message/rfc822

Return-Path: <bounces@example.org>
From: News <news@example.org>
To: <%s>
Subject: News

Hello.
--B--
"""


def test_the_returned_to_is_a_recipient_only_when_the_notice_names_none() -> None:
    (report,) = bounces.parse(NOTICE_WITHOUT_RECIPIENT % b"kept@example.com")
    assert (report.kind, report.recipient, report.guessed) == ("hard", "kept@example.com", True)
    message = email.message_from_bytes(NOTICE_WITHOUT_RECIPIENT % b"kept@example.com")
    assert text.returned_to(message) == "kept@example.com"
    (named,) = bounces.parse(bounce_samples.message("exim", "rcpt_unknown.eml"))
    assert (named.recipient, named.guessed) == ("unknown@fail.test", False)


pytestmark = pytest.mark.anyio


async def test_a_guessed_recipient_is_kept_only_when_the_tokens_row_agrees(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, ids = await send_rows(conn, {"kept@example.com": "sent", "other@example.com": "sent"})
    recorded = {}
    for who in ids:  # both returned messages name kept@example.com in their To
        found = bounces.parse(NOTICE_WITHOUT_RECIPIENT.replace(b"<n1@", f"<n-{who}@".encode()) % b"kept@example.com")
        report, result = await bounces.record(
            conn, bounces.Rules.of(Settings(database_url=dsn)), found, (campaign, ids[who])
        )
        assert report is not None and result == "applied", result
        recorded[who] = report.recipient
    assert recorded == {"kept@example.com": "kept@example.com", "other@example.com": None}
    # the token decides the row
    assert await suppressed(conn) == [("kept@example.com", "bounce"), ("other@example.com", "bounce")]


async def test_exim_bounces_through_the_listener_suppress_only_dead_addresses(
    conn: asyncpg.Connection, dsn: str
) -> None:
    expected = bounce_samples.expected("exim")
    cases = {file: want["recipients"][0] for file, want in expected.items()}
    rows = {f"{file.removesuffix('.eml')}@rows.test": "sent" for file in cases}  # one row per case
    campaign, ids = await send_rows(conn, rows)
    async with inbound.listener(dsn, soft_bounce_limit=2) as port:
        for file in cases:
            reply = await inbound.hand_over(
                port,
                verp(campaign, ids[f"{file.removesuffix('.eml')}@rows.test"]),
                bounce_samples.message("exim", file),
            )
            assert reply.startswith("250 2.0.0 OK"), (file, reply)
    dead = {
        f"{file.removesuffix('.eml')}@rows.test"
        for file, want in expected.items()
        if want["class"] == "hard" and want.get("reason", "no_mailbox") in reasons.ADDRESS
    }
    assert {email for email, _ in await suppressed(conn)} == dead
    kept = {
        r["email"].removesuffix("@rows.test"): r["reason"]
        for r in await conn.fetch(
            "SELECT s.email, b.reason FROM einmal.bounces b JOIN einmal.sends s ON s.id = b.send_id"
        )
    }
    assert {case for case, reason in kept.items() if reason == "sender"} == {
        "mail_from_sender_rejected",
        "mail_from_sender_invalid",
        "mail_from_refused_plain",
        "rcpt_sender_rejected",
    }
    shown = einmal("campaign", "status", str(campaign), dsn=dsn).stdout.splitlines()
    assert "sender" in [line.split()[0] for line in shown[shown.index("by reason:") + 1 :] if line.strip()]
    assert campaign_status.SENDER_NOTE in shown  # told to the operator as a configuration problem


@pytest.mark.parametrize(
    ("file", "status"),
    [
        ("lhost-qmail-07.eml", "4.4.1"),  # qmail: "this message has been in the queue too long"
        ("lhost-qmail-06.eml", "4.2.2"),
        ("lhost-opensmtpd-05.eml", None),  # OpenSMTPD: "Envelope expired"
        ("lhost-amazonworkmail-05.eml", "4.4.7"),  # WorkMail: "554 4.4.7 Message expired"
    ],
)
def test_a_notice_that_gave_up_after_temporary_failures_is_soft(file: str, status: str | None) -> None:
    (report,) = bounces.parse(bounce_samples.message("sisimai", file))
    assert (report.kind, report.status or None) == ("soft", status)
    assert report.effect() != reasons.SUPPRESS


def test_a_refusal_quoted_before_the_queue_gave_up_stays_hard() -> None:
    (report,) = bounces.parse(bounce_samples.message("sisimai", "lhost-qmail-04.eml"))  # "501 5.0.0 Invalid domain"
    assert report.kind == "hard"
