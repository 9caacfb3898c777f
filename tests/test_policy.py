"""The sending policy of a cluster, with real nodes: EINMAL_RATE_LIMIT and the quotas hold for every node
sharing the database together, counted where the messages arrive."""

from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.pipeline import approve, counts, node_env, seed, start_node, stop_node, wait_status
from tests.smtp_servers import FaultServer
from tests.test_budget import worst_window

pytestmark = pytest.mark.anyio


async def test_three_nodes_together_stay_within_one_rate_limit(conn: asyncpg.Connection, dsn: str,
                                                              tmp_path: Path) -> None:
    recipients = 450
    campaign = await seed(conn, [f"r{i}@example.com" for i in range(recipients)])
    with FaultServer() as server:
        env = node_env(dsn, server.port, EINMAL_RATE_LIMIT="100", EINMAL_SMTP_CONNECTIONS="4")
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(3)]
        try:
            await approve(conn, campaign)
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            codes = [await stop_node(node) for node in nodes]
        arrivals = [m.at for m in server.messages]
    assert codes == [0, 0, 0]
    assert await counts(conn, campaign) == {"sent": recipients}
    assert not server.duplicates()
    worst = worst_window(arrivals)
    span = max(arrivals) - min(arrivals)
    print(f"\n3 nodes at EINMAL_RATE_LIMIT=100: worst 1-second window {worst} messages, "
          f"mean {(len(arrivals) - 1) / span:.0f}/s over {span:.1f} s")
    assert worst <= 110, f"{worst} messages in one second from three nodes limited to 100/s together"


async def test_an_hour_quota_lets_exactly_that_many_out_and_the_rest_wait(conn: asyncpg.Connection, dsn: str,
                                                                         tmp_path: Path) -> None:
    campaign = await seed(conn, [f"q{i}@example.com" for i in range(80)])
    with FaultServer() as server:
        env = node_env(dsn, server.port, EINMAL_QUOTA_HOUR="50", EINMAL_SMTP_CONNECTIONS="4",
                       EINMAL_BATCH_SIZE="7")
        nodes = [start_node(env, tmp_path / f"node{i}.log") for i in range(2)]
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await server.arrived(50)
            await anyio.sleep(3)  # two nodes, each claiming every half second when idle, had time to overstep
            assert len(server.messages) == 50
            assert await counts(conn, campaign) == {"sent": 50, "queued": 30}
        finally:
            codes = [await stop_node(node) for node in nodes]
    assert codes == [0, 0]
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "sending"
