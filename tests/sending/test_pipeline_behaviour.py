"""What the pipeline does with opt-outs, SMTP refusals, pause, resume and
cancel — a node in the test's event loop, a real PostgreSQL, a real SMTP server."""

import time
from collections import Counter

import anyio
import asyncpg
import pytest

from tests.conftest import einmal
from tests.support.pipeline import (
    Received,
    approve,
    counts,
    node_settings,
    recording_server,
    running_node,
    seed,
    wait_status,
)

pytestmark = pytest.mark.anyio


async def wait_received(received: Received, n: int, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while len(received.messages) < n:
            await anyio.sleep(0.01)


async def test_opt_out_committed_mid_send_is_not_sent_after_the_commit(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"o{i}@example.com" for i in range(400)])
    received = Received(delay=0.01)
    async with recording_server(received) as port:
        async with running_node(node_settings(dsn, port, smtp_connections=2, batch_size=100)):
            await approve(conn, campaign)
            await wait_received(received, 20)
            # opt-outs for addresses already claimed by the node (in its current batch) or still queued, in one
            # statement: the node goes on sending while it runs, so a victim may still go out before it commits
            victims = await conn.fetch(
                """
                INSERT INTO einmal.suppressions (account_id, email_lower, reason)
                SELECT account_id, email_lower, 'unsubscribe' FROM einmal.sends
                WHERE campaign_id = $1 AND status IN ('claimed', 'queued') ORDER BY id LIMIT 60
                RETURNING email_lower""",
                campaign,
            )
            committed = time.monotonic()  # after the commit: the server and the node share this clock and loop
            assert len(victims) == 60
            await wait_status(conn, campaign, "sent")
    victim_addresses = {v["email_lower"] for v in victims}
    leaked = [(at, rcpt) for at, rcpt, _ in received.messages if rcpt in victim_addresses]
    after = [rcpt for at, rcpt in leaked if at > committed]
    # what goes out after the commit: per connection, the one message on the wire or whose start ran beside it
    assert len(after) <= 2, f"only the group already on the wire (one per connection) may go out: {after}"
    assert len(leaked) < 20, f"the opt-outs came too late to test anything: {leaked}"
    statuses = await conn.fetch(
        "SELECT status, count(*) FROM einmal.sends WHERE email_lower = ANY ($1) GROUP BY status", list(victim_addresses)
    )
    assert {r["status"]: r["count"] for r in statuses} == {
        "suppressed": 60 - len(leaked),
        **({"sent": len(leaked)} if leaked else {}),
    }


async def test_a_4xx_is_retried_and_then_sent_once(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"r{i}@example.com" for i in range(20)])
    refusals = Counter()

    def decide(rcpt: str) -> str | None:
        if rcpt in ("r3@example.com", "r7@example.com") and refusals[rcpt] < 2:
            refusals[rcpt] += 1
            return "451 4.3.0 try again later"
        return None

    received = Received(decide)
    async with recording_server(received) as port, running_node(node_settings(dsn, port)):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent")
    assert await counts(conn, campaign) == {"sent": 20}
    assert Counter(rcpt for _, rcpt, _ in received.messages) == Counter(f"r{i}@example.com" for i in range(20))
    rows = await conn.fetch("SELECT email, attempts FROM einmal.sends WHERE attempts > 0 ORDER BY email")
    assert [(r["email"], r["attempts"]) for r in rows] == [("r3@example.com", 2), ("r7@example.com", 2)]


async def test_too_many_4xx_fail_the_row(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, ["ok@example.com", "busy@example.com"])
    received = Received(lambda rcpt: "452 4.2.2 mailbox full" if rcpt.startswith("busy") else None)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, max_attempts=3)):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent")
    row = await conn.fetchrow("SELECT status, attempts, last_reply FROM einmal.sends WHERE email LIKE 'busy%'")
    assert (row["status"], row["attempts"]) == ("failed", 3)
    assert row["last_reply"].startswith("452")


