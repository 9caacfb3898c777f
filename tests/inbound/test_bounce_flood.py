"""The send path keeps its pace while the inbound listener takes a flood of heavy reports.

A real node (`einmal run`, a process of its own) sends one campaign at EINMAL_RATE_LIMIT to a real
SMTP server; the test counts the messages that server received in a window with no inbound mail,
then in a window of the same length while clients push big DSNs at the node's inbound listener:
some past the bound on MIME parts (refused unread), some within every bound but slow to parse
(millions of lines). Reading reports happens in a worker process, so the counts stay close."""

import time

import anyio
import asyncpg
import pytest

from tests.inbound.test_bounce_inbound import RETURN_PATH, SECRET, hand_over_raw
from tests.inbound.test_bounce_trust import verp
from tests.support import reports
from tests.support.pipeline import approve, node_env, seed, start_node, stop_node
from tests.support.smtp_servers import free_port

pytestmark = pytest.mark.anyio

RATE, WINDOW, CLIENTS = 20, 3.0, 4
LEAD = 1.0  # the flood's first messages are on their way before its window opens
FLOOD = (
    reports.dsn_of([("nobody@example.com", "failed", "5.1.1")], extra_parts=50_000),  # 2.7 MB, 50,000 parts
    reports.dsn_of([("nobody@example.com", "failed", "5.1.1")], returned_body="\n" * 2_000_000),
)  # 4 MB


async def delivered_within(server, seconds: float) -> int:
    """How many messages the server received in the next `seconds`."""
    start = time.monotonic()
    await anyio.sleep(seconds)
    end = time.monotonic()
    return sum(start <= message.at < end for message in server.messages)


@pytest.mark.serial  # it counts messages per window at the server: other tests' load would measure the machine
async def test_sending_keeps_its_pace_while_the_inbound_listener_is_flooded(
    conn: asyncpg.Connection, dsn: str, smtp_server, tmp_path
) -> None:
    campaign = await seed(conn, [f"p{n}@example.com" for n in range(int(RATE * WINDOW * 5))])
    inbound = free_port()
    proc = start_node(
        node_env(
            dsn,
            smtp_server.port,
            EINMAL_RATE_LIMIT=str(RATE),
            EINMAL_RETURN_PATH=RETURN_PATH,
            EINMAL_RETURN_PATH_SECRET=SECRET,
            EINMAL_INBOUND_SMTP_ADDRESS=f"127.0.0.1:{inbound}",
        ),
        tmp_path / "node.log",
    )
    to = verp(campaign, 10**9)  # a valid token of no send row: each report is read, then dropped
    replies: list[str] = []
    try:
        await approve(conn, campaign)
        with anyio.fail_after(60):
            await smtp_server.arrived(RATE)  # sending at its pace
        quiet = await delivered_within(smtp_server, WINDOW)
        stop = anyio.Event()

        async def flood(first: int) -> None:
            for n in range(first, first + 1000):  # ends with the window
                replies.append(await hand_over_raw(inbound, to, FLOOD[n % 2]))
                if stop.is_set():
                    return

        async with anyio.create_task_group() as tg:
            for client in range(CLIENTS):
                tg.start_soon(flood, client)
            await anyio.sleep(LEAD)
            flooded = await delivered_within(smtp_server, WINDOW)
            stop.set()
    finally:
        await stop_node(proc)
    assert len(replies) >= CLIENTS, replies
    # refused unread, read and dropped, or, past the parsers' queue or their time, "try again later" (the
    # relay's retry is the back-pressure): never an error, and some of the flood was read
    assert all(reply.startswith(("552 5.3.4", "250 2.0.0 OK, dropped", "451 4.3.0")) for reply in replies), set(replies)
    assert any(reply.startswith("250 2.0.0 OK, dropped") for reply in replies), set(replies)
    assert quiet >= RATE * WINDOW / 2, quiet  # the quiet window measured the pace at all
    assert flooded >= 0.7 * quiet, (quiet, flooded, len(replies))
