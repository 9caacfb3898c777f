"""The sweep's statement (sql/queries/sequence_sweep.sql, actors/sequencer.py) against a real PostgreSQL, without a
node: two sweeps at once queue each (step, member) once; one statement looks at no more than its batch; a step
waits for the member's row of the step before; a send window; erasure takes the member's progress."""

from datetime import UTC, datetime

import anyio
import asyncpg
import pytest

from actors.sequencer import sweep, sweep_one
from service.sequences import steps
from service.subscribers import erasure
from tests.sequences.helpers import join, make_sequence

pytestmark = pytest.mark.anyio


async def waits_on_a_lock(conn: asyncpg.Connection, other: asyncpg.Connection, seconds: float = 10) -> None:
    """Until `other`'s statement waits on a lock held by another transaction (pg_stat_activity)."""
    pid = other.get_server_pid()
    with anyio.fail_after(seconds):
        while await conn.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid) != "Lock":
            await anyio.sleep(0.02)


async def sweep_until_idle(dsn: str, batch: int, passes: int = 200) -> int:
    """Sweep on a connection of its own until a pass finds nobody due; the rows it queued."""
    queued = 0
    connection = await asyncpg.connect(dsn)
    try:
        for _ in range(passes):
            swept = await sweep(connection, batch=batch, wait_seconds=60)
            queued += swept.queued
            if swept.looked == 0:
                return queued
    finally:
        await connection.close()
    raise AssertionError("the sweep did not run out of due members")


