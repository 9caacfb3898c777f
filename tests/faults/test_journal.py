"""The journal of recent outcomes and its rewrite after a failover (docs/design.md#liveness): bounded in count
and in age; written again compare-and-set, so that only a row behind what the node knows moves, and a row
another token has is never touched but kept in einmal.lost_outcomes."""

import anyio
import asyncpg
import pytest

from actors import failover
from actors.batch import Outcome
from actors.wires import Journal, Replication
from service import db
from tests.support.pipeline import approve, counts, node_settings, running_node, seed, wait_status
from tests.support.smtp_servers import FaultServer
from tests.support.wiring import wiring

pytestmark = pytest.mark.anyio


def test_the_journal_keeps_the_last_outcomes_within_its_count_and_its_age() -> None:
    now = [100.0]
    journal = Journal(seconds=10, size=4, clock=lambda: now[0])
    journal.add("t", [Outcome(1, "sent", "250"), Outcome(2, "queued", "451 retry"), Outcome(3, "failed", "550")])
    assert [o.id for _, _, o in journal.recent()] == [1, 2, 3], "a return to the queue is kept too"
    assert journal.reach() == 10, "not full: it covers its age bound"
    now[0] = 105.0
    journal.add("t", [Outcome(4, "sent", "250"), Outcome(5, "in_doubt", "timeout")])
    assert [o.id for _, _, o in journal.recent()] == [2, 3, 4, 5], "at most 4"
    assert journal.reach() == 5, "full: the count bound cut it to the 5 s between its oldest and newest"
    now[0] = 1000.0
    assert [o.id for _, _, o in journal.recent()] == [2, 3, 4, 5], "nothing recorded since (an outage): all kept"
    now[0] = 111.0
    journal.add("u", [Outcome(4, "failed", "550")])
    assert [(token, o.id, o.status) for _, token, o in journal.recent()] == [("t", 5, "in_doubt"), ("u", 4, "failed")]
    now[0] = 121.5
    journal.add("u", [Outcome(6, "sent", "250")])
    assert [o.id for _, _, o in journal.recent()] == [6], "the others are more than 10 s older than the newest"
    off = Journal(seconds=10, size=0)
    off.add("t", [Outcome(1, "sent", "250")])
    assert off.recent() == [] and off.reach() == 0, "EINMAL_JOURNAL_SIZE=0 keeps nothing"


STATES = [  # (status, claimed_by) on the new primary, what the journal says under token T, what follows
    (("sending", "T"), "sent", ("sent", "T")),
    (("claimed", "T"), "sent", ("sent", "T")),
    (("queued", None), "sent", ("sent", "T")),  # the failover lost the claim
    (("in_doubt", "T"), "sent", ("sent", "T")),  # returned as a dead node's, under hold
    (("queued", None), "failed", ("failed", "T")),  # a bounce: its suppression is written again too
    (("sent", "T"), "sent", ("sent", "T")),  # already there
    (("claimed", "U"), "sent", ("claimed", "U")),  # another node claimed it after the failover: never touched
    (("sent", "U"), "sent", ("sent", "U")),
    (("sending", "T"), "queued", ("queued", None)),  # given back unsent: not in doubt
    (("claimed", "V"), "sent", ("sent", "T")),  # V's claim is older than T's answer: V gave it back first
    (("sending", "V"), "sent", ("sent", "T")),  # V's attempt was answered and given back before T's claim
    (("claimed", "U"), "queued", ("claimed", "U")),  # a return is no loss: counted as there
    (("sending", "T"), "sent", ("sending", "T")),  # held unrecorded under T2, whose token does not hold it
]
# U's rows were claimed on the new primary after the failover (later than the journal's answers), V's
# before T's answers: the new primary shows V's claim from before V gave the row back


