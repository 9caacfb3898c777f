"""A domain that refuses a campaign by policy or authentication (550 5.7.x) is paused like one that throttles
(421 4.7.x): its rows keep their place, no address is suppressed, and they go out once it accepts again."""

from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import einmal
from tests.support.pipeline import approve, counts, message_id, node_env, seed, start_node, stop_node, wait_status
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

DMARC = "550 5.7.26 Unauthenticated email from example.com is not accepted due to domain's DMARC policy"


async def test_a_domain_refusing_by_policy_is_paused_not_its_subscribers_failed(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    refused = [f"r{i}@refusing.example" for i in range(20)]
    other = [f"o{i}@other.example" for i in range(80)]
    campaign = await seed(conn, [a for pair in zip(other[:20], refused, strict=True) for a in pair] + other[20:])
    with FaultServer() as server:
        server.inject("rcpt", DMARC, domain="refusing.example")
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS="3",
            EINMAL_BATCH_SIZE="20",
            EINMAL_DOMAIN_PAUSE_SECONDS="1",
            EINMAL_DOMAIN_PROBES="1",
            EINMAL_RETRY_BASE_SECONDS="1",
            EINMAL_MAX_ATTEMPTS="20",
        )
        node = start_node(env, tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await server.arrived(len(other))  # the other domain is delivered meanwhile
            await anyio.sleep(2)  # a probe or two, refused again
            during = await counts(conn, campaign)
            status = einmal("campaign", "status", str(campaign), dsn=dsn)
            server.clear_faults()
            refusals = len([a for _, a in server.rcpts if a.endswith("@refusing.example")])
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            code = await stop_node(node)
    assert code == 0
    assert "failed" not in during, f"rows of a refusing domain failed: {during}"
    assert during["sent"] == len(other)
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0, "an address was suppressed"
    assert status.returncode == 0, status.stderr
    assert "paused domains" in status.stdout and "refusing.example" in status.stdout, status.stdout
    assert "5.7.26" in status.stdout, status.stdout
    assert await counts(conn, campaign) == {"sent": len(other) + len(refused)}
    assert not server.duplicates()
    delivered = sorted(m.rcpt_tos[0] for m in server.messages if m.rcpt_tos[0].endswith("@refusing.example"))
    assert delivered == sorted(refused), "each row of the refusing domain went out once it accepted again"
    rows = await conn.fetch(
        "SELECT attempts FROM einmal.sends WHERE campaign_id = $1 AND email_lower LIKE '%@refusing.example'", campaign
    )
    charged = sum(r["attempts"] for r in rows)
    assert 0 < charged <= refusals, "only a refused row is charged, so that the next probe is another row"
    assert refusals <= 3 + 1 + 3, f"{refusals} tries of a refusing domain: those on the wire, then a probe a pause"
    assert await conn.fetchval("SELECT failures FROM einmal.domains WHERE domain = 'refusing.example'") == 0


async def test_one_recipient_refused_by_policy_holds_its_domain_for_a_few_pauses_not_for_good(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """Exchange refuses a group closed to outside senders with 5.7.x: one row, not the domain. Charged an
    attempt each time, it is not the first probe again, and fails at the limit, its address not suppressed."""
    corp = ["group@corp.example"] + [f"c{i}@corp.example" for i in range(30)]
    campaign = await seed(conn, corp)
    with FaultServer() as server:
        server.inject(
            "rcpt",
            "550 5.7.133 RESOLVER.RST.SenderNotAuthenticatedForGroup; authentication required",
            domain="group@corp.example",
        )
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS="2",
            EINMAL_DOMAIN_PAUSE_SECONDS="0.5",
            EINMAL_DOMAIN_PROBES="1",
            EINMAL_RETRY_BASE_SECONDS="0.2",
            EINMAL_MAX_ATTEMPTS="3",
        )
        node = start_node(env, tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=30)
        finally:
            assert await stop_node(node) == 0
    assert await counts(conn, campaign) == {"sent": len(corp) - 1, "failed": 1}
    row = await conn.fetchrow(
        "SELECT status, attempts, last_reply FROM einmal.sends WHERE email = 'group@corp.example'"
    )
    assert (row["status"], row["attempts"]) == ("failed", 3)
    assert row["last_reply"].startswith("550 5.7.133") and row["last_reply"].endswith("(gave up after 3 attempts)")
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0
    assert not server.duplicates()


async def test_at_send_time_only_an_address_reason_suppresses(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """The send path takes a 5xx reply's reason from the same table as a bounce (service/smtp/reasons.py)."""
    replies = {
        "gone.example": "550 5.1.1 <x@gone.example>: Recipient address rejected: User unknown",
        "closed.example": "550 5.2.1 This mailbox has been disabled",
        "nocode.example": "550 No such user here",
        "full.example": "552 5.2.2 Mailbox full",
        "big.example": "552 5.3.4 Message too big for system",
    }
    campaign = await seed(conn, [f"x@{domain}" for domain in replies] + ["here@example.org"])
    with FaultServer() as server:
        for domain, reply in replies.items():
            server.inject("rcpt", reply, domain=domain)
        node = start_node(node_env(dsn, server.port, EINMAL_SMTP_CONNECTIONS="1"), tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=30)
        finally:
            assert await stop_node(node) == 0
    assert await counts(conn, campaign) == {"failed": len(replies), "sent": 1}
    suppressed = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions ORDER BY 1")
    assert [(r["email_lower"], r["reason"]) for r in suppressed] == [
        ("x@closed.example", "bounce"),
        ("x@gone.example", "bounce"),
        ("x@nocode.example", "bounce"),
    ], "an unknown or disabled address suppresses; a full mailbox or a refused content does not"


async def test_a_retried_failed_row_is_delivered_exactly_once_with_its_message_id(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    big = [f"b{i}@big.example" for i in range(5)]
    fine = [f"f{i}@fine.example" for i in range(20)]
    campaign = await seed(conn, big + fine)
    with FaultServer() as server:
        server.inject("rcpt", "552 5.3.4 Message size exceeds fixed limit", domain="big.example")
        node = start_node(node_env(dsn, server.port, EINMAL_SMTP_CONNECTIONS="2"), tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=30)
            assert await counts(conn, campaign) == {"sent": len(fine), "failed": len(big)}
            server.clear_faults()  # the relay's limit was raised
            result = await anyio.to_thread.run_sync(
                lambda: einmal("campaign", "retry", str(campaign), "--failed", "--reason", "content", dsn=dsn)
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines() == [
                f"{len(big)} failed rows of campaign {campaign} queued again",
                f"campaign {campaign} is sending again",
            ]
            await wait_status(conn, campaign, "sent", timeout=30)
        finally:
            assert await stop_node(node) == 0
        messages = server.messages
    assert await counts(conn, campaign) == {"sent": len(big) + len(fine)}
    accepted = [m for m in messages if m.rcpt_tos[0].endswith("@big.example") and m.answered]
    assert sorted(m.rcpt_tos[0] for m in accepted) == sorted(big), "each retried row delivered once"
    ids = {
        r["email"]: message_id(campaign, r["subscriber_id"])
        for r in await conn.fetch("SELECT email, subscriber_id FROM einmal.sends WHERE campaign_id = $1", campaign)
    }
    assert all(ids[m.rcpt_tos[0]] in m.data.decode() for m in accepted), "the row's own Message-ID"
    assert not server.duplicates()
