"""One of a node's database connections goes bad while the node goes on: the
backend serving its sender freezes (SIGSTOP, on a throwaway cluster of the
test's own), or the claimer's backend is terminated while SMTP transactions
are on the wire. Nothing may stay held, nothing on the wire may be dropped,
and nobody may get a message twice."""

import os
import re
import signal
from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from service import db
from tests.support.pgcluster import PgCluster, cluster_dsn, pg_cluster  # noqa: F401  (fixtures)
from tests.support.pipeline import Received, approve, counts, node_env, recording_server, seed, start_node, stop_node
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

CONNECTIONS = 4


async def backend_of(conn: asyncpg.Connection, actor: str, node_id: str) -> int:
    """The pid of the backend serving `actor` of node `node_id` (its connection's application_name)."""
    with anyio.fail_after(30):
        while True:
            pid = await conn.fetchval(
                """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND application_name LIKE $1""",
                f"einmal {actor} {node_id}/%",
            )
            if pid:
                return pid
            await anyio.sleep(0.05)


async def freeze_while_idle(conn: asyncpg.Connection, pid: int) -> None:
    """SIGSTOP the backend between two statements: it holds no row lock (a backend frozen inside a statement
    keeps the locks of the rows it touched until it runs again;
    docs/operations/database.md#a-hung-or-lost-database-connection)."""
    with anyio.fail_after(60):
        while True:
            if await conn.fetchval("SELECT state FROM pg_stat_activity WHERE pid = $1", pid) == "idle":
                os.kill(pid, signal.SIGSTOP)
                # a stopped backend cannot change its own state any more: this read is the final word
                if await conn.fetchval("SELECT state FROM pg_stat_activity WHERE pid = $1", pid) == "idle":
                    return
                os.kill(pid, signal.SIGCONT)
            await anyio.sleep(0.001)


async def test_a_frozen_sender_backend_does_not_hold_rows_and_nobody_gets_two_messages(
    cluster_dsn: str, tmp_path: Path
) -> None:
    addresses = [f"h{i}@example.com" for i in range(600)]
    conn = await asyncpg.connect(cluster_dsn)
    campaign = await seed(conn, addresses)
    received = Received(delay=0.01)
    frozen_log, other_log = tmp_path / "frozen.log", tmp_path / "other.log"
    pid = None
    async with recording_server(received) as port:
        env = node_env(
            cluster_dsn,
            port,
            EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
            EINMAL_BATCH_SIZE="50",
            EINMAL_DB_TIMEOUT_SECONDS="2",
        )
        first = start_node({**env, "EINMAL_NODE_ID": "hung"}, frozen_log)
        other = None
        try:
            await approve(conn, campaign)
            with anyio.fail_after(60):
                while len(received.messages) < 100:
                    await anyio.sleep(0.02)
            pid = await backend_of(conn, "sender", "hung")
            await freeze_while_idle(conn, pid)
            frozen_at = anyio.current_time()
            held = await conn.fetchval(
                """
                SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND claimed_by LIKE 'hung/%'
                AND status IN ('claimed', 'sending')""",
                campaign,
            )
            other = start_node({**env, "EINMAL_NODE_ID": "other"}, other_log)
            # the whole campaign goes out while the backend stays frozen: nothing the frozen connection's
            # pipeline held may stay held (before: 10x the node timeout and more)
            with anyio.fail_after(90):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    assert first.poll() is None, frozen_log.read_text()
                    await anyio.sleep(0.1)
            during, took = await counts(conn, campaign), anyio.current_time() - frozen_at
        finally:
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            codes = [await stop_node(first)] + ([await stop_node(other)] if other else [])
        assert codes == [0, 0], frozen_log.read_text()
    try:
        final = await counts(conn, campaign)
    finally:
        await conn.close()
    ids = Counter(received.ids())
    assert not {i: n for i, n in ids.items() if n > 1}, "nobody received twice"
    assert final == {"sent": len(addresses)}, final
    assert len(ids) == len(addresses), "everybody received once"
    log = frozen_log.read_text()
    assert re.search(r"actor send pipeline failed \(.*did not answer the sender within 2s", log), log
    print(
        f"\nfrozen sender backend: {held} rows held at SIGSTOP; campaign sent {took:.1f}s later while still "
        f"frozen {during}; final {final}"
    )


