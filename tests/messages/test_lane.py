"""A message's way past bulk mail, told without timing (docs/design.md#messages): the claimer claims a new
message while the feed is full of campaign rows, and the express connection sends it and records its 250 while
every campaign row's start is held up in the group commit (a real PostgreSQL, an aiosmtpd sink on loopback)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import asyncpg
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from actors import sender
from actors.batch import Batch
from actors.campaign_lane import Templates, campaign_turn, claim
from actors.feed import Feed
from actors.wiring import NodeWiring
from service import db
from service.messages import messages
from service.messages.messages import Queueing
from tests.messages.support import FROM, message_rows
from tests.support.pipeline import Received, node_settings, recording_server, seed
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio


async def sending_campaign(conn: asyncpg.Connection, node: NodeWiring, recipients: int) -> tuple[int, int]:
    """(campaign, account) of a campaign sending to `recipients` built rows."""
    campaign = await seed(conn, [f"bulk{i}@example.com" for i in range(recipients)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    assert await node.builder().build(campaign, chunk=1000) == recipients
    return campaign, await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)


@dataclass
class Sending:
    """A node's wiring with a sink on loopback, its token, a feed nothing else fills and the recorder's end."""

    node: NodeWiring
    sink: Received
    token: str
    feed: Feed
    to_recorder: MemoryObjectSendStream[Batch]
    recorded: MemoryObjectReceiveStream[Batch]


@asynccontextmanager
async def sending(dsn: str, **settings: object) -> AsyncIterator[Sending]:
    pool = await db.create_pool(dsn, size=4)
    sink = Received()
    try:
        async with recording_server(sink) as port:
            node = wiring(node_settings(dsn, port, batch_size=50, **settings), pool, dsn)
            to_recorder, recorded = anyio.create_memory_object_stream[Batch](100)
            with to_recorder, recorded:
                yield Sending(node, sink, node.fencing.new_token(), Feed(low_water=1), to_recorder, recorded)
    finally:
        await pool.close()


async def queue_message(conn: asyncpg.Connection, dsn: str, account_id: int, to: str) -> int:
    made = await messages.send(
        conn,
        queueing=Queueing.of(node_settings(dsn, 25)),
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
    node = wiring(node_settings(dsn, 25, batch_size=20), pool, dsn)
    token = node.fencing.new_token()
    try:
        _, account_id = await sending_campaign(conn, node, 100)
        feed = Feed(low_water=1)  # nothing takes its rows: once a batch is in, it stays full
        async with anyio.create_task_group() as tg:
            await tg.start(node.listener().run)
            tg.start_soon(node.pipeline().claimer(token, feed).run)
            with anyio.fail_after(20):
                while not feed.rows:
                    await anyio.sleep(0.01)
            assert not feed.room.is_set() and len(feed.rows) == 20, "the feed is full of one campaign batch"
            message = await queue_message(conn, dsn, account_id, "reset@example.org")
            with anyio.fail_after(10):  # notified (NOTIFY einmal_message), claimed at once, not at the next room
                while not feed.messages_held:
                    await anyio.sleep(0.01)
            assert [batch.campaign_id for batch, _ in feed.messages] == [message]
            assert not feed.room.is_set() and len(feed.rows) == 20, "no campaign row was taken or claimed meanwhile"
            node.stopping.set()
            node.wakeups.claimer.set()
            tg.cancel_scope.cancel()
    finally:
        await pool.close()


async def test_the_express_connection_sends_a_message_while_the_group_commit_is_held_up(
    conn: asyncpg.Connection, dsn: str
) -> None:
    async with sending(dsn, smtp_connections=sender.EXPRESS_FROM) as it:
        node, token, feed, claims = it.node, it.token, it.feed, it.node.sections.pipeline.claimer
        campaign, account_id = await sending_campaign(conn, node, 10)
        async with db.actor_connection(node.pool, "claimer", token, 10) as claiming:
            template = await Templates(claims, claiming).get(campaign)
            assert template is not None
            batch = await claim(claims, node.metrics, claiming, token, campaign, account_id, template)
            assert batch is not None and len(batch.rows) == 10
            # every campaign row locked by another transaction: the group commit that would start one waits
            blocker = await asyncpg.connect(dsn)
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("SELECT 1 FROM einmal.sends WHERE campaign_id = $1 FOR UPDATE", campaign)
            feed.put(batch)
            message = await queue_message(conn, dsn, account_id, "reset@example.org")
            async with anyio.create_task_group() as tg:
                await tg.start(node.pipeline().sender(token, feed).run, it.to_recorder)
                with anyio.fail_after(5):  # the regular connection's step is in, and held
                    while not await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    ):
                        await anyio.sleep(0.01)
                lane = node.pipeline().claimer(token, feed).messages
                assert await lane.claim(claiming, account_id, 10) == 1
                with anyio.fail_after(10):
                    while not [r for r in await message_rows(conn) if r["status"] == "sent"]:
                        await anyio.sleep(0.01)
                assert [rcpt for _, rcpt, _ in it.sink.messages] == ["reset@example.org"], "the message alone"
                statuses = await conn.fetch("SELECT DISTINCT status FROM einmal.sends WHERE campaign_id = $1", campaign)
                assert [r["status"] for r in statuses] == ["claimed"], "no campaign row started meanwhile"
                await lock.rollback()
                await blocker.close()
                with anyio.fail_after(20):
                    while len(it.sink.messages) < 11:
                        await anyio.sleep(0.01)
                feed.close()
                feed.claimer_done.set()
    rows = await conn.fetch("SELECT status, count(*) FROM einmal.sends GROUP BY status")
    assert {r["status"]: r["count"] for r in rows} == {"sent": 11}
    assert [r["campaign_id"] for r in await message_rows(conn)] == [message]


async def test_a_message_sent_wakes_the_scheduler_only_when_a_campaigns_batch_is_done(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """The scheduler is nudged when a campaign's batch is settled and the campaign lane is empty (the campaign may
    be done), never for a message, a list's confirmations or a sequence's step, which are never done: a node
    sending only messages ticked, and opened a database connection, for most of them (14 a second at 20
    messages a second, bench.messages)."""
    async with sending(dsn) as it:
        node, token, feed, claims = it.node, it.token, it.feed, it.node.sections.pipeline.claimer
        campaign, account_id = await sending_campaign(conn, node, 2)
        await node.wakeups.scheduler.wait(0)  # the build's nudge, taken
        async with (
            db.actor_connection(node.pool, "claimer", token, 10) as claiming,
            anyio.create_task_group() as tg,
        ):
            await tg.start(node.pipeline().sender(token, feed).run, it.to_recorder)
            lane = node.pipeline().claimer(token, feed).messages
            for n, to in enumerate(["reset@example.org", "again@example.org"], 1):
                await queue_message(conn, dsn, account_id, to)
                assert await lane.claim(claiming, account_id, 10) == 1
                with anyio.fail_after(10):
                    done = await it.recorded.receive()  # its batch settled, with the campaign lane empty
                assert done.message and [rcpt for _, rcpt, _ in it.sink.messages][-1] == to
                assert not await node.wakeups.scheduler.wait(0), f"message {n} woke the scheduler"
            templates = Templates(claims, claiming)
            for finishes in (False, True):  # a list's confirmations or a step's rows; a campaign's
                listed = {"id": campaign, "account_id": account_id, "finishes": finishes}
                batch, _ = await campaign_turn(claims, node.metrics, claiming, token, feed, templates, [listed], 1)
                assert batch is not None and len(batch.rows) == 1 and batch.finishes is finishes
                feed.put(batch)
                with anyio.fail_after(10):
                    assert (await it.recorded.receive()) is batch
                assert await node.wakeups.scheduler.wait(0) is finishes, f"finishes={finishes}"
            feed.close()
            feed.claimer_done.set()