async def test_after_a_failover_only_rows_behind_the_journal_move_and_another_tokens_are_kept_as_lost(
    conn: asyncpg.Connection, dsn: str
) -> None:
    addresses = [f"j{i}@example.com" for i in range(len(STATES) + 1)]
    campaign = await seed(conn, addresses)
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    ids = [
        await conn.fetchval(
            """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                  claimed_by)
        SELECT $1::bigint, account_id, id, email, lower(email), 'campaign:' || $1::bigint || ':' || id, $3, $4
        FROM einmal.subscribers WHERE email = $2 RETURNING id""",
            campaign,
            address,
            *state,
        )
        for address, (state, _, _) in zip(addresses, STATES, strict=False)
    ]
    await conn.execute("UPDATE einmal.sends SET updated_at = now() + interval '1 hour' WHERE claimed_by = 'U'")
    await conn.execute("UPDATE einmal.sends SET updated_at = now() - interval '1 hour' WHERE claimed_by = 'V'")
    retry = await conn.fetchval(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                  claimed_by)
        SELECT $1::bigint, account_id, id, email, lower(email), 'campaign:' || $1::bigint || ':' || id, 'sending', 'T'
        FROM einmal.subscribers WHERE email = $2 RETURNING id""",
        campaign,
        addresses[-1],
    )
    pool = await db.create_pool(dsn, size=1, command_timeout=10)
    try:
        node = wiring(node_settings(dsn, 2525), pool, dsn)
        for send_id, (_, outcome, _) in zip(ids[:-1], STATES, strict=False):
            reply = {"sent": "250 ok", "queued": "451 later"}.get(outcome, "550 no")
            node.journal.add("T", [Outcome(send_id, outcome, reply, bounce=outcome == "failed", retry_after=60)])
        node.unrecorded.held.append(("T2", [Outcome(ids[-1], "sent", "250 ok"), Outcome(retry, "queued", "451 later")]))
        node.replication.failover_due = True
        async with pool.acquire() as c:
            await failover.write_again(c, node.replication, node.journal, node.unrecorded, node.metrics)
    finally:
        await pool.close()
    found = [
        tuple(r)
        for r in await conn.fetch(
            "SELECT status, claimed_by FROM einmal.sends WHERE id = ANY ($1::bigint[]) ORDER BY id", ids
        )
    ]
    assert found == [after for _, _, after in STATES]
    assert node.unrecorded.held == [("T2", [Outcome(retry, "queued", "451 later")])], "the retry is still held"
    assert node.replication.failover_due is False
    lost = await conn.fetch(
        "SELECT send_id, token, outcome, reply_code, found_status, found_claimed_by "
        "FROM einmal.lost_outcomes ORDER BY send_id"
    )
    assert [tuple(r) for r in lost] == [
        (ids[6], "T", "sent", "250", "claimed", "U"),
        (ids[7], "T", "sent", "250", "sent", "U"),
        (ids[12], "T2", "sent", "250", "sending", "T"),
    ]
    returned = await conn.fetchrow(
        "SELECT attempts, next_attempt_at > now() + interval '50 seconds' AS later FROM einmal.sends WHERE id = $1",
        ids[8],
    )
    assert tuple(returned) == (0, True), "the return keeps its retry time"
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.suppressions WHERE email_lower = $1 AND reason = 'bounce'", addresses[4]
        )
        == 1
    )
    assert await conn.fetchval("SELECT sent_at IS NOT NULL FROM einmal.sends WHERE id = $1", ids[2])
    assert node.metrics.lost_outcomes._value.get() == 3


async def test_after_a_failover_no_node_claims_until_every_live_node_has_written_its_journal_there(
    conn: asyncpg.Connection, dsn: str
) -> None:
    # the new primary as the barrier finds it: A alive and not yet rewritten (its row names the old
    # primary), B dead (its heartbeat older than the node timeout), C alive and rewritten already, D new
    await conn.execute("""
        INSERT INTO einmal.nodes (id, heartbeat_at, journal_written_on) VALUES
            ('a/1.1', now(), '7:1'), ('b/1.1', now() - interval '1 hour', '7:1'), ('c/1.1', now(), '7:2'),
            ('d/1.1', now(), NULL)""")  # D has just started on the new primary: no journal to wait for
    pool = await db.create_pool(dsn, size=2, command_timeout=10)
    try:
        replication, token = Replication(identity=(7, 2)), ""
        await conn.execute("INSERT INTO einmal.nodes (id) VALUES ($1)", token)
        passed = anyio.Event()

        async def start() -> None:
            async with pool.acquire() as c:
                await failover.await_journals(c, replication, [token], node_timeout_seconds=20)
            passed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(start)
            with anyio.move_on_after(1.5):
                await passed.wait()
            assert not passed.is_set(), "A is alive and has not written its journal on the new primary"
            assert await conn.fetchval("SELECT journal_written_on FROM einmal.nodes WHERE id = $1", token) == "7:2", (
                "this node's own mark is set before it waits"
            )
            await conn.execute("UPDATE einmal.nodes SET journal_written_on = '7:2' WHERE id = 'a/1.1'")
            with anyio.fail_after(5):
                await passed.wait()  # B is dead: not waited for
    finally:
        await pool.close()


async def test_the_barrier_waits_for_a_node_that_never_writes_at_most_the_node_timeout(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await conn.execute("INSERT INTO einmal.nodes (id, journal_written_on) VALUES ('old/1.1', '7:1')")
    pool = await db.create_pool(dsn, size=1, command_timeout=10)
    try:
        replication = Replication(identity=(7, 2))
        began = anyio.current_time()

        async def heartbeat() -> None:  # the other node stays alive: only the overall bound ends the wait
            while True:
                await conn.execute("UPDATE einmal.nodes SET heartbeat_at = now() WHERE id = 'old/1.1'")
                await anyio.sleep(0.2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            with anyio.fail_after(10):
                async with pool.acquire() as c:
                    await failover.await_journals(c, replication, [], node_timeout_seconds=1.5)
            tg.cancel_scope.cancel()
        assert 1.4 <= anyio.current_time() - began < 5
    finally:
        await pool.close()


async def test_a_starting_node_claims_nothing_until_a_live_node_has_written_its_journal_on_this_primary(
    conn: asyncpg.Connection, dsn: str, smtp_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """actors/pipeline.py's send pipeline passes the barrier before its claimer starts: a peer alive whose row
    names another primary (a failover it has not written its journal after) holds every claim here."""
    addresses = [f"j{i}@example.com" for i in range(20)]
    campaign = await seed(conn, addresses)
    await conn.execute("INSERT INTO einmal.nodes (id, journal_written_on) VALUES ('peer/1.1', 'old-primary:1')")
    beating = await asyncpg.connect(dsn)

    async def peer_heartbeat() -> None:  # alive all along: only its journal may lift the barrier
        while True:
            await beating.execute("UPDATE einmal.nodes SET heartbeat_at = now() WHERE id = 'peer/1.1'")
            await anyio.sleep(0.5)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer_heartbeat)
            async with running_node(node_settings(dsn, smtp_server.port)):
                await approve(conn, campaign)
                held_since = None
                with anyio.fail_after(20):  # the rows built, then 2 s in which nothing may be claimed
                    while held_since is None or anyio.current_time() - held_since < 2:
                        found = await counts(conn, campaign)
                        assert set(found) <= {"queued"} and not smtp_server.messages, (
                            f"claimed while a live node had not written its journal: {found}"
                        )
                        if held_since is None and found.get("queued") == len(addresses):
                            held_since = anyio.current_time()
                        await anyio.sleep(0.1)
                mine = await conn.fetchval("SELECT journal_written_on FROM einmal.nodes WHERE id <> 'peer/1.1'")
                assert mine is not None and mine != "old-primary:1", mine
                await conn.execute("UPDATE einmal.nodes SET journal_written_on = $1 WHERE id = 'peer/1.1'", mine)
                await wait_status(conn, campaign, "sent", timeout=30)
            tg.cancel_scope.cancel()
    finally:
        await beating.close()
    assert sorted(m.rcpt_tos[0] for m in smtp_server.messages) == sorted(addresses)
    assert any(
        "not claiming until node(s) peer/1.1 have written their journal" in r.getMessage() for r in caplog.records
    )
