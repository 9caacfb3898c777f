"""Accounts take turns in the send pipeline (docs/design.md#sending-budget "Accounts take turns"): while one
account floods the node with messages, another's campaign still gets about its share of the installation's
rate, and its message is not queued behind the whole flood (a node in this process, a real PostgreSQL, an
aiosmtpd sink on loopback)."""

import time

import anyio
import asyncpg
import pytest

from service.messages import batch, messages
from service.messages.messages import Queueing
from tests.messages.support import FROM
from tests.support.pipeline import Received as Sink
from tests.support.pipeline import approve, node_settings, recording_server, running_node, seed

pytestmark = pytest.mark.anyio

RATE = 20.0  # EINMAL_RATE_LIMIT, shared by both accounts
FLOOD = 600  # A's messages, in 6 batch calls
WINDOW = 6.0  # seconds B's campaign is watched from its first message, while A's flood is far from drained


async def flood(conn: asyncpg.Connection, settings, account_id: int) -> None:
    for call in range(FLOOD // batch.MAX_MESSAGES):
        items = [
            batch.Item(to=f"a{call}-{i}@flood.example", subject="Flood", body_text="Yours.", from_address=FROM)
            for i in range(batch.MAX_MESSAGES)
        ]
        outcomes = await batch.send(conn, queueing=Queueing.of(settings), account_id=account_id, items=items)
        assert {o.outcome for o in outcomes} == {"queued"}


@pytest.mark.serial  # it measures rates and a latency
async def test_a_message_flood_leaves_another_account_its_share(conn: asyncpg.Connection, dsn: str) -> None:
    b_campaign = await seed(conn, [f"b{i}@bulk.example" for i in range(120)])
    b_account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", b_campaign)
    a_account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('flooder') RETURNING id")
    sink = Sink()
    async with recording_server(sink) as port:
        settings = node_settings(dsn, port, rate_limit=RATE)
        await flood(conn, settings, a_account)  # queued before the node starts: all of it waits
        async with running_node(settings):
            with anyio.fail_after(30):
                while not any(rcpt.endswith("@flood.example") for _, rcpt, _ in sink.messages):
                    await anyio.sleep(0.02)
            await approve(conn, b_campaign)
            await anyio.sleep(1.0)
            sent = time.monotonic()
            await messages.send(
                conn,
                queueing=Queueing.of(settings),
                account_id=b_account,
                to="reset@b.example",
                subject="Reset",
                body_text="Link.",
                from_address=FROM,
            )
            with anyio.fail_after(45):  # behind A's whole flood: some 30 s
                while not any(rcpt == "reset@b.example" for _, rcpt, _ in sink.messages):
                    await anyio.sleep(0.01)
            latency = next(t for t, rcpt, _ in sink.messages if rcpt == "reset@b.example") - sent
            with anyio.fail_after(30):
                while not any(rcpt.endswith("@bulk.example") for _, rcpt, _ in sink.messages):
                    await anyio.sleep(0.02)
            begun = min(t for t, rcpt, _ in sink.messages if rcpt.endswith("@bulk.example"))
            await anyio.sleep(max(0.0, begun + WINDOW - time.monotonic()))
            seen = list(sink.messages)
    started = min(t for t, rcpt, _ in seen if rcpt.endswith("@bulk.example"))  # B's campaign under way
    in_window = [(t, rcpt) for t, rcpt, _ in seen if started <= t < started + WINDOW]
    b_sent = sum(1 for _, rcpt in in_window if rcpt.endswith("@bulk.example"))
    a_sent = sum(1 for _, rcpt in in_window if rcpt.endswith("@flood.example"))
    a_left = FLOOD - sum(1 for _, rcpt, _ in seen if rcpt.endswith("@flood.example"))
    print(
        f"\nin {WINDOW:g} s at {RATE:g}/s: B's campaign {b_sent}, A's flood {a_sent} ({a_left} of A's left after);"
        f" B's message {latency * 1000:.0f} ms"
    )
    assert a_left > 0, "A's flood lasted the whole window"
    # a fair share is half the rate
    assert b_sent >= 0.35 * RATE * WINDOW, (b_sent, a_sent)
    # behind A's whole queue it would wait some 580 / 20 = 29 s; its turn comes within a horizon or two
    assert latency < 3.0, latency


@pytest.mark.serial  # it measures a latency
async def test_without_a_rate_another_accounts_message_is_not_behind_the_flood(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """No rate: the relay's speed is the bound (here 4 connections, 100 ms a message: 40 a second, slower than
    messages are compiled). A's flood may not fill the first lane ahead of B's message."""
    b_account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('b') RETURNING id")
    a_account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('flooder') RETURNING id")
    sink = Sink(delay=0.1)
    async with recording_server(sink) as port:
        settings = node_settings(dsn, port, smtp_connections=4)
        await flood(conn, settings, a_account)
        async with running_node(settings):
            with anyio.fail_after(30):
                while not any(rcpt.endswith("@flood.example") for _, rcpt, _ in sink.messages):
                    await anyio.sleep(0.005)
            await anyio.sleep(0.1)
            queued_at = time.monotonic()
            await messages.send(
                conn,
                queueing=Queueing.of(settings),
                account_id=b_account,
                to="reset@b.example",
                subject="Reset",
                body_text="Link.",
                from_address=FROM,
            )
            with anyio.fail_after(30):
                while not any(rcpt == "reset@b.example" for _, rcpt, _ in sink.messages):
                    await anyio.sleep(0.005)
            seen = list(sink.messages)
    at = next(i for i, (_, rcpt, _) in enumerate(seen) if rcpt == "reset@b.example")
    before = sum(1 for t, _, _ in seen if t < queued_at)
    print(f"\nB's message was the {at + 1}th of {len(seen)} accepted, {before} before it was queued")
    # behind the first lane it came after 200 to 600 of A's; now, the accounts taking turns in the lane, after
    # those on the wire and sent while the claimer compiled a turn of A's (MESSAGE_TURN)
    assert at < 40, at
