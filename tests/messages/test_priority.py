"""A message goes ahead of bulk mail on the same node (a node in this process, a real PostgreSQL, an aiosmtpd
sink on loopback): queued while a 5,000-recipient campaign sends at full speed, it arrives before most of the
campaign, its latency (from its POST's transaction to the sink's 250) a small multiple of the latency with no
campaign. And the cluster's rate limit still holds with messages: they take its slots like any row."""

import statistics
import time

import anyio
import asyncpg
import pytest

from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
from tests.messages.support import FROM
from tests.support.pipeline import Received as Sink
from tests.support.pipeline import approve, node_settings, recording_server, running_node, seed, wait_status

pytestmark = pytest.mark.anyio

RECIPIENTS = 5000


async def latency(conn: asyncpg.Connection, settings: Settings, account_id: int, sink: Sink, to: str) -> float:
    """Seconds from a message's queueing to the sink's acceptance of it."""
    began = time.monotonic()
    await messages.send(
        conn,
        queueing=Queueing.of(settings),
        account_id=account_id,
        to=to,
        subject="Reset",
        body_text="Link.",
        from_address=FROM,
    )
    with anyio.fail_after(30):
        while not (arrived := [t for t, rcpt, _ in sink.messages if rcpt == to]):
            await anyio.sleep(0.002)
    return arrived[0] - began


@pytest.mark.serial  # it measures each message's latency: other tests' load would measure the machine
async def test_a_message_queued_during_a_big_campaign_goes_first(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"bulk{i}@example.com" for i in range(RECIPIENTS)])
    account_id = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    sink = Sink()
    async with recording_server(sink) as port:
        settings = node_settings(dsn, port)
        async with running_node(settings):
            idle = [await latency(conn, settings, account_id, sink, f"idle{i}@example.org") for i in range(5)]
            await approve(conn, campaign)
            with anyio.fail_after(60):
                while len(sink.messages) < len(idle) + 300:  # the campaign at full speed
                    await anyio.sleep(0.01)
            busy, before = [], []
            for i in range(5):
                busy.append(await latency(conn, settings, account_id, sink, f"busy{i}@example.org"))
                before.append(sum(1 for _, rcpt, _ in sink.messages if rcpt.startswith("bulk")))
                await anyio.sleep(0.1)
            await wait_status(conn, campaign, "sent", timeout=300)
            started = min(t for t, rcpt, _ in sink.messages if rcpt.startswith("bulk"))
            ended = max(t for t, rcpt, _ in sink.messages if rcpt.startswith("bulk"))
    rate = RECIPIENTS / (ended - started)
    idle_median, busy_median = statistics.median(idle), statistics.median(busy)
    print(
        f"\nidle latency ms {[round(x * 1000) for x in idle]} median {idle_median * 1000:.0f}; "
        f"during the campaign ({rate:.0f} msg/s) {[round(x * 1000) for x in busy]} median {busy_median * 1000:.0f}; "
        f"ratio {busy_median / idle_median:.1f}; campaign messages before each: {before}"
    )
    assert max(before) < RECIPIENTS / 2, "every message arrived before most of the campaign"
    assert busy_median <= max(5 * idle_median, 0.5), (idle, busy)
    assert max(busy) <= 2.0, busy


async def test_the_cluster_rate_limit_holds_with_messages(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"bulk{i}@example.com" for i in range(40)])
    account_id = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    sink = Sink()
    rate = 20.0
    async with recording_server(sink) as port:
        settings = node_settings(dsn, port, rate_limit=rate)
        async with running_node(settings):
            began = await conn.fetchval("SELECT clock_timestamp()")
            await approve(conn, campaign)
            for i in range(40):
                await messages.send(
                    conn,
                    queueing=Queueing.of(settings),
                    account_id=account_id,
                    to=f"m{i}@example.org",
                    subject="S",
                    body_text="T",
                    from_address=FROM,
                )
            with anyio.fail_after(60):
                while len(sink.messages) < 80:
                    await anyio.sleep(0.05)
    # every row took a slot of the cluster's pace: 80 slots at 20/s end at least 4 s after the first
    last_slot = await conn.fetchval("SELECT next_slot FROM einmal.send_pace WHERE scope = 'all'")
    assert (last_slot - began).total_seconds() >= 80 / rate - 0.1, (began, last_slot)
    times = sorted(t for t, _, _ in sink.messages)
    # the claim holds at most a second of slots ahead: 80 messages at 20/s take at least (80 - 20) / 20 s
    span = times[-1] - times[0]
    busiest = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    print(f"\n80 messages (40 of them transactional) at {rate:g}/s: {span:.2f} s, at most {busiest} in any second")
    assert span >= (80 - rate) / rate * 0.95, span
    # the sink's times are taken in this process's event loop, shared with the node: a stall bunches them
    assert busiest <= 2 * rate, busiest
