"""Sequences at their edges (docs/design.md#sequences): an operator's decision about a step's rows after the
member left, a rejoin while a step waits for its window, a window changed under queued rows, and the defences of
the sweep and the leave trigger, each removed once in a scratch copy to see the test here fail."""

from datetime import UTC, datetime, timedelta

import anyio
import asyncpg
import httpx
import pytest

from actors.sequencer import sweep, sweep_one
from service.campaigns import rows as campaign_rows
from service.mail.mailing import Mailing
from service.sequences import steps
from tests.conftest import einmal
from tests.sequences.helpers import Stamped, join, leave, make_sequence, rows
from tests.support.pipeline import node_settings, recording_server, running_node
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

FAST = dict(sequence_tick_seconds=0.2, sequence_wait_seconds=0.3)


async def in_doubt_first_step(conn: asyncpg.Connection, dsn: str) -> tuple[int, int, int, int, int]:
    """(account, list, first step, second step, the member who left): two members whose first step's row was
    left in doubt (its answer lost after the final dot); the second member has left the list since."""
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    _stays, goes = await join(conn, account, list_id, ["stays@example.com", "goes@example.com"])
    assert (await sweep(conn, batch=10, wait_seconds=60)).queued == 2
    await conn.execute(
        "UPDATE einmal.sends SET status = 'in_doubt', claimed_by = 'node-a', attempts = 1 WHERE campaign_id = $1",
        first,
    )
    await leave(conn, list_id, goes)
    assert (await rows(conn, first))[goes] == "in_doubt", "a row in doubt is the operator's, not the leave's"
    return account, list_id, first, second, goes


@pytest.mark.parametrize("via", ["function", "cli", "api"])
async def test_a_resend_of_an_in_doubt_step_skips_a_member_who_left(
    conn: asyncpg.Connection, dsn: str, via: str
) -> None:
    _, _, first, _, goes = await in_doubt_first_step(conn, dsn)
    if via == "cli":
        result = einmal("reconcile", str(first), "--resend", dsn=dsn)
        assert result.returncode == 0, result.stderr
        said = result.stdout
    elif via == "api":
        async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
            answer = await client.post(
                f"/campaigns/{first}/reconcile", headers=auth(make_key(dsn, "acme")), json={"decision": "resend"}
            )
        assert answer.status_code == 200, answer.text
    else:
        done = await campaign_rows.decide(conn, campaign_id=first, resend=True)
    found = await conn.fetch("SELECT subscriber_id, status, last_reply FROM einmal.sends WHERE campaign_id = $1", first)
    by = {r["subscriber_id"]: (r["status"], r["last_reply"]) for r in found}
    assert by[goes] == ("suppressed", "left the list"), "not sent again to a member who left"
    assert sorted(s for s, _ in by.values()) == ["queued", "suppressed"], "the member who stays is queued again"
    if via == "cli":
        assert "1 in-doubt row of campaign" in said and "1 of a member who left" in said
    elif via == "api":
        assert answer.json() == {"moved": 1, "reopened": False, "left": 1}
    else:
        assert (done.moved, done.left) == (1, 1)


async def test_a_retry_of_a_failed_step_skips_a_member_who_left(conn: asyncpg.Connection, dsn: str) -> None:
    _, _, first, _, goes = await in_doubt_first_step(conn, dsn)
    await conn.execute("UPDATE einmal.sends SET status = 'failed', claimed_by = NULL WHERE campaign_id = $1", first)
    done = await campaign_rows.retry_failed(conn, campaign_id=first)
    assert (await rows(conn, first))[goes] == "suppressed", "not sent again to a member who left"
    assert (done.moved, done.left) == (1, 1)


def closed_window() -> steps.Window:
    hour = datetime.now(UTC).hour
    return steps.window((hour + 2) % 24, (hour + 3) % 24, "UTC")  # not open for an hour at least


def open_window() -> steps.Window:
    hour = datetime.now(UTC).hour
    return steps.window((hour + 23) % 24, (hour + 2) % 24, "UTC")  # open for an hour at least


async def set_window(conn: asyncpg.Connection, dsn: str, account: int, sequence: int, at: int, given) -> None:
    await steps.change(
        conn,
        mailing=Mailing.of(node_settings(dsn, 25)),
        account_id=account,
        sequence_id=sequence,
        at=at,
        changes={"window": given},
    )


