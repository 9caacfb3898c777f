"""The HTTP surface's bounds over real loopback connections (einmal serve in this loop): a request
whose head or body does not arrive in time is closed, the connections at once are capped, the
request bodies held at once are bounded, and /metrics reads the database once for many scrapes
on a connection that unsubscribes never wait for."""

import functools
import re
import socket
from urllib.parse import urlsplit

import anyio
import asyncpg
import httpx
import psutil
import pytest
from anyio.abc import SocketStream

from tests.support.web import http_server, subscriber, token

pytestmark = pytest.mark.anyio

SHORT = {"http_header_timeout_seconds": 0.5, "http_body_timeout_seconds": 0.5}
MAILGUN = {"mailgun_webhook_signing_key": "mailgun-test-key"}
CLOSED = (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError)


async def connect(base: str) -> SocketStream:
    parts = urlsplit(base)
    return await anyio.connect_tcp(parts.hostname, parts.port)


async def until_closed(stream: SocketStream, seconds: float = 20) -> bytes:
    """What the server sent until it closed the connection (TimeoutError if it did not within `seconds`)."""
    got = b""
    with anyio.fail_after(seconds):
        while True:
            try:
                got += await stream.receive()
            except CLOSED:
                return got


def post_head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: einmal\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /heal", b"GET /healthz HTTP/1.1\r\nHost: einmal\r\n"],
    ids=["idle", "half a request line", "headers without their end"],
)
async def test_a_request_whose_head_does_not_arrive_in_time_is_closed(dsn: str, sent: bytes) -> None:
    async with http_server(dsn, **SHORT) as base, await connect(base) as stream:
        if sent:
            await stream.send(sent)
        assert await until_closed(stream) == b""


async def test_a_kept_alive_connection_is_closed_when_its_next_head_does_not_arrive_in_time(dsn: str) -> None:
    async with http_server(dsn, **SHORT) as base, await connect(base) as stream:
        await stream.send(b"GET /healthz HTTP/1.1\r\nHost: einmal\r\n\r\n")
        first = await stream.receive()
        await stream.send(b"GET /hea")
        assert first.startswith(b"HTTP/1.1 200 ") and await until_closed(stream) == b""


@pytest.mark.parametrize("drip", [False, True], ids=["1 kB, then nothing", "a byte every 50 ms"])
async def test_a_body_that_does_not_arrive_in_time_is_closed(dsn: str, drip: bool) -> None:
    async with http_server(dsn, **SHORT, **MAILGUN) as base, await connect(base) as stream:
        await stream.send(post_head("/inbound/mailgun", 1024 * 1024) + b"{" + b" " * 1023)
        async with anyio.create_task_group() as tg:

            async def dribble() -> None:
                for _ in range(400):  # 20 s at most, far short of the declared length
                    await stream.send(b" ")
                    await anyio.sleep(0.05)

            if drip:
                tg.start_soon(dribble)
            answer = await until_closed(stream)
            tg.cancel_scope.cancel()
        assert answer == b""


async def test_a_connection_whose_client_takes_no_answers_is_closed(dsn: str) -> None:
    async with http_server(dsn, **SHORT) as base:
        parts = urlsplit(base)
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            await anyio.to_thread.run_sync(client.connect, (parts.hostname, parts.port))
            name = client.getsockname()

            def served() -> bool:  # the server's end of this connection is open
                return any(c.raddr and tuple(c.raddr) == name for c in psutil.Process().net_connections("tcp"))

            # pipelined scrapes whose answers are never read: the server's buffers fill, then its writes wait
            requests = b"GET /metrics HTTP/1.1\r\nHost: einmal\r\n\r\n" * 5000
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(anyio.to_thread.run_sync, client.sendall, requests, abandon_on_cancel=True)
                )
                with anyio.fail_after(30):
                    while served():
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
        finally:
            client.close()


async def test_at_the_cap_a_new_connection_closes_the_one_that_waited_longest_for_a_request(dsn: str) -> None:
    async with http_server(dsn, http_max_connections=10, http_header_timeout_seconds=60) as base:
        idle = [await connect(base) for _ in range(30)]
        async with httpx.AsyncClient() as client:
            health = await client.get(f"{base}/healthz")
        for stream in idle[:20]:  # the 30 and httpx's made room by closing the oldest
            assert await until_closed(stream) == b""
        await idle[-1].send(b"GET /healthz HTTP/1.1\r\nHost: einmal\r\n\r\n")
        newest = await idle[-1].receive()
        for stream in idle:
            await stream.aclose()
    assert health.status_code == 200
    assert newest.startswith(b"HTTP/1.1 200 ")


