"""The clicks' and opens' buffer against a real PostgreSQL: bounded (a click past its room is dropped and counted,
never waited for), one entry per event id, an account's share at most, and written in full once a lock on the
table is gone."""

from datetime import UTC, datetime

import anyio
import asyncpg
import pytest

from service.metrics import Metrics
from service.web import opens
from service.web.clicks import SHARE, Click, Recorder, event_id
from tests.support.web import subscriber

pytestmark = pytest.mark.anyio


def clicks_of(ids: tuple[int, int, int], links: range, at: float) -> list[Click]:
    account, campaign, sub = ids
    when = datetime.fromtimestamp(at, UTC)
    return [
        Click(
            event_id(account, campaign, sub, n, at), account, campaign, sub, n, f"https://example.org/{n}", when, (), 9
        )
        for n in links
    ]


async def test_a_full_buffer_drops_and_counts_and_a_locked_table_delays_only_the_writing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    metrics = Metrics()
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=2)
    recorder = Recorder(pool, metrics, capacity=3, share=1.0)  # one account may fill it here
    first, second, third, fourth = clicks_of(ids, range(1, 5), 1_000_000.0)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE einmal.clicks IN ACCESS EXCLUSIVE MODE")
            with anyio.fail_after(0.5):  # adding never waits for the database
                for click in (first, second, first, third, fourth):
                    await recorder.add(click)
            assert list(recorder.pending) == [first.id, second.id, third.id]
            assert metrics.clicks.labels("dropped")._value.get() == 1
            assert metrics.clicks.labels("repeated")._value.get() == 1
            await anyio.sleep(0.5)  # the writing waits for the lock meanwhile
        with anyio.fail_after(15):
            while recorder.pending:
                await anyio.sleep(0.05)
        links = await conn.fetch("SELECT link FROM einmal.clicks ORDER BY link")
        assert [r["link"] for r in links] == [1, 2, 3]
        assert metrics.clicks.labels("recorded")._value.get() == 3
    finally:
        await pool.close()


async def test_one_accounts_flood_of_clicks_leaves_room_for_anothers(conn: asyncpg.Connection, dsn: str) -> None:
    """The buffer is shared by every account's links: a scanner clicking one account's links by the thousand
    fills that account's share of it (SHARE), and another account's click still finds room and is written."""
    flooded = await subscriber(conn)
    other = await subscriber(conn, "bob@example.org", account="globex")
    metrics = Metrics()
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=2)
    recorder = Recorder(pool, metrics, capacity=8)
    share = int(8 * SHARE)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE einmal.clicks IN ACCESS EXCLUSIVE MODE")
            for click in clicks_of(flooded, range(1, 9), 1_000_000.0):
                await recorder.add(click)
            (theirs,) = clicks_of(other, range(1, 2), 1_000_000.0)
            await recorder.add(theirs)
            assert theirs.id in recorder.pending
            assert len(recorder.pending) == share + 1, recorder.pending
            assert metrics.clicks.labels("dropped")._value.get() == 8 - share
        with anyio.fail_after(15):
            while recorder.pending:
                await anyio.sleep(0.05)
        written = await conn.fetch("SELECT account_id, count(*) FROM einmal.clicks GROUP BY 1 ORDER BY 1")
        assert [tuple(r) for r in written] == [(flooded[0], share), (other[0], 1)]
        # the flooded account's room is back once its clicks are written
        (later,) = clicks_of(flooded, range(9, 10), 1_000_100.0)
        await recorder.add(later)
        assert later.id in recorder.pending
    finally:
        await pool.close()


async def test_one_accounts_flood_of_opens_leaves_room_for_anothers(conn: asyncpg.Connection, dsn: str) -> None:
    """Opens share the buffer's code and its bound: a proxy loading one account's pixels by the thousand (each of
    another recipient) fills that account's share, and another account's open is still written."""
    flooded = await subscriber(conn)
    other = await subscriber(conn, "bob@example.org", account="globex")
    metrics = Metrics()
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=2)
    recorder = opens.Recorder(pool, metrics, capacity=8)
    share = int(8 * SHARE)
    when = datetime.fromtimestamp(1_000_000.0, UTC)

    def open_of(ids: tuple[int, int, int], subscriber_id: int) -> opens.Open:
        return opens.Open(
            opens.event_id(ids[0], ids[1], subscriber_id, 1_000_000.0), ids[0], ids[1], subscriber_id, when, ()
        )

    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE einmal.opens IN ACCESS EXCLUSIVE MODE")
            # the flooded account's own subscriber first, then recipients it does not have (written as none)
            for n in range(8):
                await recorder.add(open_of(flooded, flooded[2] + 1000 * n))
            theirs = open_of(other, other[2])
            await recorder.add(theirs)
            assert theirs.id in recorder.pending
            assert len(recorder.pending) == share + 1
            assert metrics.opens.labels("dropped")._value.get() == 8 - share
        with anyio.fail_after(15):
            while recorder.pending:
                await anyio.sleep(0.05)
        written = await conn.fetch("SELECT account_id, subscriber_id FROM einmal.opens ORDER BY account_id")
        assert [tuple(r) for r in written] == [(flooded[0], flooded[2]), (other[0], other[2])]
        assert metrics.opens.labels("recorded")._value.get() == 2
    finally:
        await pool.close()