async def test_a_member_who_rejoins_gets_the_step_that_waited_for_its_window(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Step 2 waits for its window; the member leaves (the row is settled), the window changes, the member
    rejoins: step 2 is queued again, in the new window, and step 3 waits for it."""
    account, list_id, sequence, (first, second, third) = await make_sequence(conn, dsn, [0, 0, 0])
    await set_window(conn, dsn, account, sequence, 2, closed_window())
    members = await join(conn, account, list_id, [f"w{i}@example.com" for i in range(5)])
    await sweep(conn, batch=10, wait_seconds=0)
    await conn.execute("UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1", first)
    await sweep(conn, batch=10, wait_seconds=0)
    assert set((await rows(conn, second)).values()) == {"queued"}
    for member in members:
        await leave(conn, list_id, member)
    assert set((await rows(conn, second)).values()) == {"suppressed"}
    await set_window(conn, dsn, account, sequence, 2, open_window())
    await join(conn, account, list_id, [f"w{i}@example.com" for i in range(5)])
    for _ in range(3):
        await sweep(conn, batch=10, wait_seconds=0)
    again = await conn.fetch(
        "SELECT status, next_attempt_at <= now() AS now FROM einmal.sends WHERE campaign_id = $1", second
    )
    assert [tuple(r) for r in again] == [("queued", True)] * 5, "step 2 again, in its window as it now is"
    assert await rows(conn, third) == {}, "step 3 waits for step 2"


async def test_a_member_who_leaves_and_rejoins_at_once_keeps_its_queued_step(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    (member,) = await join(conn, account, list_id, ["quick@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    for _ in range(3):
        await leave(conn, list_id, member)
        await join(conn, account, list_id, ["quick@example.com"])
        await sweep(conn, batch=10, wait_seconds=0)
    assert await rows(conn, first) == {member: "queued"}, "step 1 is not lost"
    assert await rows(conn, second) == {}, "step 2 waits for it"


async def test_a_changed_window_moves_the_rows_queued_for_the_old_one(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0], window=closed_window())
    await join(conn, account, list_id, ["a@example.com", "b@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    waiting = (
        "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued' AND next_attempt_at > now()"
    )
    assert await conn.fetchval(waiting, first) == 2
    await set_window(conn, dsn, account, sequence, 1, open_window())
    assert await conn.fetchval(waiting, first) == 0, "due now: the window is open"
    await set_window(conn, dsn, account, sequence, 1, closed_window())
    assert await conn.fetchval(waiting, first) == 2, "placed at the new window's opening"


@pytest.mark.parametrize("status", ["queued", "claimed"])
async def test_a_leave_settles_the_members_step_row_not_yet_on_the_wire(
    conn: asyncpg.Connection, dsn: str, status: str
) -> None:
    """A plain DELETE of the membership (the API's, an import's): the trigger settles the row, not the page."""
    account, list_id, _, (first,) = await make_sequence(conn, dsn, [0])
    goes, stays = await join(conn, account, list_id, ["goes@example.com", "stays@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    await conn.execute(
        "UPDATE einmal.sends SET status = $2, claimed_by = CASE WHEN $2 = 'claimed' THEN 'node-a' END "
        "WHERE campaign_id = $1",
        first,
        status,
    )
    await leave(conn, list_id, goes)
    found = await conn.fetch("SELECT subscriber_id, status, last_reply, claimed_by FROM einmal.sends")
    by = {r["subscriber_id"]: tuple(r)[1:] for r in found}
    assert by[goes] == ("suppressed", "left the list", None)
    assert by[stays][0] == status, "the member who stays keeps its row"


async def test_the_sweep_queues_nothing_for_a_member_no_longer_confirmed(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (first,) = await make_sequence(conn, dsn, [0])
    doubtful, member = await join(conn, account, list_id, ["again@example.com", "sure@example.com"])
    # the membership is no longer confirmed (awaiting a confirmation again) while the member is due
    await conn.execute("UPDATE einmal.list_members SET state = 'unconfirmed' WHERE subscriber_id = $1", doubtful)
    assert (await sweep(conn, batch=10, wait_seconds=0)).looked == 2
    assert await rows(conn, first) == {member: "queued"}
    assert (
        await conn.fetchval("SELECT due_at FROM einmal.sequence_members WHERE subscriber_id = $1", doubtful) is None
    ), "done until it joins again"


async def test_a_rejoin_continues_from_the_first_join(conn: asyncpg.Connection, dsn: str) -> None:
    """Step 2 fell due while the member was off the list: it is queued at once on the rejoin, and the join's
    time stays (a restart would count step 2's delay from the rejoin)."""
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 3600])
    (member,) = await join(conn, account, list_id, ["back@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    await conn.execute("UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1", first)
    await leave(conn, list_id, member)
    # two hours pass off the list: step 2 fell due meanwhile
    await conn.execute("UPDATE einmal.sequence_members SET joined_at = joined_at - interval '2 hours'")
    await conn.execute("UPDATE einmal.sends SET sent_at = sent_at - interval '2 hours' WHERE campaign_id = $1", first)
    joined = await conn.fetchval("SELECT joined_at FROM einmal.sequence_members")
    await join(conn, account, list_id, ["back@example.com"])
    assert (await sweep(conn, batch=10, wait_seconds=0)).queued == 1
    queued = await conn.fetchrow(
        "SELECT status, next_attempt_at <= now() AS due FROM einmal.sends WHERE campaign_id = $1", second
    )
    assert tuple(queued) == ("queued", True), "step 2 at once, not an hour after the rejoin"
    assert await conn.fetchval("SELECT joined_at FROM einmal.sequence_members") == joined
    assert await rows(conn, first) == {member: "sent"}, "step 1 not again"


async def waiting_for_a_lock(conn: asyncpg.Connection, pid: int) -> bool:
    return await conn.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid) is True


async def test_the_sweeper_holds_its_steps_so_a_delete_cancels_the_row_it_queues(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """The real sweep (actors/sequencer.py sweep_one) is held inside its transaction, after its first statement,
    by an uncommitted row of the same (step, member) in another transaction (its insert waits for it); a step
    delete then waits for the sweep, and cancels the row the sweep queued. Without the steps held FOR SHARE the
    delete commits first and the row the sweep queues after it stays queued in a cancelled step for good."""
    account, list_id, sequence, (first, second) = await make_sequence(conn, dsn, [0, 0])
    (member,) = await join(conn, account, list_id, ["r@example.com"])
    sweeper, blocker, deleter = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id) "
            "VALUES ($1, $2, $3, 'r@example.com', 'r@example.com', 'campaign:' || $1::bigint || ':' || $3::bigint)",
            first,
            account,
            member,
        )
        results: dict[str, object] = {}

        async def sweep_it() -> None:
            results["swept"] = await sweep_one(sweeper, sequence_id=sequence, batch=10, wait_seconds=0)

        async def delete_it() -> None:
            await steps.delete(deleter, account_id=account, sequence_id=sequence, at=1)
            results["deleted"] = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(sweep_it)
            with anyio.fail_after(10):
                while not await waiting_for_a_lock(conn, sweeper.get_server_pid()):
                    await anyio.sleep(0.05)
            tg.start_soon(delete_it)
            with anyio.fail_after(10):  # the delete waits for the sweep, or (without its hold) is done
                while not ("deleted" in results or await waiting_for_a_lock(conn, deleter.get_server_pid())):
                    await anyio.sleep(0.05)
            await holding.rollback()
    finally:
        for connection in (sweeper, blocker, deleter):
            await connection.close()
    assert results["swept"] == (1, 1)
    row = await conn.fetchrow("SELECT status, last_reply FROM einmal.sends WHERE campaign_id = $1", first)
    assert tuple(row) == ("failed", "campaign cancelled"), "the delete cancelled the row the sweep queued"
    assert (await sweep(conn, batch=10, wait_seconds=0)).queued == 1, "the member goes on to the next step"
    assert await rows(conn, second) == {member: "queued"}


