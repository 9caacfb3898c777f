"""The recipient build: one row per address, the oldest confirmed subscriber
wins, copies split by a chunk boundary still count once, a rerun or a second build at the same time adds nothing."""

import anyio
import asyncpg
import pytest

from actors.builder import Builder
from service import db
from service.settings import Settings
from tests.support.pipeline import seed
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio


async def test_the_pool_reaches_the_database_at_creation_and_opens_nothing_behind_an_actor(dsn: str) -> None:
    # an actor's connection ends with the actor; a pool keeping a floor of connections would open one behind
    # it at once, in a task of its own, and closing the pool cancelled that handshake half-way: asyncpg then
    # reported "unexpected connection_lost() call" as an error nobody retrieved (at this fixture's teardown)
    pool = await db.create_pool(dsn, size=2)
    try:
        assert pool.get_size() == 1, "one connection at creation: an unreachable database fails there"
        async with db.actor_connection(pool, "builder", "t/1", 10) as conn:
            assert await conn.fetchval("SELECT 1") == 1
        assert (pool.get_size(), pool.get_min_size()) == (0, 0), "dropped with the actor, and no floor to refill"
    finally:
        await pool.close()


async def test_chunks_hold_every_copy_of_their_addresses(conn: asyncpg.Connection, the_builder: Builder) -> None:
    # five copies of b@ (different case) straddle every chunk boundary of size 2
    addresses = [
        "a@example.com",
        "B@example.com",
        "b@EXAMPLE.com",
        "b@example.com",
        "B@EXAMPLE.COM",
        "b@Example.com",
        "c@example.com",
        "d@example.com",
    ]
    campaign = await seed(conn, addresses, suppressed=["d@example.com"])
    await conn.execute("UPDATE einmal.subscribers SET status = 'unsubscribed' WHERE email = 'B@example.com'")
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    assert await the_builder.build(campaign, chunk=2) == 4
    rows = await conn.fetch("SELECT email, status FROM einmal.sends ORDER BY email_lower")
    # the oldest confirmed copy of b@ wins: B@example.com is unsubscribed, b@EXAMPLE.com is next
    assert [tuple(r) for r in rows] == [
        ("a@example.com", "queued"),
        ("b@EXAMPLE.com", "queued"),
        ("c@example.com", "queued"),
        ("d@example.com", "suppressed"),
    ]
    assert await conn.fetchval("SELECT recipients_built_at IS NOT NULL FROM einmal.campaigns") is True
    assert await the_builder.build(campaign, chunk=2) == 0


async def test_a_build_stopped_half_way_resumes_without_adding_twice(
    conn: asyncpg.Connection, the_builder: Builder
) -> None:
    campaign = await seed(conn, [f"u{i:03}@example.com" for i in range(50)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    first = await conn.fetchrow(
        *db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=20)
    )  # a crash after one chunk
    assert first["inserted"] == 20
    assert await the_builder.build(campaign, chunk=7) == 30
    assert await conn.fetchval("SELECT count(DISTINCT email_lower) FROM einmal.sends") == 50


async def test_a_chunk_built_twice_adds_nothing_the_second_time(conn: asyncpg.Connection, the_builder: Builder) -> None:
    campaign = await seed(conn, [f"w{i:03}@example.com" for i in range(30)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    first = await conn.fetchrow(*db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=20))
    again = await conn.fetchrow(
        *db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=20)
    )  # e.g. a lost commit reply
    assert (first["inserted"], again["inserted"]) == (20, 0) and first["upper"] == again["upper"]
    assert await the_builder.build(campaign, chunk=7) == 10
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 30


async def test_two_builds_racing_on_one_campaign_add_each_address_once(
    conn: asyncpg.Connection, dsn: str, the_builder: Builder
) -> None:
    campaign = await seed(conn, [f"x{i:03}@example.com" for i in range(40)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    # the same chunk in two transactions at once: the second waits on the first's uncommitted rows
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    results = []

    async def build_second() -> None:
        results.append(
            await second.fetchrow(*db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=25))
        )

    try:
        async with anyio.create_task_group() as tg:
            transaction = first.transaction()
            await transaction.start()
            assert (await first.fetchrow(*db.sql("recipients_build_chunk", campaign_id=campaign, after="", size=25)))[
                "inserted"
            ] == 25
            tg.start_soon(build_second)
            with anyio.fail_after(30):
                while not await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                    second.get_server_pid(),
                ):
                    await anyio.sleep(0.01)
            await transaction.commit()
    finally:
        await first.close()
        await second.close()
    assert results[0]["inserted"] == 0, "the second build found the first's rows and added none"
    # and two whole builds at once, each in its own chunking, from nothing
    await conn.execute("DELETE FROM einmal.sends")
    other = wiring(Settings(database_url=dsn), the_builder.pool, dsn).builder()
    added: list[int] = []

    async def build(b: Builder, chunk: int) -> None:
        added.append(await b.build(campaign, chunk=chunk))

    async with anyio.create_task_group() as tg:
        tg.start_soon(build, the_builder, 6)
        tg.start_soon(build, other, 9)
    assert sum(added) == 40
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends") == 40


async def test_a_build_leaves_statistics_that_count_its_rows(conn: asyncpg.Connection, the_builder: Builder) -> None:
    # the nodes' cached plans for the claim and send_advance come from these statistics: a table they
    # last saw empty is read whole by every statement instead of found by primary key (docs/design.md#recipient-build)
    campaign = await seed(conn, [f"s{i:04}@example.com" for i in range(1200)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    assert await the_builder.build(campaign) == 1200
    analyzed, tuples = await conn.fetchrow(
        "SELECT t.analyze_count, c.reltuples FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid "
        "WHERE t.relid = to_regclass('einmal.sends_c' || $1::bigint)",
        campaign,
    )  # its partition (docs/design.md#retention)
    assert analyzed == 2  # after the first chunk, and once the build is done
    assert tuples == 1200
