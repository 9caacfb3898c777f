"""The rules of sequences (docs/design.md#sequences), each with a real node sending to a recording SMTP server:
every member gets each step once, in order, no earlier than its delay (after the previous step's send, the first
after the confirmed join); leaving stops it; rejoining continues; an unsubscribe wins; pause holds, resume
continues within the budget; an edit reaches the rows not yet sent; a step added later reaches the members not
past it; a deleted step's rows are cancelled."""

import time
from datetime import UTC, datetime, timedelta

import anyio
import asyncpg
import httpx
import pytest

from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from tests.sequences.helpers import Stamped, join, leave, make_sequence, rows
from tests.support.pipeline import node_settings, recording_server, running_node
from tests.support.web import http_server, token

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
    account, list_id, _, (first, second, third) = await make_sequence(conn, dsn, [0, 6, 7])
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


async def test_a_member_who_leaves_and_rejoins_continues_and_does_not_restart(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 5])
    (member,) = await join(conn, account, list_id, ["back@example.com"])
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await settled(conn, [first], 1)
        await leave(conn, list_id, member)
        await anyio.sleep(5.5)  # step 2 falls due while it is off the list
        assert received.by_step().get(second) is None, "no step while off the list"
        rejoined = time.time()
        await join(conn, account, list_id, ["back@example.com"])
        await settled(conn, [first, second], 2)
    assert received.by_step() == {first: [member], second: [member]}, "step 1 not again, step 2 once"
    assert next(at for at, _, mid in received.arrivals if f".{second}." in mid) >= rejoined
    row = await conn.fetchrow("SELECT left_at, last_position FROM einmal.sequence_members")
    assert row["left_at"] is None and row["last_position"] == 2


async def test_an_unsubscribed_or_suppressed_member_gets_no_later_step(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 5])
    keeps, unsubscribes = await join(conn, account, list_id, ["keeps@example.com", "out@example.com"])
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await settled(conn, [first], 2)
        # the one-click unsubscribe's effect: a suppression of the address (docs/design.md#opt-outs)
        await conn.execute(
            "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, 'out@example.com', "
            "'unsubscribe')",
            account,
        )
        await settled(conn, [first, second], 4)
    assert sorted(received.by_step()[first]) == sorted([keeps, unsubscribes])
    assert received.by_step()[second] == [keeps]
    assert (await rows(conn, second))[unsubscribes] == "suppressed"


@pytest.mark.serial  # it counts messages per second at the server: other tests' load would measure the machine
async def test_pause_holds_every_step_and_resume_sends_within_the_budget(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0])
    rate = 4
    received = Stamped()
    async with recording_server(received) as port:
        async with running_node(node_settings(dsn, port, rate_limit=rate, **FAST)):
            await sequences.pause(conn, account_id=account, sequence_id=sequence)
            assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", first) == "paused"
            members = await join(conn, account, list_id, [f"m{i}@example.com" for i in range(12)])
            await anyio.sleep(1.5)
            assert received.arrivals == [], "nothing while paused"
            assert await rows(conn, first) == {}, "nothing queued while paused"
            await sequences.resume(conn, account_id=account, sequence_id=sequence)
            await settled(conn, [first], 12)
    assert sorted(received.by_step()[first]) == sorted(members)
    times = sorted(at for at, _, _ in received.messages)
    # docs/design.md#sending-budget: the messages of any second are at most rate × 1.05 + 1
    assert max(sum(1 for t in times if start <= t < start + 1) for start in times) <= rate * 1.05 + 1
    assert times[-1] - times[0] >= (12 - rate - 1) / rate - 0.1, "spread at the rate, no burst"


async def test_an_edited_step_changes_only_the_rows_not_yet_sent(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0])
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        (before,) = await join(conn, account, list_id, ["before@example.com"])
        await settled(conn, [first], 1)
        await steps.change(
            conn,
            mailing=Mailing.of(node_settings(dsn, port)),
            account_id=account,
            sequence_id=sequence,
            at=1,
            changes={"subject": "Edited for {{ name }}"},
        )
        await anyio.sleep(1.5)  # the claimer lists the campaigns again at least once a second when it claims
        (after,) = await join(conn, account, list_id, ["after@example.com"])
        await settled(conn, [first], 2)
    subjects = {mid: subject for mid, subject in received.subjects.items()}
    assert subjects[f"<campaign.{first}.{before}@example.com>"] == "Step 1 for N"
    assert subjects[f"<campaign.{first}.{after}@example.com>"] == "Edited for N"