async def test_a_delay_counts_from_the_previous_steps_send(conn: asyncpg.Connection, dsn: str) -> None:
    """Step 2 went out late (its delay after the join long past): step 3 comes its own delay after step 2's send,
    not at once; and the member is looked at again exactly then."""
    account, list_id, _, (first, second, third) = await make_sequence(conn, dsn, [0, 60, 120])
    (member,) = await join(conn, account, list_id, ["late@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    await conn.execute("UPDATE einmal.sequence_members SET joined_at = now() - interval '1 hour', due_at = now()")
    await conn.execute(  # step 1 went out 61 s ago: step 2 is due
        "UPDATE einmal.sends SET status = 'sent', sent_at = now() - interval '61 s' WHERE campaign_id = $1", first
    )
    assert (await sweep(conn, batch=10, wait_seconds=0)).queued == 1
    assert await rows(conn, second) == {member: "queued"}
    sent = await conn.fetchval(
        "UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1 RETURNING sent_at", second
    )
    await conn.execute("UPDATE einmal.sequence_members SET due_at = now()")
    await sweep(conn, batch=10, wait_seconds=0)
    assert await rows(conn, third) == {}, "not at once after a late step 2"
    due = await conn.fetchval("SELECT due_at FROM einmal.sequence_members")
    assert due == sent + timedelta(seconds=120), "looked at again 120 s after step 2's send"
    await conn.execute("UPDATE einmal.sends SET sent_at = sent_at - interval '120 s' WHERE campaign_id = $1", second)
    await conn.execute("UPDATE einmal.sequence_members SET due_at = now()")
    assert (await sweep(conn, batch=10, wait_seconds=0)).queued == 1, "due 120 s after step 2's send"
    assert await rows(conn, third) == {member: "queued"}


async def test_a_step_added_later_counts_its_delay_from_the_members_last_step(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0])
    (member,) = await join(conn, account, list_id, ["done@example.com"])
    await sweep(conn, batch=10, wait_seconds=0)
    await conn.execute(
        "UPDATE einmal.sends SET status = 'sent', sent_at = now() - interval '50 s' WHERE campaign_id = $1", first
    )
    await conn.execute("UPDATE einmal.sequence_members SET joined_at = now() - interval '1 day'")
    assert await conn.fetchval("SELECT due_at FROM einmal.sequence_members") is None, "past the last step: done"
    added = await steps.add(
        conn,
        mailing=Mailing.of(node_settings(dsn, 25)),
        account_id=account,
        sequence_id=sequence,
        subject="Later",
        from_address="news@example.com",
        text="added later",
        delay_seconds=60,
    )
    await sweep(conn, batch=10, wait_seconds=0)
    assert await rows(conn, added.campaign_id) == {}, "60 s after step 1's send, 50 s ago: not yet"
    await conn.execute("UPDATE einmal.sends SET sent_at = sent_at - interval '10 s' WHERE campaign_id = $1", first)
    await conn.execute("UPDATE einmal.sequence_members SET due_at = now()")
    await sweep(conn, batch=10, wait_seconds=0)
    assert await rows(conn, added.campaign_id) == {member: "queued"}


async def test_members_leaving_and_rejoining_quickly_get_every_step_once(conn: asyncpg.Connection, dsn: str) -> None:
    """12 members leave and rejoin ten times, 0.2 s apart, while a node sends their steps at 4 a second (so that
    the leaves find rows queued, claimed or on the wire): each gets each step exactly once (a leave that stopped a
    step's row gives it back on the rejoin)."""
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 1])
    emails = [f"q{i}@example.com" for i in range(12)]
    received = Stamped(delay=0.05)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, rate_limit=4, **FAST)):
        members = await join(conn, account, list_id, emails)
        for _ in range(10):
            for member in members:
                await leave(conn, list_id, member)
            await anyio.sleep(0.1)
            await join(conn, account, list_id, emails)
            await anyio.sleep(0.1)
        with anyio.fail_after(60):  # until every member is past the last step and no row is open
            while await conn.fetchval(
                "SELECT (SELECT count(*) FROM einmal.sends WHERE status IN ('queued', 'claimed', 'sending')) "
                "+ (SELECT count(*) FROM einmal.sequence_members WHERE due_at IS NOT NULL OR last_position < 2)"
            ):
                await anyio.sleep(0.2)
        await anyio.sleep(1)
    got = received.by_step()
    assert sorted(got.get(first, [])) == sorted(members), "step 1 once each"
    assert sorted(got.get(second, [])) == sorted(members), "step 2 once each"
