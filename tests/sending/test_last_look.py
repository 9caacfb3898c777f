"""The last look before DATA (docs/design.md#opt-outs, P5): an opt-out that commits after the statement that
moved its row to `sending` took its snapshot, and whose notification reaches the node before the message
goes out, stops the message. Only the in-memory set can see it: the statement that started the row could
not, and nothing reads the table between that statement and DATA."""

import anyio
import asyncpg
import pytest

from service.addresses import email_key
from tests.sending.test_pipeline_behaviour import Gated
from tests.support.pipeline import approve, counts, node_settings, recording_server, running_node, seed, wait_status

pytestmark = pytest.mark.anyio


async def test_an_opt_out_heard_after_the_row_started_and_before_data_stops_the_message(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, ["a-first@example.com", "b-late-opt-out@example.com"])
    received = Gated()
    locker = await asyncpg.connect(dsn)
    # no tick of its own for the test's length: the scheduler runs only when a campaign notification
    # wakes it, so its heartbeat says when the node's listener has taken a notification in
    try:
        async with recording_server(received) as port:
            async with running_node(
                node_settings(
                    dsn,
                    port,
                    smtp_connections=1,
                    batch_size=2,
                    tick_seconds=600,
                    node_timeout_seconds=1200,
                    node_id="looker",
                )
            ):
                await approve(conn, campaign)
                with anyio.fail_after(30):
                    await received.waiting.wait()  # the first message is on the wire, the second claimed
                target = await conn.fetchrow(
                    "SELECT id, account_id, email FROM einmal.sends WHERE campaign_id = $1 AND status = 'claimed'",
                    campaign,
                )
                assert target is not None and target["email"] == "b-late-opt-out@example.com"
                # hold the claimed row, so that the statement starting it takes its snapshot and then waits
                lock = locker.transaction()
                await lock.start()
                await locker.execute("SELECT 1 FROM einmal.sends WHERE id = $1 FOR UPDATE", target["id"])
                received.release.set()  # the first is answered: its outcome and the second's start go in
                with anyio.fail_after(30):
                    while not await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'einmal sender %' "
                        "AND wait_event_type = 'Lock' AND datname = current_database()"
                    ):
                        await anyio.sleep(0.02)
                # the opt-out commits now, after that snapshot, and a campaign notification behind it: the
                # listener takes a connection's notifications in commit order, so once the scheduler has
                # run for the second, the first is in the node's set
                async with conn.transaction():
                    await conn.execute(
                        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) "
                        "VALUES ($1, $2, 'unsubscribe')",
                        target["account_id"],
                        email_key(target["email"]),
                    )
                    await conn.execute("SELECT pg_notify('einmal_campaign', $1)", str(campaign))
                    before = await conn.fetchval("SELECT clock_timestamp()")
                with anyio.fail_after(30):
                    while not await conn.fetchval(
                        "SELECT heartbeat_at > $1 FROM einmal.nodes WHERE id LIKE 'looker/%'", before
                    ):
                        await anyio.sleep(0.02)
                await lock.rollback()  # the row starts: the statement's snapshot has no suppression
                await wait_status(conn, campaign, "sent", timeout=30)
    finally:
        await locker.close()
    row = await conn.fetchrow("SELECT status, last_reply FROM einmal.sends WHERE id = $1", target["id"])
    assert tuple(row) == ("suppressed", "suppressed before sending")
    assert [rcpt for _, rcpt, _ in received.messages] == ["a-first@example.com"]
    assert await counts(conn, campaign) == {"sent": 1, "suppressed": 1}
