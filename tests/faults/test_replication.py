"""What the promise needs of replication, on real streaming replication (pg_basebackup standbys of a
throwaway primary; docs/design.md#liveness).

An asynchronous standby is one warning line and a /readyz note, a synchronous one neither; with
EINMAL_REQUIRE_SYNCHRONOUS_REPLICATION the node is not ready and claims nothing until a standby is
synchronous. Through an asynchronous failover the node names the failover (a new timeline) in one line
and, before it claims again, writes on the new primary the outcomes it recorded in the last seconds (its
journal) and the answers it held, where the new primary lost them: a row `sending`, `claimed` or `queued`
there whose message went out is `sent`, not sent again nor in doubt."""

import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import asyncpg
import httpx
import pytest

from tests.support.pgcluster import PgCluster, pair_url
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
    primary: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
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
                settled = len(caplog.records)
                await ticks(conn, 2)
                # between the reload and the standby's next reply the server may be seen with names set and
                # none streaming as sync: a line of its own; once synchronous, no more lines
                assert [r.getMessage() for r in caplog.records[settled:] if "replication: " in r.getMessage()] == []
    finally:
        await conn.close()


async def test_required_synchronous_replication_claims_nothing_and_is_not_ready_until_a_standby_is_sync(
    primary: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="einmal")
    url, conn = await database(primary)
    http = f"127.0.0.1:{free_port()}"
    received = Received()
    try:
        campaign = await seed(conn, [f"s{i}@example.com" for i in range(5)])
        async with recording_server(received) as port, httpx.AsyncClient() as client:
            settings = node_settings(url, port, http_address=http, require_synchronous_replication=True)
            async with running_node(settings):
                body = await readiness(
                    client, f"http://{http}/readyz", lambda status, b: status == 503 and "replication" in b["reason"]
                )
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


class OneByOne(Received):
    """Holds the reply to each of the first `held` messages until the test lets it go."""

    def __init__(self, held: int) -> None:
        super().__init__()
        self.arrived = [anyio.Event() for _ in range(held)]
        self.go = [anyio.Event() for _ in range(held)]
        self.seen = 0

    async def handle_DATA(self, server, session, envelope) -> str:
        index, self.seen = self.seen, self.seen + 1
        if index < len(self.arrived):
            self.arrived[index].set()
            await self.go[index].wait()
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def fresh_pair() -> Iterator[tuple[PgCluster, PgCluster]]:
    """A primary and an asynchronous standby of its own, for a test that kills the one and promotes the other."""
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


async def states(url: str, campaign: int) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return await counts(conn, campaign)
    finally:
        await conn.close()


async def seeded_pair(primary: PgCluster, standby: PgCluster, prefix: str) -> tuple[str, int]:
    """A migrated database streamed to the standby with an approved campaign of five addresses: the URL
    naming both clusters (the writable one is used) and the campaign."""
    await primary.streaming()
    await primary.migrated_database("einmal")
    both = pair_url(primary, standby, "einmal")
    conn = await asyncpg.connect(primary.url("einmal"))
    try:
        campaign = await seed(conn, [f"{prefix}{i}@example.com" for i in range(5)])
        await approve(conn, campaign)
    finally:
        await conn.close()
    return both, campaign


async def test_an_answer_held_through_an_asynchronous_failover_is_recorded_on_the_new_primary_not_sent_again(
    fresh_pair: tuple[PgCluster, PgCluster], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="einmal")
    primary, standby = fresh_pair
    both, campaign = await seeded_pair(primary, standby, "f")
    received = OneByOne(held=2)
    async with recording_server(received) as port:
        async with running_node(node_settings(both, port, smtp_connections=1, batch_size=5)):
            with anyio.fail_after(60):
                await received.arrived[0].wait()  # the first message on the wire: its row `sending`
            await primary.streaming()  # the standby has it all: one row sending, four claimed
            await standby.stop_receiving()  # from here on the standby learns nothing more
            received.go[0].set()  # 250: recorded `sent`, and the next row started, on the primary only
            with anyio.fail_after(60):
                await received.arrived[1].wait()
            assert await states(primary.url("einmal"), campaign) == {"sent": 1, "sending": 1, "claimed": 3}
            assert await states(standby.url("einmal"), campaign) == {"sending": 1, "claimed": 4}
            primary.stop("immediate")
            standby.promote()
            received.go[1].set()  # the node holds a 250 for a row the new primary has `claimed`
            with anyio.fail_after(90):
                while (found := await states(standby.url("einmal"), campaign)) != {"sent": 5}:
                    await anyio.sleep(0.1)
            assert await lost(standby) == 0
    ids = received.ids()
    assert len(ids) == 5 and len(set(ids)) == 5, f"each message once: {ids} ({found})"
    # the first row's `sent` was lost with the old primary (it is `sending` there): the journal has it; the
    # second row is `claimed` there and its 250 was held: both written `sent` before the node claims again
    assert "another primary than before (timeline 1 -> 2)" in caplog.text
    assert "wrote again 2 outcome(s) the new primary had lost, 0 were there, 0 lost" in caplog.text, caplog.text


async def lost(cluster: PgCluster) -> int:
    conn = await asyncpg.connect(cluster.url("einmal"))
    try:
        return await conn.fetchval("SELECT count(*) FROM einmal.lost_outcomes")
    finally:
        await conn.close()


async def test_answers_whose_claim_an_asynchronous_failover_lost_are_written_again_not_sent_again(
    fresh_pair: tuple[PgCluster, PgCluster], caplog: pytest.LogCaptureFixture
) -> None:
    """The new primary has every row `queued`: the one recorded `sent` on the old primary (the journal) and the
    one whose 250 the node held through the failover are written `sent` before this node claims again."""
    caplog.set_level("INFO", logger="einmal")
    primary, standby = fresh_pair
    both, campaign = await seeded_pair(primary, standby, "q")
    received = OneByOne(held=2)
    async with recording_server(received) as port:
        # while the standby streams asynchronously the node builds the campaign but claims nothing
        async with running_node(
            node_settings(both, port, smtp_connections=1, batch_size=5, require_synchronous_replication=True)
        ):
            with anyio.fail_after(60):
                while await states(primary.url("einmal"), campaign) != {"queued": 5}:
                    await anyio.sleep(0.05)
            await primary.streaming()
            assert await states(standby.url("einmal"), campaign) == {"queued": 5}
            await standby.stop_receiving()  # no standby left: the node claims, on the primary only
            with anyio.fail_after(60):
                await received.arrived[0].wait()
            received.go[0].set()
            with anyio.fail_after(60):
                await received.arrived[1].wait()
            assert await states(primary.url("einmal"), campaign) == {"sent": 1, "sending": 1, "claimed": 3}
            primary.stop("immediate")
            standby.promote()
            received.go[1].set()  # a 250 for a row the new primary has `queued`, claimed by nobody
            with anyio.fail_after(90):
                while (found := await states(standby.url("einmal"), campaign)) != {"sent": 5}:
                    await anyio.sleep(0.1)
            assert await lost(standby) == 0
    ids = received.ids()
    assert len(ids) == 5 and len(set(ids)) == 5, f"each message once: {ids} ({found})"
    assert "wrote again 2 outcome(s) the new primary had lost, 0 were there, 0 lost" in caplog.text, caplog.text
