"""A campaign's open counts (migration 0157), kept by the triggers on einmal.opens, equal a count of its opens after
each change: opens recorded by their own statement (einmal.opens_record), a person's and a machine's, statements of
two connections at once, a subscriber's erasure, the campaign's deletion; and what GET …/opens reads of them."""

from datetime import UTC, datetime, timedelta

import anyio
import asyncpg
import pytest

from service import db
from service.campaigns import opens

pytestmark = pytest.mark.anyio

RECOUNT = """
SELECT coalesce(o.tag, '*') AS tag, count(*) AS total, count(DISTINCT o.subscriber_id) AS recipients
FROM einmal.opens AS o WHERE o.campaign_id = $1
GROUP BY GROUPING SETS ((o.tag), ())"""


async def counts(conn: asyncpg.Connection, campaign: int) -> tuple[set, set]:
    kept = await conn.fetch(
        "SELECT tag, total, recipients FROM einmal.open_counts WHERE campaign_id = $1 AND total > 0", campaign
    )
    recount = {tuple(r) for r in await conn.fetch(RECOUNT, campaign) if r["total"]}
    return {tuple(r) for r in kept}, recount


async def record(conn: asyncpg.Connection, account: int, campaign: int, seen: list[tuple[int, float, str]]) -> int:
    """Opens (subscriber, minutes from now, what the request said: '' a person, 'proxy' a machine)."""
    base = datetime.now(UTC) + timedelta(minutes=1)
    return await conn.fetchval(
        *db.sql(
            "opens_record",
            ids=[f"opn_{s}_{at}" for s, at, _ in seen],
            accounts=[account] * len(seen),
            campaigns=[campaign] * len(seen),
            subscribers=[s for s, _, _ in seen],
            ats=[base + timedelta(minutes=at) for _, at, _ in seen],
            said=[said for _, _, said in seen],
            early_seconds=15,
            repeat_seconds=10,
        )
    )


async def tracked(conn: asyncpg.Connection, people: int) -> tuple[int, int, list[int]]:
    """An account, its campaign tracking opens, and `people` subscribers of it: their ids."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, track_opens) "
        "VALUES ($1, 'c', 's', 'a@example.com', 't', '{}', true) RETURNING id",
        account,
    )
    made = await conn.fetch(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "SELECT $1, 'p' || g || '@example.com', 'p' || g || '@example.com' FROM generate_series(1, $2) AS g "
        "RETURNING id",
        account,
        people,
    )
    return account, campaign, sorted(r["id"] for r in made)


async def test_the_counts_follow_every_change_of_the_opens(conn: asyncpg.Connection, dsn: str) -> None:
    account, campaign, (a, b, c, d) = await tracked(conn, 4)
    shown = await opens.of_campaign(conn, campaign_id=campaign)
    assert (shown.all.total, shown.all.unique, shown.tracked) == (0, 0, True)  # none yet: zeros, not absent

    # a opens twice, b once, c's mail client's proxy fetches the image
    assert await record(conn, account, campaign, [(a, 0, ""), (a, 5, ""), (b, 0, ""), (c, 0, "proxy")]) == 4
    kept, recount = await counts(conn, campaign)
    assert kept == recount == {("*", 4, 3), ("human", 3, 2), ("machine", 1, 1)}

    # two connections at once, each the first open of d: d is one recipient, not two. The second statement waits
    # for the first's commit (the counts' lock), then sees its open; without the wait neither sees the other's
    other = await asyncpg.connect(dsn)
    try:
        async with anyio.create_task_group() as tg:
            first = other.transaction()
            await first.start()
            await record(other, account, campaign, [(d, 20, "")])
            tg.start_soon(record, conn, account, campaign, [(d, 10, "")])
            await anyio.sleep(0.5)
            await first.commit()
    finally:
        await other.close()
    kept, recount = await counts(conn, campaign)
    assert kept == recount == {("*", 6, 4), ("human", 5, 3), ("machine", 1, 1)}

    await conn.execute("DELETE FROM einmal.opens WHERE subscriber_id = $1", a)  # as erasure does
    kept, recount = await counts(conn, campaign)
    assert kept == recount == {("*", 4, 3), ("human", 3, 2), ("machine", 1, 1)}
    shown = await opens.of_campaign(conn, campaign_id=campaign)
    assert (shown.all.total, shown.all.unique, shown.people.total, shown.machines.unique) == (4, 3, 3, 1)

    await conn.execute("DELETE FROM einmal.opens WHERE subscriber_id = $1", c)  # the machine's last
    shown = await opens.of_campaign(conn, campaign_id=campaign)
    assert (shown.all.total, shown.machines.total, shown.machines.unique) == (3, 0, 0)
    await conn.execute("DELETE FROM einmal.campaigns WHERE id = $1", campaign)  # its opens go: counted down to 0
    assert await conn.fetchval("SELECT sum(total) FROM einmal.open_counts WHERE campaign_id = $1", campaign) == 0


async def test_the_migration_counts_the_opens_written_before_it(conn: asyncpg.Connection) -> None:
    """Its last statement, run again over opens written with the triggers off, gives what they would have."""
    account, campaign, people = await tracked(conn, 3)
    await conn.execute("ALTER TABLE einmal.opens DISABLE TRIGGER opens_counts_insert")
    try:
        await record(conn, account, campaign, [(people[0], 0, ""), (people[0], 5, ""), (people[1], 0, "proxy")])
    finally:
        await conn.execute("ALTER TABLE einmal.opens ENABLE TRIGGER opens_counts_insert")
    assert await conn.fetchval("SELECT count(*) FROM einmal.open_counts WHERE campaign_id = $1", campaign) == 0
    [migration] = [text for version, _, text in db.migrations() if version == 157]
    await conn.execute(migration.split("-- the opens written before\n")[1])
    kept, recount = await counts(conn, campaign)
    assert kept == recount == {("*", 3, 2), ("human", 2, 1), ("machine", 1, 1)}
