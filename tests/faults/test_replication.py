"""What the promise needs of replication, on real streaming replication (pg_basebackup standbys of a
throwaway primary; docs/design.md §4).

An asynchronous standby is one warning line and a /readyz note, a synchronous one neither; with
EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION the node is not ready and claims nothing until a standby is
synchronous. Through an asynchronous failover that lost a row's move to `sending`, the answer the node
held is recorded on the new primary (the row is `claimed` there, under the same token) instead of
being dropped and the message sent again; the node names the failover (a new timeline) in one line."""

import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import asyncpg
import httpx
import pytest

from tests.support.pgcluster import PgCluster
from tests.support.pipeline import Received, approve, counts, node_settings, recording_server, running_node, seed
from tests.support.smtp_servers import free_port

pytestmark = pytest.mark.anyio

WARNING = "none synchronous (synchronous_standby_names is empty)"


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[PgCluster, PgCluster]]:
    """A primary and an asynchronous standby streaming from it."""
    primary = PgCluster.create()
    standby = None
    try:
        primary.start()
        standby = PgCluster.standby_of(primary)
        standby.start()
        yield primary, standby
    finally:
        for cluster in (standby, primary):
            if cluster is not None:
                cluster.destroy()


@pytest.fixture
async def primary(replicated: tuple[PgCluster, PgCluster]) -> AsyncIterator[PgCluster]:
    """The primary, its standby streaming asynchronously at the start and at the end of the test."""
    primary, _ = replicated
    await primary.streaming(sync=False)
    yield primary
    await primary.configure(synchronous_standby_names="")
    await primary.streaming(sync=False)


async def database(cluster: PgCluster) -> tuple[str, asyncpg.Connection]:
    url = await cluster.migrated_database(f"einmal_r_{uuid.uuid4().hex[:12]}")
    return url, await asyncpg.connect(url)


async def ticks(conn: asyncpg.Connection, n: int) -> None:
    """Wait for `n` more heartbeats of the one node: each is a whole scheduler tick, replication check
    included, and a nudge of the claimer when a campaign is sending."""
    seen = await conn.fetchval("SELECT max(heartbeat_at) FROM einmal.nodes")
    with anyio.fail_after(60):
        while n:
            await anyio.sleep(0.05)
            now = await conn.fetchval("SELECT max(heartbeat_at) FROM einmal.nodes")
            if now is not None and (seen is None or now > seen):
                seen, n = now, n - 1


async def readiness(client: httpx.AsyncClient, url: str, wanted) -> dict:
    """/readyz's answer once `wanted(status, body)` holds."""
    with anyio.fail_after(60):
        while True:
            try:
                answer = await client.get(url)
                if wanted(answer.status_code, answer.json()):
                    return answer.json()
            except httpx.TransportError:
                pass
            await anyio.sleep(0.05)


def warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and text in r.getMessage()]


async def test_an_async_standby_is_one_warning_and_a_readiness_note_and_a_synchronous_one_neither(
        primary: PgCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="einmal")
    url, conn = await database(primary)
    http = f"127.0.0.1:{free_port()}"
    try:
        async with recording_server(Received()) as port, httpx.AsyncClient() as client:
            async with running_node(node_settings(url, port, http_address=http)):
                body = await readiness(client, f"http://{http}/readyz", lambda status, _: status == 200)
                assert body["ready"] is True
                [note] = body["notes"]
                assert note.startswith("replication: 1 standby(s), ") and WARNING in note, body
                await ticks(conn, 3)
                assert len(warnings(caplog, "replication: ")) == 1, "one line, not one a tick"

                await primary.configure(synchronous_standby_names="*")
                assert await primary.streaming(sync=True) == "sync"
                body = await readiness(client, f"http://{http}/readyz", lambda status, b: "notes" not in b)
                assert body == {"ready": True}
                assert "replication: 1 synchronous standby(s)" in caplog.text
                await ticks(conn, 2)
                assert len(warnings(caplog, "replication: ")) == 1
    finally:
        await conn.close()


async def test_required_synchronous_replication_claims_nothing_and_is_not_ready_until_a_standby_is_sync(
        primary: PgCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="einmal")
    url, conn = await database(primary)
    http = f"127.0.0.1:{free_port()}"
    received = Received()
    try:
        campaign = await seed(conn, [f"s{i}@example.com" for i in range(5)])
        async with recording_server(received) as port, httpx.AsyncClient() as client:
            settings = node_settings(url, port, http_address=http, require_synchronous_replication=True)
            async with running_node(settings):
                body = await readiness(client, f"http://{http}/readyz",
                                       lambda status, b: status == 503 and "replication" in b["reason"])
                assert body["reason"].startswith("replication: 1 standby(s), ") and WARNING in body["reason"]
                assert body["reason"].endswith("(EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION)"), body
                assert "notes" not in body, "the refusal is the reason, not a note besides it"
                await approve(conn, campaign)
                with anyio.fail_after(60):  # started and built by the scheduler and the builder all the same
                    while sum((await counts(conn, campaign)).values()) < 5:
                        await anyio.sleep(0.05)
                await ticks(conn, 3)  # each tick nudges the claimer: it would have claimed by now
                assert await counts(conn, campaign) == {"queued": 5}
                assert received.messages == []
                assert warnings(caplog, "not claiming (EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION)"), caplog.text

                await primary.configure(synchronous_standby_names="*")
                await primary.streaming(sync=True)
                with anyio.fail_after(60):
                    while await counts(conn, campaign) != {"sent": 5}:
                        await anyio.sleep(0.05)
                body = await readiness(client, f"http://{http}/readyz", lambda status, _: status == 200)
                assert body == {"ready": True}
        assert sorted(rcpt for _, rcpt, _ in received.messages) == sorted(f"s{i}@example.com" for i in range(5))
    finally:
        await conn.close()
