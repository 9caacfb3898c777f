"""A node's liveness (docs/design.md#liveness): its row's heartbeat advances every tick, so a node that is
working is never taken for dead, by itself or by another node, however long its campaign lasts."""

import itertools

import anyio
import asyncpg
import pytest

from tests.support.pipeline import (
    Received,
    approve,
    counts,
    node_settings,
    recording_server,
    running_node,
    seed,
    wait_status,
)

pytestmark = pytest.mark.anyio

TICK, TIMEOUT = 0.25, 5.0  # a loaded machine may stall a live node a few ticks, never twenty


async def test_a_live_nodes_heartbeat_advances_and_a_working_node_is_never_declared_dead(
    conn: asyncpg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="einmal")
    # at 10 a second, 70 messages keep the node sending for longer than its timeout
    campaign = await seed(conn, [f"h{i}@example.com" for i in range(70)])
    seen: list[tuple] = []  # (started_at, heartbeat_at) of the node's row, each time its heartbeat moved
    async with recording_server(Received()) as port:
        settings = node_settings(
            dsn, port, tick_seconds=TICK, node_timeout_seconds=TIMEOUT, rate_limit=10, node_id="alive"
        )
        async with running_node(settings):
            await approve(conn, campaign)
            with anyio.fail_after(60):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    row = await conn.fetchrow(
                        "SELECT started_at, heartbeat_at FROM einmal.nodes WHERE id LIKE 'alive/%'"
                    )
                    if row is not None and (not seen or tuple(row) != seen[-1]):
                        seen.append(tuple(row))
                    await anyio.sleep(TICK / 2)
            await wait_status(conn, campaign, "sent")
    span = (seen[-1][1] - seen[0][1]).total_seconds()
    print(f"\n{len(seen)} heartbeats seen over {span:.1f} s (timeout {TIMEOUT:g} s)")
    starts = sorted({started.isoformat() for started, _ in seen})
    assert len(starts) == 1, f"the node's row was removed as dead and made again: started at {starts}"
    assert span > TIMEOUT, f"the campaign outlasted the node timeout: {span:.1f} s of heartbeats"
    assert all(a[1] < b[1] for a, b in itertools.pairwise(seen)), "each heartbeat later than the one before"
    assert "dead node" not in caplog.text, caplog.text
    assert await counts(conn, campaign) == {"sent": 70}
