"""A node's claim tokens (docs/design.md#liveness): a process restarted with the same fixed EINMAL_NODE_ID takes
a token of its own, so the rows its predecessor held are returned by the ordinary rules once that process's
heartbeat is older than the timeout, while it sends the rest; and a token whose answers are not recorded
yet (the database went away) is kept alive until they are, however long the outage was."""

from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from actors.batch import Outcome
from actors.pipeline import record_unrecorded
from service import db
from tests.support.pipeline import (
    TAKEOVER_TIMEOUT,
    Received,
    approve,
    counts,
    message_id,
    node_env,
    node_settings,
    recording_server,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio

CONNECTIONS = 4


async def test_a_node_killed_and_restarted_with_its_fixed_id_returns_what_the_dead_process_held(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    addresses = [f"k{i}@example.com" for i in range(1000)]
    campaign = await seed(conn, addresses)
    received = Received(delay=0.01)
    async with recording_server(received) as port:
        env = node_env(
            dsn,
            port,
            EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
            EINMAL_BATCH_SIZE="100",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
            EINMAL_NODE_ID="fixed",
        )
        first = start_node(env, tmp_path / "first.log")
        second = None
        try:
            await approve(conn, campaign)
            with anyio.fail_after(30):
                while len(received.messages) < 100:
                    assert first.poll() is None, (tmp_path / "first.log").read_text()
                    await anyio.sleep(0.02)
            first.kill()  # SIGKILL: nothing is given back
            await anyio.to_thread.run_sync(first.wait)
            # its backends may still be finishing a statement it sent before it died (on a loaded machine, its
            # writer's move of rows claimed -> sending): the rows are read once none is left
            with anyio.fail_after(15):
                while await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND application_name LIKE 'einmal%'"
                ):
                    await anyio.sleep(0.05)
            held = await conn.fetch(
                """
                SELECT id, subscriber_id, status, claimed_by FROM einmal.sends
                WHERE campaign_id = $1 AND status IN ('claimed', 'sending')""",
                campaign,
            )
            dead_tokens = {r["claimed_by"] for r in held}
            claimed = {r["id"]: r["subscriber_id"] for r in held if r["status"] == "claimed"}
            on_the_wire = {r["id"]: r["subscriber_id"] for r in held if r["status"] == "sending"}
            assert claimed, "the killed process held claimed rows"
            assert len(on_the_wire) <= CONNECTIONS
            second = start_node(env, tmp_path / "second.log")
            await wait_status(conn, campaign, "sent", timeout=60)
        finally:
            code = await stop_node(second) if second is not None else None
        assert code == 0, (tmp_path / "second.log").read_text()
    ids = Counter(received.ids())
    assert not {i: n for i, n in ids.items() if n > 1}, "nobody received twice"
    rows = {
        r["id"]: r
        for r in await conn.fetch("SELECT id, status, claimed_by FROM einmal.sends WHERE campaign_id = $1", campaign)
    }
    tokens = {r["claimed_by"] for r in rows.values() if r["status"] == "sent"}
    assert tokens - dead_tokens, "the restarted process sent under a token of its own"
    for row_id, subscriber in claimed.items():  # claimed -> queued, then sent by the new process
        assert rows[row_id]["status"] == "sent"
        assert rows[row_id]["claimed_by"] not in dead_tokens
        assert ids[message_id(campaign, subscriber)] == 1
    for row_id, subscriber in on_the_wire.items():  # sending -> in doubt (hold), never sent again
        assert rows[row_id]["status"] == "in_doubt"
        assert rows[row_id]["claimed_by"] in dead_tokens
        assert ids[message_id(campaign, subscriber)] <= 1
    final = await counts(conn, campaign)
    assert final == {
        "sent": len(addresses) - len(on_the_wire),
        **({"in_doubt": len(on_the_wire)} if on_the_wire else {}),
    }, final
    assert (
        await conn.fetchval("SELECT count(*) FROM einmal.nodes WHERE id = ANY ($1::text[])", list(dead_tokens)) == 0
    ), "the dead process's node row is gone"
    print(f"\nheld at SIGKILL: {len(claimed)} claimed, {len(on_the_wire)} sending; final {final}")


async def test_the_scheduler_keeps_a_token_alive_until_the_answers_it_holds_are_recorded(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(conn, [f"u{i}@example.com" for i in range(3)])
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
        SELECT $1::bigint, account_id, id, email, lower(email), 'campaign:' || $1::bigint || ':' || id
        FROM einmal.subscribers""",
        campaign,
    )
    pool = await db.create_pool(dsn, size=2, command_timeout=10)
    try:
        settings = node_settings(dsn, 2525, in_doubt="resend", node_id="n1")
        node = wiring(settings, pool, dsn)
        old = node.fencing.new_token()  # the incarnation that failed with the database, holding an answer
        node.fencing.new_token()
        # its last heartbeat is older than the node timeout: the outage lasted longer
        await conn.execute("INSERT INTO einmal.nodes (id, heartbeat_at) VALUES ($1, now() - interval '1 hour')", old)
        await conn.execute("UPDATE einmal.sends SET status = 'sending', claimed_by = $1", old)
        answered = await conn.fetchval("SELECT min(id) FROM einmal.sends")
        node.unrecorded.held.append((old, [Outcome(answered, "sent", "250 2.0.0 Ok: queued")]))
        to_builder, from_scheduler = anyio.create_memory_object_stream[int](16)
        async with to_builder, from_scheduler:
            await node.scheduler().tick(to_builder)
        assert await counts(conn, campaign) == {"sending": 3}, "nothing returned before the answer is written"
        async with pool.acquire() as pipeline:  # what the next incarnation does first (actors/pipeline.py)
            await record_unrecorded(pipeline, node.recording(), node.unrecorded)
            await pipeline.fetchrow(*node.sections.rescue.query(node.fencing.retired))
    finally:
        await pool.close()
    rows = {
        r["id"]: (r["status"], r["attempts"]) for r in await conn.fetch("SELECT id, status, attempts FROM einmal.sends")
    }
    assert rows.pop(answered) == ("sent", 0)
    assert set(rows.values()) == {("queued", 1)}, rows
