"""`einmal prune` against a real PostgreSQL: a finished campaign's partition goes, its counts, bounces and
unsubscribe links stay; a sending campaign is never pruned; --dry-run writes nothing; bad input is one line."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service import db
from tests.cli.test_campaign_commands import one_line_error, seed_campaign
from tests.conftest import einmal
from tests.support.web import ONE_CLICK, http_server, token

pytestmark = pytest.mark.anyio


async def partition(conn: asyncpg.Connection, campaign: int) -> str | None:
    return await conn.fetchval("SELECT to_regclass('einmal.sends_c' || $1::bigint)::text", campaign)


async def finish(conn: asyncpg.Connection, campaign: int, days_ago: float = 0) -> None:
    await conn.execute(
        "UPDATE einmal.campaigns SET sent_at = now() - make_interval(secs => $2) WHERE id = $1",
        campaign,
        days_ago * 86400,
    )


async def snapshot(conn: asyncpg.Connection) -> tuple:
    """Everything a prune could write."""
    return (
        tuple(map(tuple, await conn.fetch("SELECT id, status, pruned_at FROM einmal.campaigns ORDER BY id"))),
        tuple(map(tuple, await conn.fetch("SELECT * FROM einmal.campaign_counts ORDER BY 1, 2"))),
        tuple(map(tuple, await conn.fetch("SELECT id, status FROM einmal.sends ORDER BY id"))),
        tuple(map(tuple, await conn.fetch("SELECT relid::text FROM pg_partition_tree('einmal.sends') ORDER BY 1"))),
    )


async def test_every_campaign_has_its_partition_from_its_creation(conn: asyncpg.Connection) -> None:
    campaign = await seed_campaign(conn, "draft", sends=("queued",))
    assert await partition(conn, campaign) == f"einmal.sends_c{campaign}"
    bound = await conn.fetchval(
        "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = $1::regclass", f"einmal.sends_c{campaign}"
    )
    assert bound == f"FOR VALUES FROM ('{campaign}') TO ('{campaign + 1}')"
    # the same subscriber twice in one campaign is still refused through the parent's unique constraint
    row = await conn.fetchrow("SELECT * FROM einmal.sends WHERE campaign_id = $1", campaign)
    with pytest.raises(asyncpg.UniqueViolationError):
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, "
            "job_id) VALUES ($1, $2, $3, 'x@example.org', 'x@example.org', $4)",
            campaign,
            row["account_id"],
            row["subscriber_id"],
            row["job_id"],
        )


async def test_prune_drops_a_finished_campaigns_rows_and_its_status_keeps_the_counts(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "sent", "failed", "in_doubt", "suppressed"))
    await finish(conn, campaign)
    before = einmal("campaign", "status", str(campaign), "--json", dsn=dsn)
    listed = einmal("campaign", "list", dsn=dsn)
    result = einmal("prune", "--campaign", str(campaign), dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "1 campaign pruned"
    assert "partition dropped; 5 rows counted" in result.stdout
    assert await partition(conn, campaign) is None
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", campaign) == 0
    after = einmal("campaign", "status", str(campaign), "--json", dsn=dsn)
    assert after.returncode == 0, after.stderr
    # the same figures, read from einmal.campaign_counts; the top failure replies went with the rows
    assert json.loads(after.stdout) == {**json.loads(before.stdout), "failures": []}
    assert einmal("campaign", "list", dsn=dsn).stdout == listed.stdout
    again = einmal("prune", "--campaign", str(campaign), dsn=dsn)  # idempotent
    assert (again.returncode, again.stdout) == (0, "0 campaigns pruned\n")


async def test_the_counts_written_at_the_finish_are_what_a_prune_keeps(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("sent", "failed", "sent"))
    await conn.execute("UPDATE einmal.campaigns SET recipients_built_at = now() WHERE id = $1", campaign)
    assert await conn.fetchrow(*db.sql("campaign_finish", campaign_id=campaign)) is not None
    counts = dict(await conn.fetch("SELECT status, n FROM einmal.campaign_counts WHERE campaign_id = $1", campaign))
    assert counts == {"sent": 2, "failed": 1}
    # a row changed behind the counts' back is not read again by the prune: the counts stand
    await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = $1", campaign)
    assert einmal("prune", "--campaign", str(campaign), dsn=dsn).returncode == 0
    after = dict(await conn.fetch("SELECT status, n FROM einmal.campaign_counts WHERE campaign_id = $1", campaign))
    assert after == {"sent": 2, "failed": 1}


async def test_a_sending_campaign_is_never_pruned(conn: asyncpg.Connection, dsn: str) -> None:
    sending = await seed_campaign(conn, "sending", sends=("sent", "queued"))
    paused = await seed_campaign(conn, "paused", sends=("sent",))
    await conn.execute("UPDATE einmal.campaigns SET updated_at = now() - interval '40 days'")
    result = einmal("prune", "--older-than", "0", dsn=dsn)
    assert (result.returncode, result.stdout) == (0, "0 campaigns pruned\n")
    refused = einmal("prune", "--campaign", str(sending), dsn=dsn)
    assert one_line_error(refused) == (
        f"einmal: campaign {sending} is sending: only a sent or cancelled campaign is pruned"
    )
    for campaign in (sending, paused):
        assert await partition(conn, campaign) is not None


async def test_a_cancelled_campaign_with_a_row_still_on_the_wire_is_skipped(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "cancelled", sends=("failed", "sending"))
    result = einmal("prune", "--campaign", str(campaign), dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "skipped: rows of it are still queued or on the wire" in result.stdout
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", campaign) == 2
    await conn.execute(
        "UPDATE einmal.sends SET status = 'in_doubt' WHERE campaign_id = $1 AND status = 'sending'", campaign
    )
    assert "partition dropped; 2 rows counted" in einmal("prune", "--campaign", str(campaign), dsn=dsn).stdout


async def test_older_than_takes_only_campaigns_finished_before(conn: asyncpg.Connection, dsn: str) -> None:
    old, recent = [await seed_campaign(conn, "sent", sends=("sent",)) for _ in range(2)]
    await finish(conn, old, days_ago=31)
    await finish(conn, recent, days_ago=29)
    result = einmal("prune", "--older-than", "30", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert (await partition(conn, old), await partition(conn, recent)) == (None, f"einmal.sends_c{recent}")
    by_setting = einmal("prune", dsn=dsn, env={"EINMAL_RETENTION_DAYS": "28"})
    assert by_setting.stdout.splitlines()[-1] == "1 campaign pruned"
    assert await partition(conn, recent) is None


async def test_dry_run_lists_and_writes_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "failed"))
    await finish(conn, campaign, days_ago=3)
    before = await snapshot(conn)
    result = einmal("prune", "--older-than", "1", "--dry-run", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith(f"campaign {campaign} (sent ")
    assert result.stdout.splitlines()[-1] == "1 campaign would be pruned (dry run: nothing removed)"
    assert await snapshot(conn) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (("--older-than", "-1"), "einmal prune: argument --older-than: must be 0 or more days (got -1)"),
        (("--older-than", "soon"), "einmal prune: argument --older-than: 'soon' is not a number of days"),
        (("--campaign", "x"), "einmal prune: argument --campaign: invalid int value: 'x'"),
    ],
)
async def test_bad_arguments_are_one_line_exit_2(conn: asyncpg.Connection, dsn: str, args, message) -> None:
    before = await snapshot(conn)
    result = einmal("prune", *args, dsn=dsn)
    assert (result.returncode, result.stderr, result.stdout) == (2, message + "\n", "")
    assert await snapshot(conn) == before


async def test_an_unknown_campaign_or_no_rule_is_one_line(conn: asyncpg.Connection, dsn: str) -> None:
    assert one_line_error(einmal("prune", "--campaign", "999", dsn=dsn)) == "einmal: no campaign with id 999"
    assert one_line_error(einmal("prune", dsn=dsn)) == (
        "einmal: prune: give --older-than DAYS or --campaign ID (or set EINMAL_RETENTION_DAYS)"
    )


async def test_two_prunes_at_once_drop_the_partition_once_and_both_succeed(conn: asyncpg.Connection, dsn: str) -> None:
    campaigns = [await seed_campaign(conn, "sent", sends=("sent", "failed")) for _ in range(6)]
    results = []

    async def prune() -> None:
        results.append(await anyio.to_thread.run_sync(lambda: einmal("prune", "--older-than", "0", dsn=dsn)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(prune)
        tg.start_soon(prune)
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert [await partition(conn, c) for c in campaigns] == [None] * 6
    counts = await conn.fetch("SELECT campaign_id, status, n FROM einmal.campaign_counts ORDER BY 1, 2")
    assert [tuple(r) for r in counts] == [(c, s, 1) for c in campaigns for s in ("failed", "sent")]


async def test_the_unsubscribe_link_of_a_pruned_campaign_still_unsubscribes(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent",))
    account, subscriber = await conn.fetchrow(
        "SELECT account_id, subscriber_id FROM einmal.sends WHERE campaign_id = $1", campaign
    )
    assert "partition dropped" in einmal("prune", "--campaign", str(campaign), dsn=dsn).stdout
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        url = f"{base}/unsubscribe?token={token((account, campaign, subscriber))}"
        page = await client.get(url)
        posted = await client.post(url, data=ONE_CLICK)
    assert (page.status_code, posted.status_code) == (200, 200)
    assert "r***@example.org" in page.text
    rows = await conn.fetch("SELECT account_id, email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in rows] == [(account, "r0@example.org", "unsubscribe")]


async def test_bounces_of_a_pruned_campaign_are_kept_and_counted(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "sent"))
    sends = await conn.fetch("SELECT id, account_id FROM einmal.sends WHERE campaign_id = $1 ORDER BY id", campaign)
    for i, (kind, reason) in enumerate((("hard", "no_mailbox"), ("complaint", "complaint"))):
        await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'h')", f"t:{i}")
        await conn.execute(
            *db.sql(
                "bounce_insert",
                event_id=f"t:{i}",
                account_id=sends[i]["account_id"],
                send_id=sends[i]["id"],
                campaign_id=campaign,
                kind=kind,
                status="5.1.1",
                reason=reason,
                counts=False,
            )
        )
    before = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert (before["bounced"], before["complained"]) == (1, 1), before
    assert "partition dropped" in einmal("prune", "--campaign", str(campaign), dsn=dsn).stdout
    assert json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout) == before
    assert await conn.fetchval("SELECT count(*) FROM einmal.bounces WHERE campaign_id = $1", campaign) == 2


async def test_a_retry_that_reopens_a_campaign_drops_its_counts_and_a_pruned_one_is_not_reopened(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("sent", "failed"))
    await conn.execute("UPDATE einmal.campaigns SET recipients_built_at = now() WHERE id = $1", campaign)
    assert await conn.fetchrow(*db.sql("campaign_finish", campaign_id=campaign)) is not None
    result = einmal("campaign", "retry", str(campaign), "--failed", dsn=dsn)
    assert result.stdout.splitlines()[-1] == f"campaign {campaign} is sending again", result.stderr
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaign_counts WHERE campaign_id = $1", campaign) == 0
    await conn.execute("UPDATE einmal.campaigns SET status = 'sent', pruned_at = now() WHERE id = $1", campaign)
    assert await conn.fetchval(*db.sql("campaign_reopen", campaign_id=campaign)) is None