async def test_a_5xx_fails_the_row_a_5_1_x_suppresses_and_a_5_7_x_pauses_the_domain(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(
        conn, ["a@example.com", "gone@bounce.test", "b@example.com", "spam@policy.test", "big@content.test"]
    )

    def decide(rcpt: str) -> str | None:
        if rcpt.endswith("@bounce.test"):
            return "550 5.1.1 no such user"
        if rcpt.endswith("@policy.test"):
            return "554 5.7.1 rejected by policy"
        if rcpt.endswith("@content.test"):
            return "552 5.3.4 message too big"
        return None

    async with recording_server(Received(decide)) as port, running_node(node_settings(dsn, port)):
        await approve(conn, campaign)
        with anyio.fail_after(30):
            while await counts(conn, campaign) != {"sent": 2, "failed": 2, "queued": 1}:
                await anyio.sleep(0.05)
    rows = {
        r["email"]: (r["status"], r["last_reply"][:9], r["attempts"])
        for r in await conn.fetch("SELECT email, status, last_reply, attempts FROM einmal.sends")
    }
    assert rows["gone@bounce.test"] == ("failed", "550 5.1.1", 1)
    assert rows["big@content.test"] == ("failed", "552 5.3.4", 1)
    # the domain refuses the sender, not the address: paused, the row back in the queue after one attempt
    assert rows["spam@policy.test"] == ("queued", "554 5.7.1", 1)
    assert rows["a@example.com"][0] == rows["b@example.com"][0] == "sent"
    suppressions = await conn.fetch("SELECT email_lower, reason FROM einmal.suppressions")
    assert [tuple(r) for r in suppressions] == [("gone@bounce.test", "bounce")]
    assert (
        await conn.fetchval("SELECT last_reply FROM einmal.domains WHERE domain = 'policy.test'")
        == "554 5.7.1 rejected by policy"
    )


async def test_pause_stops_sending_and_resume_finishes(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"p{i}@example.com" for i in range(600)])
    received = Received(delay=0.01)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, smtp_connections=2)):
        await approve(conn, campaign)
        await wait_received(received, 50)
        result = await anyio.to_thread.run_sync(lambda: einmal("campaign", "pause", str(campaign), dsn=dsn))
        assert result.returncode == 0, result.stderr
        # the node settles what it holds: the rows on the wire are recorded, the claimed ones go back
        with anyio.fail_after(60):
            while {"claimed", "sending"} & set(await counts(conn, campaign)):
                await anyio.sleep(0.05)
        settled = len(received.messages)
        await anyio.sleep(1.0)  # a window to watch, not a bound: a slower machine would only send less
        assert len(received.messages) == settled, "nothing is sent while paused"
        assert settled < 600
        result = await anyio.to_thread.run_sync(lambda: einmal("campaign", "resume", str(campaign), dsn=dsn))
        assert result.returncode == 0, result.stderr
        await wait_status(conn, campaign, "sent")
    assert await counts(conn, campaign) == {"sent": 600}
    assert len(received.ids()) == len(set(received.ids())) == 600


async def test_cancel_mid_send_leaves_nothing_queued(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, [f"c{i}@example.com" for i in range(600)])
    received = Received(delay=0.01)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, smtp_connections=2)):
        await approve(conn, campaign)
        await wait_received(received, 50)
        result = await anyio.to_thread.run_sync(lambda: einmal("campaign", "cancel", str(campaign), dsn=dsn))
        assert result.returncode == 0, result.stderr
        with anyio.fail_after(60):
            while {"queued", "claimed", "sending"} & set(await counts(conn, campaign)):
                await anyio.sleep(0.1)
        sent_then = len(received.messages)
        await anyio.sleep(0.5)
        assert len(received.messages) == sent_then
    final = await counts(conn, campaign)
    assert set(final) <= {"sent", "failed"} and sum(final.values()) == 600
    assert final["sent"] == len(received.messages) < 600
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "cancelled"


