"""The rules of sequences (docs/design.md#sequences), each with a real node sending to a recording SMTP server:
every member gets each step once, in order, no earlier than its delay after its confirmed join; leaving stops
it; rejoining continues; an unsubscribe wins; pause holds, resume continues within the budget; an edit reaches
the rows not yet sent; a step added later reaches the members not past it; a deleted step's rows are cancelled."""


import anyio
import asyncpg
import pytest

from tests.sequences.helpers import Stamped, join, leave, make_sequence, rows
from tests.support.pipeline import node_settings, recording_server, running_node

pytestmark = pytest.mark.anyio

FAST = dict(sequence_tick_seconds=0.2, sequence_wait_seconds=0.3)


async def settled(conn: asyncpg.Connection, steps_: list[int], expected: int, timeout: float = 40) -> None:
    """Until the steps' rows number `expected` in all and none is queued, claimed or sending."""
    with anyio.fail_after(timeout):
        while True:
            found = await conn.fetchrow(
                "SELECT count(*) AS n, count(*) FILTER (WHERE status IN ('queued', 'claimed', 'sending')) AS open "
                "FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])",
                steps_,
            )
            if found["n"] >= expected and found["open"] == 0:
                return
            await anyio.sleep(0.1)


async def test_every_member_gets_each_step_once_in_order_and_not_before_its_delay(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 2])
    early = await join(conn, account, list_id, ["a@example.com", "b@example.com"])
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await anyio.sleep(1)
        late = await join(conn, account, list_id, ["c@example.com"])  # joins while the sequence runs
        await settled(conn, [first, second], 6)
    got = received.by_step()
    assert sorted(got[first]) == sorted(early + late) and sorted(got[second]) == sorted(early + late)
    assert len(received.arrivals) == 6, "each step exactly once per member"
    joined = {
        r["subscriber_id"]: r["joined_at"].timestamp()
        for r in await conn.fetch("SELECT subscriber_id, joined_at FROM einmal.sequence_members")
    }
    arrived = {(mid, rcpt): at for at, rcpt, mid in received.arrivals}
    for subscriber in early + late:
        one = next(at for (mid, _), at in arrived.items() if mid.startswith(f"<campaign.{first}.{subscriber}@"))
        two = next(at for (mid, _), at in arrived.items() if mid.startswith(f"<campaign.{second}.{subscriber}@"))
        assert one < two, "in order"
        assert two >= joined[subscriber] + 2, "not before its delay"
    made = await conn.fetch(
        "SELECT s.subscriber_id, s.created_at, m.joined_at FROM einmal.sends s "
        "JOIN einmal.sequence_members m ON m.subscriber_id = s.subscriber_id WHERE s.campaign_id = $1",
        second,
    )
    assert all((r["created_at"] - r["joined_at"]).total_seconds() >= 2 for r in made), "queued at its delay, not before"
    assert await conn.fetchval("SELECT count(*) FROM einmal.sequence_members WHERE due_at IS NOT NULL") == 0


async def test_a_member_who_leaves_gets_no_later_step_and_its_queued_row_is_stopped(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, _, (first, second, third) = await make_sequence(conn, dsn, [0, 3, 4])
    stays, goes = await join(conn, account, list_id, ["stays@example.com", "goes@example.com"])
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await settled(conn, [first], 2)
        await leave(conn, list_id, goes)
        await settled(conn, [first, second, third], 4, timeout=40)
        await anyio.sleep(1.5)  # a sweep or two more: nothing more for the member who left
    got = received.by_step()
    assert sorted(got[first]) == sorted([stays, goes])
    assert got[second] == [stays] and got[third] == [stays]
    assert goes not in await rows(conn, second) and goes not in await rows(conn, third)
    left = await conn.fetchrow(
        "SELECT left_at, due_at, last_position FROM einmal.sequence_members WHERE subscriber_id = $1", goes
    )
    assert left["left_at"] is not None and left["due_at"] is None and left["last_position"] == 1