def body_bytes(metrics: str) -> float:
    return next(float(line.split()[1]) for line in metrics.splitlines() if line.startswith("einmal_http_body_bytes "))


async def test_at_the_cap_with_every_connection_inside_a_request_a_new_one_is_answered_503(dsn: str) -> None:
    async with http_server(dsn, http_max_connections=10, **MAILGUN) as base, await connect(base) as first:

        async def metrics() -> str:  # over the first connection, kept alive: no new one while the others start
            await first.send(b"GET /metrics HTTP/1.1\r\nHost: einmal\r\n\r\n")
            got = b""
            with anyio.fail_after(20):
                while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < int(
                    re.search(rb"content-length: (\d+)", got, re.I)[1]
                ):
                    got += await first.receive()
            return got.decode()

        await metrics()
        busy = [await connect(base) for _ in range(9)]
        for stream in busy:
            await stream.send(post_head("/inbound/mailgun", 1000) + b"{")  # the rest of the body never comes
        with anyio.fail_after(20):  # each of the 9 has read the first byte of its body
            while body_bytes(await metrics()) < 9:
                await anyio.sleep(0.05)
        await first.send(post_head("/inbound/mailgun", 1000) + b"{")  # the 10th
        async with await connect(base) as extra:
            await extra.send(b"GET /healthz HTTP/1.1\r\nHost: einmal\r\n\r\n")
            answer = await until_closed(extra)
        for stream in busy:
            await stream.aclose()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 5" in answer, answer


async def test_the_bodies_held_at_once_are_bounded_and_a_request_without_room_is_refused(dsn: str) -> None:
    budget, clients, declared = 2 * 1024 * 1024, 8, 1_000_000  # room for 2 of the 8
    answers: list[bytes] = []
    async with http_server(dsn, http_body_buffer_bytes=budget, http_body_timeout_seconds=60, **MAILGUN) as base:
        async with anyio.create_task_group() as tg:

            async def upload() -> None:
                async with await connect(base) as stream:
                    # 600 kB of a declared 1 MB, then nothing: as a client that sends slowly
                    await stream.send(post_head("/inbound/mailgun", declared) + b"{" + b" " * 599_999)
                    answers.append(await until_closed(stream, 60))

            for _ in range(clients):
                tg.start_soon(upload)
            with anyio.fail_after(30):
                while sum(a.startswith(b"HTTP/1.1 503 ") for a in answers) < clients - 2:
                    await anyio.sleep(0.05)
            async with httpx.AsyncClient() as client:
                metrics = (await client.get(f"{base}/metrics")).text
            tg.cancel_scope.cancel()
    held = body_bytes(metrics)
    assert held == 2 * declared  # the two that fit hold room for their whole bodies
    assert len(answers) == clients - 2, answers  # the two are still open, waiting for the rest


async def lock_waiters(conn: asyncpg.Connection) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )


async def test_scrapes_share_one_read_of_the_database_and_never_hold_up_an_unsubscribe(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    locker = await asyncpg.connect(dsn)
    statuses: list[int] = []
    waiters: list[int] = []
    async with http_server(dsn) as base, httpx.AsyncClient(timeout=30) as client:

        async def scrape() -> None:
            statuses.append((await client.get(f"{base}/metrics")).status_code)

        async with anyio.create_task_group() as tg, locker.transaction():
            # the send rows cannot be counted while this transaction lives: a scrape's read waits
            await locker.execute("LOCK TABLE einmal.sends IN ACCESS EXCLUSIVE MODE")
            for _ in range(20):
                tg.start_soon(scrape)
            with anyio.fail_after(20):
                while not waiters or waiters[-1] == 0:
                    waiters.append(await lock_waiters(conn))
            async with anyio.create_task_group() as watch:

                async def count_waiters() -> None:
                    for _ in range(10_000):
                        waiters.append(await lock_waiters(conn))
                        await anyio.sleep(0.01)

                watch.start_soon(count_waiters)
                page = await client.get(f"{base}/unsubscribe?token={token(ids)}")
                answered_before = len(statuses)
                watch.cancel_scope.cancel()
            # the transaction ends (the lock with it) before the task group waits for the scrapes
        await locker.close()
    assert page.status_code == 200
    assert answered_before == 0  # the page came while every scrape still waited for the one read
    assert max(waiters) == 1  # one read for 20 scrapes, not one per connection of the pool
    assert statuses == [200] * 20
