"""A message's way past bulk mail, told without timing (docs/design.md#messages): the claimer claims a new
message while the feed is full of campaign rows (a real PostgreSQL)."""

import anyio
import asyncpg
import pytest

from actors import builder, claimer
from actors.feed import Feed
from actors.listener import Listener
from service import db
from service.context import NodeContext
from service.messages import messages
from tests.messages.support import FROM
from tests.support.pipeline import node_settings, seed

pytestmark = pytest.mark.anyio


async def sending_campaign(conn: asyncpg.Connection, ctx: NodeContext, recipients: int) -> tuple[int, int]:
    """(campaign, account) of a campaign sending to `recipients` built rows."""
    campaign = await seed(conn, [f"bulk{i}@example.com" for i in range(recipients)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    assert await builder.build(ctx, campaign, chunk=1000) == recipients
    return campaign, await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)


async def queue_message(conn: asyncpg.Connection, ctx: NodeContext, account_id: int, to: str) -> int:
    made = await messages.send(
        conn,
        settings=ctx.settings,
        account_id=account_id,
        to=to,
        subject="Reset",
        body_text="Your link.",
        from_address=FROM,
    )
    return made.id


async def test_a_new_message_is_claimed_while_the_feed_is_full_of_campaign_rows(
    conn: asyncpg.Connection, dsn: str
) -> None:
    pool = await db.create_pool(dsn, size=3)
    ctx = NodeContext(node_settings(dsn, 25, batch_size=20), pool, dsn)
    token = ctx.new_token()
    try:
        _, account_id = await sending_campaign(conn, ctx, 100)
        feed = Feed(low_water=1)  # nothing takes its rows: once a batch is in, it stays full
        async with anyio.create_task_group() as tg:
            await tg.start(Listener(ctx).run)
            tg.start_soon(claimer.run, ctx, token, feed)
            with anyio.fail_after(20):
                while not feed.rows:
                    await anyio.sleep(0.01)
            assert not feed.room.is_set() and len(feed.rows) == 20, "the feed is full of one campaign batch"
            message = await queue_message(conn, ctx, account_id, "reset@example.org")
            with anyio.fail_after(10):  # notified (NOTIFY einmal_message), claimed at once, not at the next room
                while not feed.messages_held:
                    await anyio.sleep(0.01)
            assert [batch.campaign_id for batch, _ in feed.messages] == [message]
            assert not feed.room.is_set() and len(feed.rows) == 20, "no campaign row was taken or claimed meanwhile"
            ctx.stopping.set()
            ctx.claim_nudge.set()
            tg.cancel_scope.cancel()
    finally:
        await pool.close()