async def test_two_schedulers_racing_to_start_a_campaign_one_wins(conn: asyncpg.Connection, dsn: str) -> None:
    from service import db

    other = await asyncpg.connect(dsn)
    try:
        for _ in range(10):
            campaign = (
                await conn.fetchval("""
                INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
                VALUES ((SELECT coalesce(max(id), 0) FROM einmal.accounts), 'race', 's', 'a@example.com', 't',
                        '{}', 'approved') RETURNING id""")
                if await conn.fetchval("SELECT count(*) FROM einmal.accounts")
                else None
            )
            if campaign is None:
                await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('race')")
                continue
            results: list = []

            async def start(c: asyncpg.Connection, campaign_id: int = campaign, results: list = results) -> None:
                results.append(await c.fetchrow(*db.sql("campaign_start", campaign_id=campaign_id)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(start, conn)
                tg.start_soon(start, other)
            assert sum(r is not None for r in results) == 1
    finally:
        await other.close()


async def test_a_campaign_that_cannot_be_rendered_is_paused_not_a_crash_loop(
    conn: asyncpg.Connection, dsn: str
) -> None:
    # {{ unsubscribe_url }} needs EINMAL_UNSUBSCRIBE_URL, which this node lacks; both campaigns were made with
    # --no-unsubscribe, so that only the template stops the first
    broken = await seed(conn, ["a@example.com"], body="Leave: {{ unsubscribe_url }}")
    fine = await conn.fetchval(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
        SELECT account_id, 'fine', 'Hi', 'news@example.com', 'Hello {{ name }}', list_ids
        FROM einmal.campaigns WHERE id = $1 RETURNING id""",
        broken,
    )
    await conn.execute("UPDATE einmal.campaigns SET unsubscribe_required = false")
    received = Received()
    async with (
        recording_server(received) as port,
        running_node(node_settings(dsn, port, unsubscribe_url=None, unsubscribe_secret=None)),
    ):
        await approve(conn, broken)
        await wait_status(conn, broken, "paused")
        await approve(conn, fine)
        await wait_status(conn, fine, "sent")
    assert await counts(conn, broken) == {"queued": 1}
    assert [rcpt for _, rcpt, _ in received.messages] == ["a@example.com"]
    reason = await conn.fetchval("SELECT pause_reason FROM einmal.campaigns WHERE id = $1", broken)
    assert reason == "cannot render: {{ unsubscribe_url }} is used but EINMAL_UNSUBSCRIBE_URL is not set"


async def test_a_notification_wakes_the_scheduler_at_once_and_nothing_restarts(
    conn: asyncpg.Connection, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    campaign = await seed(conn, [f"n{i}@example.com" for i in range(5)])
    caplog.set_level("INFO", logger="einmal")
    async with (
        recording_server(Received()) as port,
        running_node(node_settings(dsn, port, tick_seconds=600, node_timeout_seconds=1200)),
    ):
        await anyio.sleep(0.5)  # the first tick is long past; the next is 600 s away
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent", timeout=120)  # long before the next tick: the notification
    assert "restarting" not in caplog.text, caplog.text


class Gated(Received):
    """Holds every message's reply until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting, self.release = anyio.Event(), anyio.Event()

    async def handle_DATA(self, server, session, envelope) -> str:
        if not self.release.is_set():
            self.waiting.set()
            await self.release.wait()
        return await super().handle_DATA(server, session, envelope)


async def test_an_opt_out_the_node_never_heard_of_stops_a_claimed_row_at_the_move_to_sending(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, [f"q{i}@example.com" for i in range(10)])
    received = Gated()
    async with recording_server(received) as port:
        async with running_node(node_settings(dsn, port, smtp_connections=1, batch_size=10)):
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await received.waiting.wait()  # one message on the wire, the rest of the batch claimed
            target = await conn.fetchrow(
                """
                SELECT account_id, email_lower FROM einmal.sends
                WHERE campaign_id = $1 AND status = 'claimed' ORDER BY id DESC LIMIT 1""",
                campaign,
            )
            assert target is not None
            # the opt-out commits without its notification (as when the listener is disconnected): only
            # the table knows it, after the row was claimed
            async with conn.transaction():
                await conn.execute("ALTER TABLE einmal.suppressions DISABLE TRIGGER suppressions_notify")
                await conn.execute(
                    "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, $2, 'unsubscribe')",
                    *target,
                )
                await conn.execute("ALTER TABLE einmal.suppressions ENABLE TRIGGER suppressions_notify")
            assert (
                await conn.fetchval("SELECT status FROM einmal.sends WHERE email_lower = $1", target["email_lower"])
                == "claimed"
            )
            received.release.set()
            await wait_status(conn, campaign, "sent")
    assert target["email_lower"] not in {rcpt for _, rcpt, _ in received.messages}
    assert await counts(conn, campaign) == {"sent": 9, "suppressed": 1}
