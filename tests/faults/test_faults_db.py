"""PostgreSQL faults in the middle of a campaign: the server restarted or gone
for longer than the supervisor's restart limit allows (on a throwaway cluster
of the test's own), a node started while it is down, and einmal's connections
terminated. The node's actors fail, the supervisor restarts them without
counting an unreachable database against its limit, the answers the node holds
are recorded when the database is back, and sending resumes with nobody
missed and nobody sent twice."""

import re
from collections import Counter
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from actors import node
from actors.wiring import NodeWiring
from tests.conftest import with_database
from tests.support.pgcluster import PgCluster, cluster_dsn, pg_cluster  # noqa: F401  (fixtures)
from tests.support.pipeline import (
    NODE_TIMEOUT,
    Received,
    approve,
    counts,
    node_env,
    node_settings,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.smtp_servers import free_port

pytestmark = pytest.mark.anyio

CONNECTIONS = 4


def expected_ids(rows) -> set[str]:
    return {f"<campaign.{r['campaign_id']}.{r['subscriber_id']}@example.com>" for r in rows}


async def wait_received(received: Received, count: int, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while len(received.messages) < count:
            await anyio.sleep(0.02)


async def assert_each_address_once(
    conn: asyncpg.Connection, campaign: int, received: Received, in_doubt_bound: int
) -> dict[str, int]:
    final = await counts(conn, campaign)
    assert set(final) <= {"sent", "in_doubt", "suppressed"}, final
    assert final.get("in_doubt", 0) <= in_doubt_bound, final
    ids = received.ids()
    assert len(ids) == len(set(ids)), f"received twice: {[i for i, n in Counter(ids).items() if n > 1][:5]}"
    sent = await conn.fetch("SELECT campaign_id, subscriber_id FROM einmal.sends WHERE status = 'sent'")
    assert expected_ids(sent) <= set(ids), "every row marked sent was received"
    assert len(ids) - len(sent) <= final.get("in_doubt", 0), "only in-doubt rows may be received unrecorded"
    return final


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_a_database_restart_mid_campaign_resumes_sending_without_duplicates(
    pg_cluster: PgCluster, cluster_dsn: str, tmp_path: Path, mode: str
) -> None:
    addresses = [f"r{i}@example.com" for i in range(1200)]
    conn = await asyncpg.connect(cluster_dsn)
    campaign = await seed(conn, addresses)
    await conn.close()
    received = Received(delay=0.004)
    log = tmp_path / "node.log"
    async with recording_server(received) as port:
        env = node_env(cluster_dsn, port, EINMAL_BATCH_SIZE="40", EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS))
        proc = start_node(env, log)
        try:
            conn = await asyncpg.connect(cluster_dsn)
            await approve(conn, campaign)
            await conn.close()
            await wait_received(received, 300)
            await anyio.to_thread.run_sync(pg_cluster.stop, mode)
            down_at = len(received.messages)
            await anyio.sleep(3)  # a restart of a few seconds: longer than a plain pg_ctl restart
            await anyio.to_thread.run_sync(pg_cluster.start)
            conn = await asyncpg.connect(cluster_dsn)
            with anyio.fail_after(60):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    assert proc.poll() is None, f"the node gave up during a database restart:\n{log.read_text()}"
                    await anyio.sleep(0.1)
        finally:
            code = await stop_node(proc)
        assert code == 0, log.read_text()
    try:
        final = await assert_each_address_once(conn, campaign, received, in_doubt_bound=CONNECTIONS)
        assert final["sent"] + final.get("in_doubt", 0) == len(addresses)
    finally:
        await conn.close()
    restarts = Counter(re.findall(r"actor (.+?) failed", log.read_text()))
    assert restarts, "the actors saw the restart"
    print(f"\n{mode}: {down_at} received before the stop; restarts {dict(restarts)}; final {final}")


# a limit today's supervisor reaches within two seconds of an outage: every try of an actor was a failure
SHORT_LIMIT = {"EINMAL_RESTART_INTENSITY": "2", "EINMAL_RESTART_PERIOD_SECONDS": "30"}
OUTAGE_SECONDS = 10


async def status(client: httpx.AsyncClient, url: str) -> int:
    """The HTTP status of a GET, or 0 when nothing answers."""
    try:
        return (await client.get(url)).status_code
    except httpx.TransportError:
        return 0


async def wait_sent(conn: asyncpg.Connection, campaign: int, proc, log, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
            assert proc.poll() is None, f"the node exited:\n{log.read_text()}"
            await anyio.sleep(0.1)


# under resend with a node timeout shorter than the outage, a row whose answer the node holds is queued
# again if its token is taken for a dead node's before the answer is written: it would be sent twice
@pytest.mark.parametrize(("in_doubt", "node_timeout"), [("hold", NODE_TIMEOUT), ("resend", OUTAGE_SECONDS / 2)])
async def test_a_node_rides_out_an_outage_longer_than_its_restart_limit_and_records_what_it_holds(
    pg_cluster: PgCluster,
    cluster_dsn: str,
    tmp_path: Path,
    in_doubt: str,
    node_timeout: float,
) -> None:
    addresses = [f"o{i}@example.com" for i in range(1200)]
    conn = await asyncpg.connect(cluster_dsn)
    campaign = await seed(conn, addresses)
    await conn.close()
    received = Received(delay=0.004)
    log, http_port = tmp_path / "node.log", free_port()
    ready = f"http://127.0.0.1:{http_port}/readyz"
    async with recording_server(received) as port, httpx.AsyncClient(timeout=10) as client:
        env = node_env(
            cluster_dsn,
            port,
            EINMAL_BATCH_SIZE="40",
            EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
            EINMAL_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
            EINMAL_IN_DOUBT=in_doubt,
            EINMAL_NODE_TIMEOUT_SECONDS=str(node_timeout),
            **SHORT_LIMIT,
        )
        proc = start_node(env, log)
        try:
            conn = await asyncpg.connect(cluster_dsn)
            await approve(conn, campaign)
            await conn.close()
            await wait_received(received, 300)
            await anyio.to_thread.run_sync(pg_cluster.stop, "fast")
            down_at = len(received.messages)
            readiness = []
            for _ in range(OUTAGE_SECONDS):
                await anyio.sleep(1)
                readiness.append(await status(client, ready))
                assert proc.poll() is None, f"the node gave up during the outage:\n{log.read_text()}"
            assert set(readiness) == {503}, readiness
            outage_lines = Counter(re.findall(r"actor (.+?) failed \(", log.read_text()))
            web_lines = log.read_text().count("einmal.http: database unreachable")
            await anyio.to_thread.run_sync(pg_cluster.start)
            conn = await asyncpg.connect(cluster_dsn)
            await wait_sent(conn, campaign, proc, log)
            # ready again once every actor runs: the last restarts within the supervisor's backoff (5 s at most)
            with anyio.fail_after(15):
                while (await client.get(ready)).status_code != 200:
                    await anyio.sleep(0.2)
        finally:
            code = await stop_node(proc)
        assert code == 0, log.read_text()
    try:
        final = await assert_each_address_once(conn, campaign, received, in_doubt_bound=0)
        assert final == {"sent": len(addresses)}, final
        assert len(set(received.ids())) == len(addresses)
    finally:
        await conn.close()
    # one line for each actor as the outage begins, not one per try; one for the readiness probes
    assert outage_lines and max(outage_lines.values()) <= 2, (outage_lines, log.read_text())
    assert web_lines == 1, log.read_text()
    print(
        f"\n{in_doubt}, node timeout {node_timeout:g}s: {down_at} received before a {OUTAGE_SECONDS}s outage; "
        f"{outage_lines.total()} failure lines ({dict(outage_lines)}); final {final}"
    )


async def test_a_node_started_while_the_database_is_down_waits_for_it_then_sends(
    pg_cluster: PgCluster, cluster_dsn: str, tmp_path: Path
) -> None:
    addresses = [f"w{i}@example.com" for i in range(200)]
    conn = await asyncpg.connect(cluster_dsn)
    campaign = await seed(conn, addresses)
    await approve(conn, campaign)
    await conn.close()
    received = Received()
    log = tmp_path / "node.log"
    async with recording_server(received) as port:
        await anyio.to_thread.run_sync(pg_cluster.stop, "fast")
        proc = start_node(node_env(cluster_dsn, port, **SHORT_LIMIT), log)
        try:
            with anyio.fail_after(30):  # the process starts (slowly, on a loaded machine), finds no database
                while "waiting for PostgreSQL" not in log.read_text():
                    assert proc.poll() is None, f"the node did not wait for the database:\n{log.read_text()}"
                    await anyio.sleep(0.1)
            for _ in range(3):
                await anyio.sleep(1)
                assert proc.poll() is None, f"the node stopped waiting:\n{log.read_text()}"
            await anyio.to_thread.run_sync(pg_cluster.start)
            conn = await asyncpg.connect(cluster_dsn)
            await wait_sent(conn, campaign, proc, log)
        finally:
            code = await stop_node(proc)
        assert code == 0, log.read_text()
    try:
        final = await assert_each_address_once(conn, campaign, received, in_doubt_bound=0)
        assert final == {"sent": len(addresses)}, final
    finally:
        await conn.close()


async def test_a_node_told_not_to_wait_exits_at_once_with_one_line_when_the_database_is_down(
    pg_cluster: PgCluster, cluster_dsn: str, tmp_path: Path
) -> None:
    log = tmp_path / "node.log"
    await anyio.to_thread.run_sync(pg_cluster.stop, "fast")
    proc = start_node(node_env(cluster_dsn, 2525, EINMAL_DB_WAIT_SECONDS="0"), log)
    with anyio.fail_after(30):
        while proc.poll() is None:
            await anyio.sleep(0.05)
    lines = log.read_text().strip().splitlines()
    assert proc.returncode == 1, lines
    assert "Traceback" not in log.read_text()
    assert lines[-1].startswith("einmal: cannot reach PostgreSQL at 127.0.0.1:"), lines


@asynccontextmanager
async def node_in_loop(settings):
    """A node in the test's event loop; yields its wiring, drains on exit."""
    stop = anyio.Event()
    contexts: list[NodeWiring] = []
    codes: list[int] = []

    async def serve() -> None:
        codes.append(await node.serve(settings, stop, on_start=contexts.append))

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            with anyio.fail_after(10):
                while not contexts:
                    await anyio.sleep(0.01)
            yield contexts[0]
        finally:
            stop.set()
    assert codes == [0]


async def test_an_opt_out_committed_while_every_connection_was_killed_is_still_honoured(
    conn: asyncpg.Connection, dsn: str
) -> None:
    addresses = [f"p{i:04d}@example.com" for i in range(800)]
    target = addresses[-1]  # claimed last: rows are claimed in id order
    campaign = await seed(conn, addresses)
    account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    database = await conn.fetchval("SELECT current_database()")
    received = Received(delay=0.004)
    admin = await asyncpg.connect(with_database(dsn, "postgres"))
    async with recording_server(received) as port:
        settings = node_settings(dsn, port, batch_size=40, smtp_connections=CONNECTIONS)
        async with node_in_loop(settings) as wired:
            await approve(conn, campaign)
            await wait_received(received, 100)
            # nobody may connect, then every connection of einmal's dies, the LISTEN one included
            await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            killed = await conn.fetchval("""
                SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()""")
            assert killed >= 2, "the pool's connections and the listener's"
            # the opt-out commits while no node is listening: its notification is lost
            await conn.execute(
                "INSERT INTO einmal.suppressions (account_id, email_lower) VALUES ($1, $2)", account, target
            )
            await anyio.sleep(0.5)
            assert (account, target) not in wired.suppressions.suppressed, "the notification reached nobody"
            await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
            with anyio.fail_after(15):
                while (account, target) not in wired.suppressions.suppressed:
                    await anyio.sleep(0.05)
            await wait_status(conn, campaign, "sent", timeout=60)
    await admin.close()
    status = await conn.fetchval(
        "SELECT status FROM einmal.sends WHERE campaign_id = $1 AND email = $2", campaign, target
    )
    assert status == "suppressed"
    assert target not in {rcpt for _, rcpt, _ in received.messages}
    final = await assert_each_address_once(conn, campaign, received, in_doubt_bound=CONNECTIONS)
    assert final["sent"] + final.get("in_doubt", 0) == len(addresses) - 1
    print(f"\nterminated {killed} connections; final {final}")
