"""The exactly-once pipeline end to end: real node processes, a real
PostgreSQL and a real SMTP server on loopback."""

import signal
from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.support.pipeline import (
    TAKEOVER_TIMEOUT,
    Received,
    approve,
    counts,
    node_env,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)

pytestmark = pytest.mark.anyio


def expected_ids(rows) -> set[str]:
    return {f"<campaign.{r['campaign_id']}.{r['subscriber_id']}@example.com>" for r in rows}


async def test_every_address_receives_exactly_one_message(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    addresses = [f"user{i}@example.com" for i in range(300)]
    duplicates = ["USER1@example.com", "User2@Example.com"]  # the same addresses in another case
    campaign = await seed(
        conn,
        addresses + duplicates,
        lists={"default": addresses + duplicates, "second": addresses[:50]},
        suppressed=["user3@example.com"],
    )
    received = Received()
    async with recording_server(received) as port:
        node = start_node(node_env(dsn, port), tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent")
        finally:
            assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    assert "restarting in" not in (tmp_path / "node.log").read_text(), "no actor failed on an ordinary day"
    odd = await conn.fetch("SELECT status, last_reply FROM einmal.sends WHERE status NOT IN ('sent', 'suppressed')")
    assert await counts(conn, campaign) == {"sent": 299, "suppressed": 1}, odd
    rcpts = Counter(rcpt.lower() for _, rcpt, _ in received.messages)
    assert max(rcpts.values()) == 1 and len(rcpts) == 299
    assert "user3@example.com" not in rcpts
    sent = await conn.fetch("SELECT campaign_id, subscriber_id FROM einmal.sends WHERE status = 'sent'")
    assert set(received.ids()) == expected_ids(sent) and len(received.ids()) == 299


async def test_two_nodes_share_one_campaign_and_send_each_address_once(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await seed(conn, [f"u{i}@example.com" for i in range(2000)])
    received = Received(delay=0.002)
    async with recording_server(received) as port:
        env = node_env(dsn, port, EINMAL_BATCH_SIZE="50")
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(2)]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=120)
        finally:
            assert [await stop_node(n) for n in nodes] == [0, 0]
    assert await counts(conn, campaign) == {"sent": 2000}
    assert len(received.ids()) == len(set(received.ids())) == 2000
    workers = await conn.fetch("SELECT DISTINCT split_part(claimed_by, '/', 1) AS node FROM einmal.sends")
    assert len(workers) == 2, "both nodes did work"


async def test_kill_9_mid_campaign_sends_nobody_twice(conn: asyncpg.Connection, dsn: str, tmp_path: Path) -> None:
    campaign = await seed(conn, [f"k{i}@example.com" for i in range(1500)])
    received = Received(delay=0.003)
    async with recording_server(received) as port:
        env = node_env(
            dsn,
            port,
            EINMAL_BATCH_SIZE="40",
            EINMAL_SMTP_CONNECTIONS="4",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
        )
        victim = start_node(env, tmp_path / "victim.log")
        await approve(conn, campaign)
        with anyio.fail_after(60):
            while len(received.messages) < 300:
                await anyio.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        held = await counts(conn, campaign)
        assert held.get("claimed", 0) + held.get("sending", 0) > 0, "the kill left rows held"
        survivor = start_node(env, tmp_path / "survivor.log")
        try:
            await wait_status(conn, campaign, "sent", timeout=120)
        finally:
            assert await stop_node(survivor) == 0
    final = await counts(conn, campaign)
    assert set(final) <= {"sent", "in_doubt"}
    assert final.get("in_doubt", 0) <= 4, "at most one message per connection of the killed node"
    ids = received.ids()
    assert len(ids) == len(set(ids)), "nobody received twice"
    sent = await conn.fetch("SELECT campaign_id, subscriber_id FROM einmal.sends WHERE status = 'sent'")
    assert expected_ids(sent) <= set(ids), "every row marked sent was received"
    assert len(ids) - len(sent) <= final.get("in_doubt", 0), "only in-doubt rows may be received unrecorded"


async def test_sigterm_during_a_busy_send_drains_and_exits_0(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    campaign = await seed(conn, [f"t{i}@example.com" for i in range(3000)])
    received = Received(delay=0.005)
    async with recording_server(received) as port:
        node = start_node(node_env(dsn, port, EINMAL_SHUTDOWN_GRACE_SECONDS="5"), tmp_path / "node.log")
        await approve(conn, campaign)
        with anyio.fail_after(30):
            while len(received.messages) < 200:
                await anyio.sleep(0.02)
        began = anyio.current_time()
        assert await stop_node(node, timeout=10) == 0, (tmp_path / "node.log").read_text()
        assert anyio.current_time() - began < 5
    final = await counts(conn, campaign)
    assert set(final) == {"sent", "queued"}, "nothing left claimed, sending or in doubt"
    assert final["sent"] == len(received.messages)
