"""Sequences at their edges (docs/design.md#sequences): an operator's decision about a step's rows after the
member left, a rejoin while a step waits for its window, a window changed under queued rows, and the defences of
the sweep and the leave trigger, each removed once in a scratch copy to see the test here fail."""

import asyncpg
import pytest

from actors.sequencer import sweep
from service.campaigns import rows as campaign_rows
from tests.conftest import einmal
from tests.sequences.helpers import join, leave, make_sequence, rows

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
