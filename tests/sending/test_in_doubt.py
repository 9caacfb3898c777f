"""Messages in doubt: a node SIGKILLed while its SMTP server holds the reply
to the final dot, so each of its connections has a message the server has
taken but einmal never heard accepted. EINMAL_IN_DOUBT=hold keeps those rows
for `einmal reconcile`; resend queues them again with the same Message-ID."""

import signal
from collections import Counter
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import cells, einmal
from tests.support.pipeline import TAKEOVER_TIMEOUT, approve, counts, node_env, seed, start_node, stop_node, wait_status
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

CONNECTIONS = 4
RECIPIENTS = 40


@dataclass
class Killed:
    campaign: int
    in_flight: set[str]  # Message-IDs the server took from the killed node, unanswered
    env: dict[str, str]


async def kill_mid_transaction(
    conn: asyncpg.Connection, dsn: str, server: FaultServer, log: Path, in_doubt: str
) -> Killed:
    campaign = await seed(conn, [f"d{i}@example.com" for i in range(RECIPIENTS)])
    server.inject("data_end", None, delay=4, times=CONNECTIONS)  # the first message on each connection waits
    env = node_env(
        dsn,
        server.port,
        EINMAL_IN_DOUBT=in_doubt,
        EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
        EINMAL_BATCH_SIZE="10",
        EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
    )
    victim = start_node(env, log)
    try:
        await approve(conn, campaign)
        with anyio.fail_after(20):
            arrived = await server.arrived(CONNECTIONS)
        assert (await counts(conn, campaign))["sending"] == CONNECTIONS, "one message on the wire per connection"
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    return Killed(campaign, {m.message_id for m in arrived}, env)


def reconcile(dsn: str, campaign: int, *decision: str):
    return anyio.to_thread.run_sync(partial(einmal, "reconcile", str(campaign), *decision, dsn=dsn))


def times_received(server: FaultServer) -> Counter:
    return Counter(m.message_id for m in server.messages)