async def test_losing_the_claimers_connection_finishes_the_messages_on_the_wire(
    cluster_dsn: str, tmp_path: Path
) -> None:
    addresses = [f"c{i}@example.com" for i in range(60)]
    conn = await asyncpg.connect(cluster_dsn)
    campaign = await seed(conn, addresses)
    log = tmp_path / "node.log"
    with FaultServer() as server:
        server.inject("data_end", None, delay=1.0)  # every message waits a second for its 250
        proc = start_node(
            node_env(
                cluster_dsn,
                server.port,
                EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
                EINMAL_BATCH_SIZE="8",
                EINMAL_NODE_ID="lost",
            ),
            log,
        )
        try:
            await approve(conn, campaign)
            pid = await backend_of(conn, "claimer", "lost")
            with anyio.fail_after(60):
                await server.arrived(CONNECTIONS + 1)  # the second group is on the wire, its replies pending
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
            with anyio.fail_after(120):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    assert proc.poll() is None, log.read_text()
                    await anyio.sleep(0.1)
        finally:
            code = await stop_node(proc)
        assert code == 0, log.read_text()
        duplicates = server.duplicates()
        delivered = {m.message_id for m in server.messages}
    try:
        final = await counts(conn, campaign)
        attempts = await conn.fetchval("SELECT max(attempts) FROM einmal.sends WHERE campaign_id = $1", campaign)
    finally:
        await conn.close()
    text = log.read_text()
    assert not duplicates, duplicates
    assert final == {"sent": len(addresses)}, f"nothing in doubt, nothing lost: {final}"
    assert len(delivered) == len(addresses)
    assert attempts == 0, "no row lost an attempt to the restart"
    failed = [line for line in text.splitlines() if "actor send pipeline failed" in line]
    assert failed, text
    assert "DatabaseConnectionLost: the claimer's connection to PostgreSQL was closed" in failed[0], failed[0]
    assert "released back to the pool" not in text, text
    print(f"\nclaimer's backend terminated mid-group: final {final}; log: {failed[0]}")


async def test_returning_a_dead_nodes_rows_does_not_wait_for_a_row_another_backend_has_locked(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, [f"l{i}@example.com" for i in range(6)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
        SELECT $1::bigint, account_id, id, email, lower(email), 'campaign:' || $1::bigint || ':' || id
        FROM einmal.subscribers""",
        campaign,
    )
    await conn.execute("INSERT INTO einmal.nodes (id, heartbeat_at) VALUES ('gone/1', now() - interval '1 hour')")
    await conn.execute(
        "UPDATE einmal.sends SET status = 'claimed', claimed_by = 'gone/1' WHERE campaign_id = $1", campaign
    )
    locked = await conn.fetchval("SELECT min(id) FROM einmal.sends WHERE campaign_id = $1", campaign)
    holder = await asyncpg.connect(dsn)  # a backend that holds one row's lock and does not move
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM einmal.sends WHERE id = $1 FOR UPDATE", locked)
            with anyio.fail_after(60):  # before: waits for the lock as long as it is held
                rescued = await conn.fetchrow(
                    *db.sql("node_rescue", node_timeout_seconds=3.0, in_doubt="hold", dead_tokens=[], max_attempts=5)
                )
            assert rescued["queued"] == 5, dict(rescued)
        again = await conn.fetchrow(
            *db.sql("node_rescue", node_timeout_seconds=3.0, in_doubt="hold", dead_tokens=[], max_attempts=5)
        )  # the next tick
    finally:
        await holder.close()
    assert again["queued"] == 1, "the token without a node row is still recognised at the next tick"
    assert await counts(conn, campaign) == {"queued": 6}