async def test_two_sweeps_at_once_queue_each_step_once_per_member(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    members = await join(conn, account, list_id, [f"s{i}@example.com" for i in range(400)])
    results: list[int] = []

    async def one() -> None:
        results.append(await sweep_until_idle(dsn, batch=25))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert sum(results) == 400 and min(results) > 0, "the three shared the work, none twice"
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", first) == 400
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", second) == 0, "in order"
    await conn.execute("UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1", first)
    await conn.execute("UPDATE einmal.sequence_members SET due_at = now()")
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    found = await conn.fetch("SELECT subscriber_id FROM einmal.sends WHERE campaign_id = $1", second)
    assert sorted(r["subscriber_id"] for r in found) == sorted(members)
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members WHERE last_position = 2") == 400


async def test_one_statement_looks_at_no_more_than_its_batch(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first,) = await make_sequence(conn, dsn, [0])
    await join(conn, account, list_id, [f"b{i}@example.com" for i in range(120)])
    swept = await sweep(conn, batch=50, wait_seconds=60)
    assert (swept.looked, swept.queued, swept.full) == (50, 50, True)
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", first) == 50


async def test_a_step_waits_for_the_row_of_the_step_before(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    await join(conn, account, list_id, ["o@example.com"])
    assert (await sweep(conn, batch=10, wait_seconds=60)).queued == 1
    for status in ("queued", "claimed", "sending", "in_doubt"):
        await conn.execute(
            "UPDATE einmal.sends SET status = $2, claimed_by = 'x' WHERE campaign_id = $1", first, status
        )
        swept = await sweep(conn, batch=10, wait_seconds=60)
        assert (swept.looked, swept.queued) == (1, 0), status
        pushed = await conn.fetchval("SELECT due_at - now() FROM einmal.sequence_members")
        assert 55 < pushed.total_seconds() <= 60, "pushed back by the wait, not holding the head of the queue"
        await conn.execute("UPDATE einmal.sequence_members SET due_at = now()")
    await conn.execute("UPDATE einmal.sends SET status = 'failed', claimed_by = NULL WHERE campaign_id = $1", first)
    assert (await sweep(conn, batch=10, wait_seconds=60)).queued == 1, "a failed row is settled: the next step goes"
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", second) == 1


@pytest.mark.parametrize(
    ("at", "window", "expected"),
    [
        ("2026-06-01 10:00+00", (9, 17, "UTC"), "2026-06-01 10:00+00"),  # open
        ("2026-06-01 18:00+00", (9, 17, "UTC"), "2026-06-02 09:00+00"),  # closed for the day
        ("2026-06-01 03:00+00", (9, 17, "UTC"), "2026-06-01 09:00+00"),  # not open yet
        ("2026-06-01 23:30+00", (22, 6, "UTC"), "2026-06-01 23:30+00"),  # wraps past midnight: open
        ("2026-06-01 12:00+00", (22, 6, "UTC"), "2026-06-01 22:00+00"),
        ("2026-06-01 05:00+00", (9, 17, "Europe/Berlin"), "2026-06-01 07:00+00"),  # 09:00 CEST
        ("2026-03-28 20:00+00", (9, 17, "Europe/Berlin"), "2026-03-29 07:00+00"),  # 09:00 on the day DST begins
    ],
)
async def test_a_send_window_gives_the_next_opening(
    conn: asyncpg.Connection, at: str, window: tuple[int, int, str], expected: str
) -> None:
    opening = await conn.fetchval(
        "SELECT einmal.step_window_open($1::smallint, $2::smallint, $3, $4::timestamptz)",
        *window,
        datetime.fromisoformat(at.replace(" ", "T") + ":00"),
    )
    assert opening == datetime.fromisoformat(expected.replace(" ", "T") + ":00").astimezone(UTC)


async def test_erasure_takes_the_members_progress_and_stops_its_queued_step(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first, _second) = await make_sequence(conn, dsn, [0, 5])
    (member, other) = await join(conn, account, list_id, ["gone@example.com", "other@example.com"])
    await sweep(conn, batch=10, wait_seconds=60)
    async with conn.transaction():
        await erasure.erase(conn, account, "gone@example.com")
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members WHERE subscriber_id = $1", member) == 0
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members WHERE subscriber_id = $1", other) == 1
    row = await conn.fetchrow(
        "SELECT status, email FROM einmal.sends WHERE campaign_id = $1 AND subscriber_id = $2", first, member
    )
    assert row["status"] == "suppressed" and row["email"].endswith("@erased.invalid")


async def test_a_member_is_made_only_once_its_membership_is_confirmed(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, _ = await make_sequence(conn, dsn, [0])
    subscriber = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 's@example.com', "
        "'s@example.com') RETURNING id",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id, state) VALUES ($1, $2, 'unconfirmed')",
        list_id,
        subscriber,
    )
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members") == 0, "a sign-up is no member yet"
    await conn.execute("UPDATE einmal.list_members SET source = 'form' WHERE subscriber_id = $1", subscriber)
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members") == 0
    await conn.execute(  # what optin_confirm.sql does
        "UPDATE einmal.list_members SET state = 'confirmed', confirmed_at = now() WHERE subscriber_id = $1", subscriber
    )
    member = await conn.fetchrow("SELECT sequence_id, due_at <= now() AS due, left_at FROM einmal.sequence_members")
    assert tuple(member) == (sequence, True, None)
    # an import's one statement of many memberships: one member each
    await conn.execute(
        """WITH s AS (INSERT INTO einmal.subscribers (account_id, email, email_lower)
                      SELECT $1, 'i' || i || '@example.com', 'i' || i || '@example.com' FROM generate_series(1, 500) i
                      RETURNING id)
           INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT $2, id FROM s""",
        account,
        list_id,
    )
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members WHERE sequence_id = $1", sequence) == 501


async def test_a_step_deleted_while_a_sweep_queues_it_leaves_no_row_queued(conn: asyncpg.Connection, dsn: str) -> None:
    """The sweep holds its steps FOR SHARE before it locks members: the delete's cancel waits for it and then
    cancels the row it queued (without, the row would stay queued in a cancelled campaign, and its member would
    wait for it for ever); the delete's update of the members then finds their locks released."""
    account, list_id, sequence, (first, second) = await make_sequence(conn, dsn, [0, 0])
    await join(conn, account, list_id, ["r@example.com"])
    sweeper, deleter = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        swept = sweeper.transaction()  # the sweeper's own transaction a savepoint in it: its locks held until commit
        await swept.start()
        assert await sweep_one(sweeper, sequence_id=sequence, batch=10, wait_seconds=60) == (1, 1)
        done = anyio.Event()

        async def delete() -> None:
            await steps.delete(deleter, account_id=account, sequence_id=sequence, at=1)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(delete)
            await waits_on_a_lock(conn, deleter)
            assert not done.is_set(), "the delete waits for the sweep"
            await swept.commit()
            with anyio.fail_after(10):
                await done.wait()
    finally:
        await sweeper.close()
        await deleter.close()
    row = await conn.fetchrow("SELECT status, last_reply FROM einmal.sends WHERE campaign_id = $1", first)
    assert tuple(row) == ("failed", "campaign cancelled")
    assert (await sweep(conn, batch=10, wait_seconds=60)).queued == 1, "the member goes on to the next step"
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", second) == 1


async def test_erasure_while_a_sweep_queues_a_step_erases_that_row_too(conn: asyncpg.Connection, dsn: str) -> None:
    """Erasure deletes the member's progress first: it waits for a sweep holding the member, and then erases the
    row that sweep queued with the rest (the address is in no send row after it)."""
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0])
    (member,) = await join(conn, account, list_id, ["e@example.com"])
    sweeper, eraser = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        swept = sweeper.transaction()
        await swept.start()
        assert await sweep_one(sweeper, sequence_id=sequence, batch=10, wait_seconds=60) == (1, 1)
        done = anyio.Event()

        async def erase() -> None:
            async with eraser.transaction():
                await erasure.erase(eraser, account, "e@example.com")
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(erase)
            await waits_on_a_lock(conn, eraser)
            assert not done.is_set(), "the erasure waits for the sweep"
            await swept.commit()
            with anyio.fail_after(10):
                await done.wait()
    finally:
        await sweeper.close()
        await eraser.close()
    row = await conn.fetchrow("SELECT status, email, email_lower FROM einmal.sends WHERE campaign_id = $1", first)
    assert row["status"] == "suppressed" and row["email"] == row["email_lower"] == f"erased-{member}@erased.invalid"
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members") == 0
