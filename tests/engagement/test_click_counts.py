"""A campaign's click counts (migration 0150), kept by the triggers on einmal.clicks, equal a count of its clicks
after each change: clicks recorded by their own statement (einmal.clicks_record), tags it revises (a hidden link's
click, a burst over every link), a subscriber's erasure; and the migration's count of the clicks written before it."""

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from service import db

pytestmark = pytest.mark.anyio

RECOUNT = """
SELECT coalesce(k.link, -1) AS link, coalesce(k.tag, '*') AS tag, count(*) AS total,
       count(DISTINCT k.subscriber_id) AS recipients
FROM einmal.clicks AS k WHERE k.campaign_id = $1
GROUP BY GROUPING SETS ((k.link, k.tag), (k.link), (k.tag), ())"""


async def counts(conn: asyncpg.Connection, campaign: int) -> tuple[set, set]:
    kept = await conn.fetch(
        "SELECT link, tag, total, recipients FROM einmal.click_counts WHERE campaign_id = $1 AND total > 0", campaign
    )
    return {tuple(r) for r in kept}, {tuple(r) for r in await conn.fetch(RECOUNT, campaign)}


async def record(conn: asyncpg.Connection, account: int, campaign: int, clicks: list[tuple[int, int, float]]) -> int:
    """Clicks (subscriber, link, seconds after a minute from now) of a message of two links."""
    base = datetime.now(UTC) + timedelta(minutes=1)
    return await conn.fetchval(
        *db.sql(
            "clicks_record",
            ids=[f"clk_{s}_{link}_{at}" for s, link, at in clicks],
            accounts=[account] * len(clicks),
            campaigns=[campaign] * len(clicks),
            subscribers=[s for s, _, _ in clicks],
            links=[link for _, link, _ in clicks],
            urls=[f"https://example.org/{link}" for _, link, _ in clicks],
            ats=[base + timedelta(seconds=at) for _, _, at in clicks],
            said=[""] * len(clicks),
            counts=[2] * len(clicks),
            early_seconds=15,
            burst_seconds=2,
            repeat_seconds=10,
        )
    )


async def test_the_counts_follow_every_change_of_the_clicks(conn: asyncpg.Connection) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, track_clicks) "
        "VALUES ($1, 'c', 's', 'a@example.com', 't', '{}', true) RETURNING id",
        account,
    )
    people = [
        await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2) RETURNING id",
            account,
            f"p{i}@example.com",
        )
        for i in range(4)
    ]
    a, b, c, d = people
    # a person's clicks; a second click of a's link 1 later; b clicks both links within a second (a burst)
    assert await record(conn, account, campaign, [(a, 1, 0), (a, 1, 60), (a, 2, 120), (b, 1, 0), (c, 2, 0)]) == 5
    kept, recount = await counts(conn, campaign)
    assert kept == recount and (1, "human", 3, 2) in kept
    assert await record(conn, account, campaign, [(b, 2, 0.5)]) == 1  # the burst: b's two clicks revised
    kept, recount = await counts(conn, campaign)
    assert kept == recount and (-1, "machine", 2, 1) in kept
    assert await record(conn, account, campaign, [(d, 0, 30), (d, 1, 30.5)]) == 2  # the hidden link and a click
    kept, recount = await counts(conn, campaign)
    assert kept == recount and (-1, "machine", 4, 2) in kept
    await conn.execute("DELETE FROM einmal.clicks WHERE subscriber_id = $1", a)  # as erasure does
    kept, recount = await counts(conn, campaign)
    assert kept == recount and (-1, "human", 1, 1) in kept
    shown = await conn.fetch(*db.sql("campaign_clicks", campaign_id=campaign))
    assert {(r["link"], r["tag"], r["total"]) for r in shown if r["link"] is None} == {
        (None, None, 5),
        (None, "human", 1),
        (None, "machine", 4),
    }