async def test_hold_keeps_the_rows_in_doubt_until_reconcile_resend_sends_them_again(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    with FaultServer() as server:
        killed = await kill_mid_transaction(conn, dsn, server, tmp_path / "victim.log", "hold")
        survivor = start_node(killed.env, tmp_path / "survivor.log")
        try:
            await wait_status(conn, killed.campaign, "sent", timeout=30)
            assert await counts(conn, killed.campaign) == {"sent": RECIPIENTS - CONNECTIONS, "in_doubt": CONNECTIONS}
            held = await conn.fetch(
                "SELECT id, email, claimed_by FROM einmal.sends WHERE status = 'in_doubt' ORDER BY id"
            )
            listed = await reconcile(dsn, killed.campaign)
            assert listed.returncode == 0, listed.stderr
            lines = listed.stdout.splitlines()
            # what is known of each: its id, address and the dead node whose transaction it was in, and why
            assert [cells(line)[:3] for line in lines[1:-1]] == [
                [str(r["id"]), r["email"], r["claimed_by"]] for r in held
            ]
            assert all(
                r["claimed_by"] and line.endswith(f"node {r['claimed_by']} died during the SMTP transaction")
                for r, line in zip(held, lines[1:-1], strict=True)
            )
            assert lines[-1] == (
                f"{CONNECTIONS} in-doubt rows in campaign {killed.campaign}; "
                "decide with --resend or --mark-sent (all, or some with --id and --address)"
            )
            assert all(n == 1 for n in times_received(server).values()), "held: nothing sent twice yet"

            resent = await reconcile(dsn, killed.campaign, "--resend")
            assert resent.returncode == 0, resent.stderr
            assert resent.stdout.splitlines() == [
                f"{CONNECTIONS} in-doubt rows of campaign {killed.campaign} queued again",
                f"campaign {killed.campaign} is sending again",
            ]
            await wait_status(conn, killed.campaign, "sent", timeout=30)
        finally:
            assert await stop_node(survivor) == 0
    assert await counts(conn, killed.campaign) == {"sent": RECIPIENTS}
    received = times_received(server)
    assert {i for i, n in received.items() if n == 2} == killed.in_flight, "resent with the same Message-ID"
    assert set(received.values()) == {1, 2} and len(received) == RECIPIENTS


async def test_hold_then_reconcile_mark_sent_settles_them_without_sending(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    with FaultServer() as server:
        killed = await kill_mid_transaction(conn, dsn, server, tmp_path / "victim.log", "hold")
        survivor = start_node(killed.env, tmp_path / "survivor.log")
        try:
            await wait_status(conn, killed.campaign, "sent", timeout=30)
            marked = await reconcile(dsn, killed.campaign, "--mark-sent")
            assert marked.returncode == 0, marked.stderr
            assert marked.stdout.splitlines() == [
                f"{CONNECTIONS} in-doubt rows of campaign {killed.campaign} marked sent"
            ]
            await anyio.sleep(1)  # two ticks: a node that wrongly resent them would have by now
        finally:
            assert await stop_node(survivor) == 0
    assert await counts(conn, killed.campaign) == {"sent": RECIPIENTS}
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", killed.campaign) == "sent"
    received = times_received(server)
    assert set(received.values()) == {1} and len(received) == RECIPIENTS
    listed = await reconcile(dsn, killed.campaign)
    assert listed.stdout.splitlines() == [f"0 in-doubt rows in campaign {killed.campaign}"]


async def test_resend_queues_the_rows_of_a_killed_node_again_with_the_same_message_id(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    with FaultServer() as server:
        killed = await kill_mid_transaction(conn, dsn, server, tmp_path / "victim.log", "resend")
        survivor = start_node(killed.env, tmp_path / "survivor.log")
        try:
            await wait_status(conn, killed.campaign, "sent", timeout=30)
        finally:
            assert await stop_node(survivor) == 0
    assert await counts(conn, killed.campaign) == {"sent": RECIPIENTS}
    received = times_received(server)
    assert {i for i, n in received.items() if n == 2} == killed.in_flight, "at least once, same Message-ID"
    assert set(received.values()) == {1, 2} and len(received) == RECIPIENTS
    attempts = await conn.fetch(
        "SELECT attempts, count(*) AS n FROM einmal.sends WHERE campaign_id = $1 GROUP BY attempts", killed.campaign
    )
    assert {r["attempts"]: r["n"] for r in attempts} == {0: RECIPIENTS - CONNECTIONS, 1: CONNECTIONS}, (
        "the send cut short by the kill counts as an attempt"
    )


async def test_resend_leaves_a_killed_nodes_rows_in_doubt_once_they_have_had_their_attempts(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """A node dying mid-transaction again and again must not resend without end: the rescue counts the
    attempt, and at EINMAL_MAX_ATTEMPTS the row is in doubt, for reconcile, instead of queued again."""
    with FaultServer() as server:
        killed = await kill_mid_transaction(conn, dsn, server, tmp_path / "victim.log", "resend")
        survivor = start_node({**killed.env, "EINMAL_MAX_ATTEMPTS": "1"}, tmp_path / "survivor.log")
        try:
            await wait_status(conn, killed.campaign, "sent", timeout=30)
        finally:
            assert await stop_node(survivor) == 0
    assert await counts(conn, killed.campaign) == {"sent": RECIPIENTS - CONNECTIONS, "in_doubt": CONNECTIONS}
    replies = await conn.fetch(
        "SELECT last_reply, attempts FROM einmal.sends WHERE campaign_id = $1 AND status = 'in_doubt'", killed.campaign
    )
    assert all(r["attempts"] == 1 and r["last_reply"].endswith("(still in doubt after 1 attempts)") for r in replies), [
        dict(r) for r in replies
    ]
    assert set(times_received(server).values()) == {1}, "nothing went out twice"


async def test_resend_counts_in_doubt_answers_as_attempts_backs_off_and_stops_at_the_limit(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    """A server that keeps each message but answers the final dot only after the SMTP timeout: every
    try is in doubt. Resend tries again after a growing delay, at most EINMAL_MAX_ATTEMPTS times."""
    recipients, max_attempts, timeout, base = 3, 3, 1.0, 1.0
    campaign = await seed(conn, [f"slow{i}@example.com" for i in range(recipients)])
    with FaultServer() as server:
        server.inject("data_end", None, delay=timeout + 2)  # kept, but the 250 comes too late
        env = node_env(
            dsn,
            server.port,
            EINMAL_IN_DOUBT="resend",
            EINMAL_SMTP_CONNECTIONS="4",
            EINMAL_SMTP_TIMEOUT_SECONDS=str(timeout),
            EINMAL_MAX_ATTEMPTS=str(max_attempts),
            EINMAL_RETRY_BASE_SECONDS=str(base),
        )
        node = start_node(env, tmp_path / "node.log")
        try:
            await approve(conn, campaign)
            with anyio.fail_after(90):
                while (
                    await conn.fetchval(
                        "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'in_doubt'", campaign
                    )
                    < recipients
                ):
                    assert len(server.messages) <= recipients * max_attempts, (
                        f"{len(server.messages)} deliveries: resent past the limit"
                    )
                    await anyio.sleep(0.05)
            await wait_status(conn, campaign, "sent", timeout=30)
        finally:
            assert await stop_node(node) == 0, (tmp_path / "node.log").read_text()
    received = times_received(server)
    assert len(received) == recipients and set(received.values()) == {max_attempts}, received
    rows = await conn.fetch("SELECT status, attempts, last_reply FROM einmal.sends WHERE campaign_id = $1", campaign)
    assert {(r["status"], r["attempts"]) for r in rows} == {("in_doubt", max_attempts)}
    assert all(f"still in doubt after {max_attempts} attempts" in r["last_reply"] for r in rows)
    # each resend waited its retry delay (at least 0.8 x base x 2^n) on top of the timeout
    for message_id in received:
        at = [m.at for m in server.messages if m.message_id == message_id]
        gaps = [b - a for a, b in pairwise(at)]
        assert all(gap >= timeout + 0.8 * base * 2**n for n, gap in enumerate(gaps)), gaps
    listed = await reconcile(dsn, campaign)
    assert listed.stdout.splitlines()[-1].startswith(f"{recipients} in-doubt rows in campaign {campaign}")
    print(
        f"\nslow 250 under resend: {sum(received.values())} deliveries for {recipients} recipients, "
        f"rows {await counts(conn, campaign)}"
    )
