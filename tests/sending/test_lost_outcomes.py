"""No SMTP answer is dropped without a word (docs/design.md#liveness). After an asynchronous failover a row the
node had moved to `sending` can be back in `claimed` on the new primary, under the same token: the answer
is recorded there all the same, a 250 as `sent`, a refusal as it would be from `sending`. An answer that
finds no row of its token's at all (another node holds it, the queue has it back, it is gone) is logged
with the row's ids, counted in /metrics and kept in `einmal.lost_outcomes` for the operator."""

import asyncpg
import pytest

from actors.batch import Outcome
from actors.writer import Recording, advance, record
from service.settings import Settings
from tests.sending.test_budget import CLAIM, sending_campaign
from tests.support.wiring import recording

pytestmark = pytest.mark.anyio

NO_LIMITS = (0.0, 0, 0, 3600.0, 86400.0)
TOKEN = "node-a/0f0f0f0f.1"


def context() -> Recording:
    return recording(Settings())  # the writer's statements need no pool


async def test_an_answer_for_a_row_still_claimed_by_its_token_is_recorded(conn: asyncpg.Connection) -> None:
    campaign = await sending_campaign(conn, 3)
    ids = sorted(r["id"] for r in await conn.fetch(CLAIM, campaign, TOKEN, 3, *NO_LIMITS))
    assert len(ids) == 3
    # as an asynchronous failover leaves them: the move to `sending` was lost, the claim was not
    outcomes = [
        Outcome(ids[0], "sent", "250 2.0.0 Ok: queued"),
        Outcome(ids[1], "failed", "550 5.1.1 no such user", attempts=1, bounce=True),
        Outcome(ids[2], "queued", "451 4.3.0 try later", attempts=1, retry_after=60.0),
    ]
    rows = await advance(conn, context().pauses, outcomes, TOKEN, [])
    assert rows[0]["recorded"] == 3
    found = {
        r["id"]: tuple(r)[1:]
        for r in await conn.fetch(
            "SELECT id, status, attempts, claimed_by, sent_at IS NOT NULL FROM einmal.sends WHERE campaign_id = $1",
            campaign,
        )
    }
    assert found == {
        ids[0]: ("sent", 0, TOKEN, True),
        ids[1]: ("failed", 1, TOKEN, False),
        ids[2]: ("queued", 1, None, False),
    }
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions WHERE reason = 'bounce'") == 1
    assert await conn.fetchval("SELECT count(*) FROM einmal.lost_outcomes") == 0


async def test_an_answer_that_finds_no_row_of_its_token_is_logged_counted_and_kept(
    conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="einmal")
    campaign = await sending_campaign(conn, 4)
    theirs = [r["id"] for r in await conn.fetch(CLAIM, campaign, "node-b/1a1a1a1a.1", 1, *NO_LIMITS)]
    mine = sorted(r["id"] for r in await conn.fetch(CLAIM, campaign, TOKEN, 2, *NO_LIMITS))
    queued = await conn.fetchval("SELECT id FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued'", campaign)
    gone = await conn.fetchval("SELECT max(id) + 1000 FROM einmal.sends")
    subscriber = dict(await conn.fetch("SELECT id, subscriber_id FROM einmal.sends WHERE campaign_id = $1", campaign))
    ctx = context()
    outcomes = [
        Outcome(mine[0], "sent", "250 ok"),  # recorded: the row is still this token's
        Outcome(theirs[0], "sent", "250 ok"),  # another node holds the row
        Outcome(queued, "sent", "250 ok"),  # the claim itself was lost: the queue has it back
        Outcome(gone, "failed", "550 5.1.1 no such user <x@example.com>", attempts=1),
    ]
    rows = await record(conn, ctx, outcomes, TOKEN, [(mine[1], campaign)])
    assert rows[0]["recorded"] == 1
    assert [r["id"] for r in rows] == [mine[1]], "the next row still starts"
    states = dict(await conn.fetch("SELECT id, status FROM einmal.sends WHERE campaign_id = $1", campaign))
    assert (states[mine[0]], states[mine[1]], states[theirs[0]], states[queued]) == (
        "sent",
        "sending",
        "claimed",
        "queued",
    ), "nothing written onto a row that is not the token's"
    kept = [
        tuple(r)
        for r in await conn.fetch("""
        SELECT send_id, campaign_id, subscriber_id, token, outcome, reply_code, found_status, found_claimed_by
        FROM einmal.lost_outcomes ORDER BY send_id""")
    ]
    assert kept == [
        (theirs[0], campaign, subscriber[theirs[0]], TOKEN, "sent", "250", "claimed", "node-b/1a1a1a1a.1"),
        (queued, campaign, subscriber[queued], TOKEN, "sent", "250", "queued", None),
        (gone, None, None, TOKEN, "failed", "550", None, None),
    ]
    assert ctx.metrics.lost_outcomes._value.get() == 3
    lines = [r.getMessage() for r in caplog.records if "found no row" in r.getMessage()]
    assert len(lines) == 3, caplog.text
    assert f"send {theirs[0]} (campaign {campaign}, subscriber {subscriber[theirs[0]]})" in caplog.text
    assert "the row is claimed by node-b/1a1a1a1a.1" in caplog.text
    assert (
        f"send {gone}: its answer (failed, reply 550) found no row of {TOKEN} to record it on: there is no such "
        "row" in caplog.text
    )
    assert "x@example.com" not in caplog.text, "a reply may quote the address: only its code is logged"


async def test_an_answer_written_again_after_its_statement_committed_is_not_reported_lost(
    conn: asyncpg.Connection,
) -> None:
    campaign = await sending_campaign(conn, 1)
    [row] = [r["id"] for r in await conn.fetch(CLAIM, campaign, TOKEN, 1, *NO_LIMITS)]
    ctx = context()
    # the statement committed but its answer never came back (the connection died): the next
    # incarnation writes the same outcome again, and finds it already there
    for _ in range(2):
        await record(conn, ctx, [Outcome(row, "sent", "250 ok")], TOKEN)
    assert await conn.fetchval("SELECT status FROM einmal.sends WHERE id = $1", row) == "sent"
    assert await conn.fetchval("SELECT count(*) FROM einmal.lost_outcomes") == 0
    assert ctx.metrics.lost_outcomes._value.get() == 0
