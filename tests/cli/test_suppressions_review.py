"""`einmal suppressions review --account A [--lift]`: the 'bounce' suppressions an older rule made for a
reason that no longer suppresses, listed with their evidence and lifted on request."""

import asyncpg
import pytest

from tests.cli.test_campaign_commands import seed_campaign
from tests.conftest import einmal

pytestmark = pytest.mark.anyio


async def mailbox(
    conn: asyncpg.Connection,
    campaign: int,
    email: str,
    *,
    reply: str | None = None,
    bounces: tuple[tuple[str, str, str | None], ...] = (),
    suppressed: str | None = "bounce",
) -> None:
    """A send row of `campaign` to `email` (failed with `reply`, else sent), its bounces (kind, status,
    reason: None as before migration 0030) and its suppression."""
    account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    subscriber = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2) RETURNING id",
        account,
        email,
    )
    send = await conn.fetchval(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,"
        " last_reply) VALUES ($1, $2, $3, $4, $4, 'campaign:' || $1::bigint || ':' || $3::bigint, $5, $6)"
        " RETURNING id",
        campaign,
        account,
        subscriber,
        email,
        "failed" if reply else "sent",
        reply or "250 ok",
    )
    for i, (kind, status, reason) in enumerate(bounces):
        event = f"dsn:{send}:{i}"
        await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')", event)
        await conn.execute(
            "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            event,
            account,
            send,
            kind,
            status,
            reason,
        )
    if suppressed:
        await conn.execute(
            "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, $2, $3)",
            account,
            email,
            suppressed,
        )


async def seeded(conn: asyncpg.Connection) -> int:
    campaign = await seed_campaign(conn, "sent")
    # made by the old rule, for reasons that no longer suppress
    await mailbox(conn, campaign, "blocked@example.org", bounces=(("hard", "5.7.1", None),))
    await mailbox(conn, campaign, "dmarc@example.org", reply="550 5.7.26 Unauthenticated email, DMARC policy")
    await mailbox(
        conn, campaign, "full@example.org", bounces=(("soft", "4.2.2", "mailbox_full"), ("hard", "5.7.1", "policy"))
    )
    # still what today's rule makes
    await mailbox(conn, campaign, "gone@example.org", bounces=(("hard", "5.7.1", None), ("hard", "5.1.1", None)))
    await mailbox(conn, campaign, "nouser@example.org", reply="550 5.1.1 User unknown")
    await mailbox(conn, campaign, "webhook@example.org", bounces=(("hard", "Permanent", None),))
    await mailbox(conn, campaign, "soft@example.org", bounces=(("soft", "4.2.2", None),) * 3)
    # no evidence, or not a bounce's
    await mailbox(conn, campaign, "manual@example.org")
    await mailbox(conn, campaign, "spam@example.org", bounces=(("hard", "5.7.1", "policy"),), suppressed="complaint")
    return campaign


async def suppressed(conn: asyncpg.Connection) -> list[str]:
    return [r["email_lower"] for r in await conn.fetch("SELECT email_lower FROM einmal.suppressions ORDER BY 1")]


async def test_review_lists_the_bounce_suppressions_no_bounce_would_make_today(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await seeded(conn)
    result = einmal("suppressions", "review", "--account", "acme", dsn=dsn)
    assert result.returncode == 0, result.stderr
    *lines, last = result.stdout.splitlines()
    rows = {line.split("\t")[0]: line.split("\t")[2] for line in lines}
    assert rows == {
        "blocked@example.org": "hard 5.7.1 policy",
        "dmarc@example.org": "hard 5.7.26 authentication (at send time)",
        "full@example.org": "soft 4.2.2 mailbox_full; hard 5.7.1 policy",
    }
    assert all(line.split("\t")[1][:4].isdigit() for line in lines), "when it was suppressed"
    assert last == "3 bounce suppressions that no bounce of their mailbox would make today; lift them with --lift"
    assert len(await suppressed(conn)) == 9, "listing changes nothing"


async def test_review_lift_deletes_only_those_listed(conn: asyncpg.Connection, dsn: str) -> None:
    await seeded(conn)
    result = einmal("suppressions", "review", "--account", "acme", "--lift", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.splitlines()[-1]
        == "3 bounce suppressions that no bounce of their mailbox would make today; lifted 3"
    )
    assert await suppressed(conn) == [
        "gone@example.org",
        "manual@example.org",
        "nouser@example.org",
        "soft@example.org",
        "spam@example.org",
        "webhook@example.org",
    ]
    again = einmal("suppressions", "review", "--account", "acme", "--lift", dsn=dsn)
    assert again.stdout == "0 bounce suppressions that no bounce of their mailbox would make today; lifted 0\n"
    lines = await conn.fetch("SELECT actor, action, subject FROM einmal.audit_log ORDER BY id")
    assert [tuple(r) for r in lines] == [  # the lift that lifted, once; the one that lifted nothing, none
        ("cli", "suppression.remove", "3 of 3 mailboxes: blocked@example.org, dmarc@example.org, full@example.org")
    ]


async def test_review_of_an_unknown_account_is_one_line(conn: asyncpg.Connection, dsn: str) -> None:
    result = einmal("suppressions", "review", "--account", "nobody", dsn=dsn)
    assert (result.returncode, result.stderr) == (1, "einmal: no account named 'nobody'\n")
    result = einmal("suppressions", "review", dsn=dsn)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and "--account" in result.stderr


async def test_lift_keeps_a_suppression_whose_mailbox_bounced_after_the_review_read_it(
    conn: asyncpg.Connection,
) -> None:
    from service import db

    campaign = await seed_campaign(conn, "sent")
    await mailbox(conn, campaign, "blocked@example.org", bounces=(("hard", "5.7.1", None),))
    await mailbox(conn, campaign, "again@example.org", bounces=(("hard", "5.7.1", None),))
    began = await conn.fetchval("SELECT statement_timestamp() - interval '1 second'")
    # an address bounce lands after the review read its evidence: its own insert found the suppression there
    await conn.execute(
        "UPDATE einmal.bounces b SET created_at = now() FROM einmal.sends s"
        " WHERE s.id = b.send_id AND s.email = 'again@example.org'"
    )
    await conn.execute(
        "UPDATE einmal.bounces b SET created_at = now() - interval '1 day' FROM einmal.sends s"
        " WHERE s.id = b.send_id AND s.email = 'blocked@example.org'"
    )
    account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    lifted = await conn.fetch(
        *db.sql(
            "suppressions_lift",
            account_id=account,
            email_keys=["blocked@example.org", "again@example.org"],
            began=began,
        )
    )
    assert [r["email_lower"] for r in lifted] == ["blocked@example.org"]
    assert await suppressed(conn) == ["again@example.org"]