async def test_a_step_added_later_reaches_the_members_not_past_its_position(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, (first, third) = await make_sequence(conn, dsn, [0, 6])
    await conn.execute("UPDATE einmal.campaigns SET step_position = 3 WHERE id = $1", third)  # leave room for 2
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        (ahead,) = await join(conn, account, list_id, ["ahead@example.com"])
        await settled(conn, [first, third], 2)  # past position 3
        (behind,) = await join(conn, account, list_id, ["behind@example.com"])
        await settled(conn, [first, third], 3)  # step 1 only: step 3 waits for its delay
        added = await steps.add(
            conn,
            mailing=Mailing.of(node_settings(dsn, port)),
            account_id=account,
            sequence_id=sequence,
            subject="Step 2",
            from_address="news@example.com",
            text="added later",
            delay_seconds=0,
            at=2,
        )
        await settled(conn, [first, added.campaign_id, third], 5)
    got = received.by_step()
    assert got[added.campaign_id] == [behind], "the member past it does not get it"
    assert sorted(got[third]) == sorted([ahead, behind])
    order = [mid for _, _, mid in received.arrivals if f".{behind}@" in mid]
    assert order == [f"<campaign.{c}.{behind}@example.com>" for c in (first, added.campaign_id, third)]


async def test_a_deleted_step_cancels_its_unsent_rows_and_members_go_on(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, (first, second, third) = await make_sequence(conn, dsn, [0, 0, 0])
    hour = datetime.now(UTC).hour
    closed = steps.window((hour + 2) % 24, (hour + 3) % 24, "UTC")  # not open now: its rows wait for it
    await conn.execute(
        "UPDATE einmal.campaigns SET step_window_from = $2, step_window_to = $3, step_window_zone = $4 WHERE id = $1",
        second,
        closed.start,
        closed.end,
        closed.zone,
    )
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        (member,) = await join(conn, account, list_id, ["w@example.com"])
        await settled(conn, [first], 1)
        with anyio.fail_after(20):
            while not await rows(conn, second):
                await anyio.sleep(0.1)
        waiting = await conn.fetchrow("SELECT status, next_attempt_at FROM einmal.sends WHERE campaign_id = $1", second)
        opening = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
        assert waiting["status"] == "queued" and waiting["next_attempt_at"] == opening, "queued for its window"
        await anyio.sleep(1)
        assert await rows(conn, third) == {}, "the next step waits for the one before"
        await steps.delete(conn, account_id=account, sequence_id=sequence, at=2)
        await settled(conn, [first, second, third], 3)
    assert received.by_step() == {first: [member], third: [member]}
    cancelled = await conn.fetchrow("SELECT status, last_reply FROM einmal.sends WHERE campaign_id = $1", second)
    assert tuple(cancelled) == ("failed", "campaign cancelled")
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", second) == "cancelled"


async def test_leaving_from_the_preference_page_stops_the_queued_step(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    hour = datetime.now(UTC).hour
    await conn.execute(  # step 2 waits for a window that is not open: its row stays queued
        "UPDATE einmal.campaigns SET step_window_from = $2, step_window_to = $3, step_window_zone = 'UTC' "
        "WHERE id = $1",
        second,
        (hour + 2) % 24,
        (hour + 3) % 24,
    )
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        (member,) = await join(conn, account, list_id, ["pref@example.com"])
        with anyio.fail_after(30):
            while (await rows(conn, second)).get(member) != "queued":
                await anyio.sleep(0.1)
        async with http_server(dsn) as base, httpx.AsyncClient() as client:
            left = await client.post(f"{base}/unsubscribe?token={token((account, first, member))}&leave={list_id}")
        assert left.status_code == 200 and "You left the mailing list." in left.text
    assert received.by_step() == {first: [member]}
    stopped = await conn.fetchrow("SELECT status, last_reply FROM einmal.sends WHERE campaign_id = $1", second)
    assert tuple(stopped) == ("suppressed", "left the list")
    assert await conn.fetchval("SELECT left_at IS NOT NULL FROM einmal.sequence_members") is True
