"""Real bounces: flufl.bounce's 117 samples and those a real Postfix and a real Exim wrote
(tests/inbound/samples/), read as tests/support/bounce_samples.py scores them, and what their reasons do
to an address."""

import asyncpg
import pytest

from service.inbound import bounces
from service.smtp import reasons
from tests.inbound import test_bounce_inbound as inbound
from tests.inbound.test_bounce_trust import send_rows, suppressed, verp
from tests.support import bounce_samples


@pytest.mark.parametrize("name", bounce_samples.SETS)
def test_real_bounces_are_read_right(name: str) -> None:
    score = bounce_samples.score(name, bounces.parse)
    assert score.classes_right >= 0.95 * score.classes, score.wrong
    assert score.recipients_right >= 0.95 * score.recipients, score.wrong
    assert score.reasons_right == score.reasons, score.wrong
    assert score.not_bounces_hard == 0 and score.wrongly_suppressing == 0, score.wrong


@pytest.mark.parametrize(
    ("status", "text", "reason"),
    [
        ("5.1.1", "User unknown", "no_mailbox"),
        (None, "You are not a member of this mailing list <neko-nyaan@example.org>.", "sender"),
        (None, "Duplicated Message-ID in <neko@example.co.jp>.", "routing"),
        ("5.1.2", "", "no_domain"),
        ("5.4.4", "Host or domain name not found. Name service error", "no_domain"),
        ("5.4.4", "unable to route", "routing"),
        ("5.2.1", "The email account that you tried to reach is disabled", "disabled"),
        ("5.2.2", "Mailbox full", "mailbox_full"),
        ("5.7.1", "Service unavailable, Client host blocked using Spamhaus", "policy"),
        ("5.7.1", "Recipient address rejected: user unknown", "policy"),  # a policy code never suppresses
        ("5.7.1", "rejected: SPF check failed", "authentication"),
        ("5.7.26", "Unauthenticated email from example.org is not accepted", "authentication"),
        ("5.7.515", "Access denied, sending domain does not meet the required authentication level", "authentication"),
        ("5.3.4", "Message size exceeds fixed maximum message size", "content"),
        ("5.0.0", "Our system has detected that this message is likely unsolicited mail", "policy"),
        ("5.0.0", "mailbox unavailable: user not found", "no_mailbox"),
        ("4.4.7", "", "expired"),
        ("4.4.1", "Connection timed out", "routing"),
        ("550", "Requested action not taken: mailbox unavailable", "no_mailbox"),
        (None, "Sorry, no mailbox here by that name.", "no_mailbox"),
        (None, "something went wrong somewhere", "unclassified"),
    ],
)
def test_a_status_and_its_text_give_a_reason(status: str | None, text: str, reason: str) -> None:
    assert reasons.classify(status, text) == reason


def test_only_address_reasons_of_permanent_failures_suppress_at_once() -> None:
    suppress = {
        (kind, reason)
        for kind in ("hard", "soft")
        for reason in reasons.REASONS
        if reasons.effect(kind, reason) == reasons.SUPPRESS
    }
    assert suppress == {("hard", reason) for reason in reasons.ADDRESS}
    assert {reason for reason in reasons.REASONS if reasons.effect("soft", reason) == reasons.COUNT} == {
        *reasons.ADDRESS,
        *reasons.COUNTED,
    }
    assert reasons.effect("unclassified", "unclassified") == reasons.NONE


def test_an_smtp_reply_is_classified_as_a_bounce_is() -> None:
    assert reasons.of_reply("550 5.7.26 Unauthenticated email is not accepted") == ("hard", "authentication")
    assert reasons.of_reply("452 4.2.2 Mailbox full") == ("soft", "mailbox_full")


pytestmark = pytest.mark.anyio


async def test_postfix_bounces_through_the_listener_suppress_only_dead_addresses(
    conn: asyncpg.Connection, dsn: str
) -> None:
    cases = {
        "unknown_local_user": "nobody-here@local.test",
        "unknown_domain": "someone@nosuch-domain.invalid",
        "remote_policy": "policy@fail.test",
        "remote_dmarc": "dmarc@fail.test",
        "remote_large": "large@fail.test",
        "remote_full": "full@fail.test",
        "forwarded_unknown": "forward@local.test",
    }
    campaign, ids = await send_rows(conn, dict.fromkeys(cases.values(), "sent"))
    async with inbound.listener(dsn, soft_bounce_limit=2) as port:
        for case, who in cases.items():
            data = bounce_samples.message("postfix", f"{case}.eml")
            reply = await inbound.hand_over(port, verp(campaign, ids[who]), data)
            assert reply.startswith("250 2.0.0 OK"), (case, reply)
    assert await suppressed(conn) == [
        ("forward@local.test", "bounce"),
        ("nobody-here@local.test", "bounce"),
        ("someone@nosuch-domain.invalid", "bounce"),
    ]
    kept = {
        r["email"]: (r["kind"], r["reason"], r["counts"])
        for r in await conn.fetch(
            "SELECT s.email, b.kind, b.reason, b.counts FROM einmal.bounces b JOIN einmal.sends s ON s.id = b.send_id"
        )
    }
    assert kept == {
        "nobody-here@local.test": ("hard", "no_mailbox", False),
        "someone@nosuch-domain.invalid": ("hard", "no_domain", False),
        "policy@fail.test": ("hard", "policy", False),
        "dmarc@fail.test": ("hard", "authentication", False),
        "large@fail.test": ("hard", "content", False),
        "full@fail.test": ("hard", "mailbox_full", True),
        "forward@local.test": ("hard", "no_mailbox", False),
    }


def test_each_recipient_of_a_notice_gets_its_own_line_reason() -> None:
    # OpenSMTPD lists its recipients line after line; each line's code is its recipient's, not its neighbour's
    found = {r.recipient: r.reason for r in bounces.parse(bounce_samples.message("sisimai", "lhost-opensmtpd-17.eml"))}
    assert found == {"userunknown@libsisimai.net": "no_mailbox", "mailboxfull@libsisimai.net": "mailbox_full"}
