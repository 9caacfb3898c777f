"""The recipient build: one row per address, the oldest confirmed subscriber
wins, copies split by a chunk boundary still count once, a rerun adds nothing."""

import asyncpg
import pytest

from actors import builder
from service import db
from service.context import NodeContext
from service.settings import Settings
from tests.pipeline import seed

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ctx(dsn: str):
    pool = await db.create_pool(dsn, size=2)
    yield NodeContext(Settings(database_url=dsn), pool, dsn)
    await pool.close()


async def test_chunks_hold_every_copy_of_their_addresses(conn: asyncpg.Connection, ctx: NodeContext) -> None:
    # five copies of b@ (different case) straddle every chunk boundary of size 2
    addresses = ["a@example.com", "B@example.com", "b@EXAMPLE.com", "b@example.com", "B@EXAMPLE.COM",
                 "b@Example.com", "c@example.com", "d@example.com"]
    campaign = await seed(conn, addresses, suppressed=["d@example.com"])
    await conn.execute("UPDATE einmal.subscribers SET status = 'unsubscribed' WHERE email = 'B@example.com'")
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    assert await builder.build(ctx, campaign, chunk=2) == 4
    rows = await conn.fetch("SELECT email, status FROM einmal.sends ORDER BY email_lower")
    # the oldest confirmed copy of b@ wins: B@example.com is unsubscribed, b@EXAMPLE.com is next
    assert [tuple(r) for r in rows] == [("a@example.com", "queued"), ("b@EXAMPLE.com", "queued"),
                                         ("c@example.com", "queued"), ("d@example.com", "suppressed")]
    assert await conn.fetchval("SELECT recipients_built_at IS NOT NULL FROM einmal.campaigns") is True
    assert await builder.build(ctx, campaign, chunk=2) == 0


async def test_a_build_stopped_half_way_resumes_without_adding_twice(conn: asyncpg.Connection,
                                                                    ctx: NodeContext) -> None:
    campaign = await seed(conn, [f"u{i:03}@example.com" for i in range(50)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    first = await conn.fetchrow(db.query("recipients_build_chunk"), campaign, "", 20)  # a crash after one chunk
    assert first["inserted"] == 20
    assert await builder.build(ctx, campaign, chunk=7) == 30
    assert await conn.fetchval("SELECT count(DISTINCT email_lower) FROM einmal.sends") == 50
