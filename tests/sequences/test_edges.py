"""Sequences at their edges (docs/design.md#sequences): an operator's decision about a step's rows after the
member left, a rejoin while a step waits for its window, a window changed under queued rows, and the defences of
the sweep and the leave trigger, each removed once in a scratch copy to see the test here fail."""

from datetime import UTC, datetime

import asyncpg
import pytest

from actors.sequencer import sweep
from service.campaigns import rows as campaign_rows
from service.sequences import steps
from tests.conftest import einmal
from tests.sequences.helpers import join, leave, make_sequence, rows
from tests.support.pipeline import node_settings

pytestmark = pytest.mark.anyio


async def in_doubt_first_step(conn: asyncpg.Connection, dsn: str) -> tuple[int, int, int, int, int]:
    """(account, list, first step, second step, the member who left): two members whose first step's row was
    left in doubt (its answer lost after the final dot); the second member has left the list since."""
    account, list_id, _, (first, second) = await make_sequence(conn, dsn, [0, 0])
    stays, goes = await join(conn, account, list_id, ["stays@example.com", "goes@example.com"])
    assert (await sweep(conn, batch=10, wait_seconds=60)).queued == 2
    await conn.execute(
        "UPDATE einmal.sends SET status = 'in_doubt', claimed_by = 'node-a', attempts = 1 WHERE campaign_id = $1",
        first,
    )
    await leave(conn, list_id, goes)
    assert (await rows(conn, first))[goes] == "in_doubt", "a row in doubt is the operator's, not the leave's"
    return account, list_id, first, second, goes


@pytest.mark.parametrize("via", ["function", "cli"])
async def test_a_resend_of_an_in_doubt_step_skips_a_member_who_left(
    conn: asyncpg.Connection, dsn: str, via: str
) -> None:
    _, _, first, _, goes = await in_doubt_first_step(conn, dsn)
    if via == "cli":
        result = einmal("reconcile", str(first), "--resend", dsn=dsn)
        assert result.returncode == 0, result.stderr
        said = result.stdout
    else:
        done = await campaign_rows.decide(conn, campaign_id=first, resend=True)
    found = await conn.fetch("SELECT subscriber_id, status, last_reply FROM einmal.sends WHERE campaign_id = $1", first)
    by = {r["subscriber_id"]: (r["status"], r["last_reply"]) for r in found}
    assert by[goes] == ("suppressed", "left the list"), "not sent again to a member who left"
    assert sorted(s for s, _ in by.values()) == ["queued", "suppressed"], "the member who stays is queued again"
    if via == "cli":
        assert "1 in-doubt row of campaign" in said and "1 of a member who left" in said
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
        settings=node_settings(dsn, 25),
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
    waiting = "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued' AND next_attempt_at > now()"
    assert await conn.fetchval(waiting, first) == 2
    await set_window(conn, dsn, account, sequence, 1, open_window())
    assert await conn.fetchval(waiting, first) == 0, "due now: the window is open"
    await set_window(conn, dsn, account, sequence, 1, closed_window())
    assert await conn.fetchval(waiting, first) == 2, "placed at the new window's opening"
