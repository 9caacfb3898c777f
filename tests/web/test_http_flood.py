"""Floods of slow bodies over real loopback connections (einmal serve in this loop, a real PostgreSQL): what
the flood does not authenticate takes nothing that keyed API writes and one-click unsubscribes need, one
client network holds only its share, and a body that trickles is cut at its deadline. The flood's clients
bind addresses of their own inside 127.0.0.0/8, each a network of its own or all one network."""

import time
from urllib.parse import urlsplit

import anyio
import asyncpg
import httpx
import pytest

from tests.support.web import ONE_CLICK, http_server, subscriber, token
from tests.web.test_api import auth, make_key
from tests.web.test_http_bounds import CLOSED, connect, until_closed

pytestmark = pytest.mark.anyio

FLOOD = 300
BOUND = 2.0  # seconds: the most an unsubscribe or a keyed write may take while the flood runs
SETTINGS = {"http_body_buffer_bytes": 1024 * 1024, "http_body_timeout_seconds": 5.0, "http_header_timeout_seconds": 5.0}


def head(method: str, path: str, length: int, extra: str = "") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: einmal\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


class Flood:
    """FLOOD slow clients, each sending `request` and then a byte every 0.5 s, opening a new connection
    whenever theirs is closed (as the body's deadline closes them), until stopped. `answers`: the first line
    of what the server sent a connection, once it ended its answer or closed."""

    def __init__(self, base: str, request: bytes, source) -> None:
        self.base, self.request, self.source = base, request, source
        self.connected = 0
        self.answers: list[bytes] = []

    async def client(self, n: int) -> None:
        parts = urlsplit(self.base)
        for _ in range(100):  # renewed at most 100 times; the test stops it long before
            try:
                stream = await anyio.connect_tcp(parts.hostname, parts.port, local_host=self.source(n))
            except OSError:
                await anyio.sleep(0.1)
                continue
            async with stream:
                self.connected += 1
                got, answered = b"", False
                try:
                    await stream.send(self.request)
                    for _ in range(200):  # until the server closes it: a byte every 0.5 s, answered or not
                        with anyio.move_on_after(0.5):
                            if answered:
                                await anyio.sleep(1)
                            try:
                                got += await stream.receive()
                            except anyio.EndOfStream:
                                answered = True
                                self.answers.append(got.split(b"\r\n", 1)[0])
                        await stream.send(b" ")
                except CLOSED:
                    if not answered:
                        self.answers.append(got.split(b"\r\n", 1)[0])

    async def started(self) -> None:
        with anyio.fail_after(30):
            while self.connected < FLOOD:
                await anyio.sleep(0.05)
        await anyio.sleep(0.5)  # their heads read, their bodies under way


async def timed(call) -> tuple[int, float]:
    started = time.monotonic()
    answer = await call
    return answer.status_code, time.monotonic() - started


async def keyed_writes_and_unsubscribes(
    base: str, key: str, ids: tuple[int, int, int], local: str = "127.0.5.1"
) -> list[tuple[str, int, float]]:
    """Nine one-click unsubscribes and nine keyed API writes, one after another, from `local`."""
    done = []
    transport = httpx.AsyncHTTPTransport(local_address=local)
    async with httpx.AsyncClient(base_url=base, transport=transport, timeout=30) as client:
        for n in range(9):
            done.append(("unsubscribe", *await timed(client.post(f"/unsubscribe?token={token(ids)}", data=ONE_CLICK))))
            done.append(
                (
                    "write",
                    *await timed(
                        client.put(f"/api/v1/subscribers/k{n}@example.org", headers=auth(key), json={"name": "K"})
                    ),
                )
            )
    return done


@pytest.mark.serial
async def test_keyless_slow_bodies_leave_unsubscribes_and_keyed_writes_answered(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await subscriber(conn)
    key = make_key(dsn, "acme")
    # each of the flood's clients a network of its own: no share per network bounds it, only what it may hold
    flood_request = head("PUT", "/api/v1/subscribers/flood@example.org", 65536)
    async with http_server(dsn, **SETTINGS) as base:
        flood = Flood(base, flood_request, lambda n: f"127.{1 + n // 200}.{n % 200}.1")
        async with anyio.create_task_group() as tg:
            for n in range(FLOOD):
                tg.start_soon(flood.client, n)
            await flood.started()
            done = await keyed_writes_and_unsubscribes(base, key, ids)
            tg.cancel_scope.cancel()
    answered = [(what, status) for what, status, seconds in done if status in (200, 201) and seconds <= BOUND]
    assert len(answered) == 18, done  # before: each unsubscribe 503 after 1 s, no room left by the flood
    assert flood.answers and set(flood.answers) == {b"HTTP/1.1 401 Unauthorized"}, set(flood.answers)
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 1


@pytest.mark.serial
async def test_one_network_holds_only_its_share_of_connections_and_body_room(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """300 slow webhook bodies (authenticated only inside the body, so they take room) from addresses rotating
    in 127.0.0.0/24, one client network: it holds at most its share, and a key's writes from another
    network get room."""
    ids = await subscriber(conn)
    key = make_key(dsn, "acme")
    shares = {"http_client_connections": 50, "http_client_body_bytes": 1024 * 1024}
    flood_request = head("POST", "/inbound/mailgun", 60_000)
    async with http_server(
        dsn,
        **{**SETTINGS, "http_body_buffer_bytes": 2 * 1024 * 1024},
        **shares,
        mailgun_webhook_signing_key="mailgun-test-key",
    ) as base:
        flood = Flood(base, flood_request, lambda n: f"127.0.0.{2 + n % 250}")
        async with anyio.create_task_group() as tg:
            for n in range(FLOOD):
                tg.start_soon(flood.client, n)
            await flood.started()
            async with httpx.AsyncClient() as client:
                metrics = (await client.get(f"{base}/metrics")).text
            done = await keyed_writes_and_unsubscribes(base, key, ids)
            tg.cancel_scope.cancel()
    held = next(float(line.split()[1]) for line in metrics.splitlines() if line.startswith("einmal_http_body_bytes "))
    assert held <= 1024 * 1024  # before: the whole budget, 2 MiB, and every keyed write 503
    answered = [(what, status) for what, status, seconds in done if status in (200, 201) and seconds <= BOUND]
    assert len(answered) == 18, done
    assert b"HTTP/1.1 503 Service Unavailable" in flood.answers  # past its share of connections or of room


@pytest.mark.serial
@pytest.mark.parametrize("path", ["/api/v1/subscribers/slow@example.org", "/unsubscribe?token={token}"])
async def test_a_body_that_trickles_is_cut_at_its_deadline_from_the_head(
    conn: asyncpg.Connection, dsn: str, path: str
) -> None:
    ids = await subscriber(conn)
    key = make_key(dsn, "acme")
    method = "PUT" if path.startswith("/api") else "POST"
    request = head(method, path.format(token=token(ids)), 2000, f"Authorization: Bearer {key}\r\n")
    async with http_server(dsn, http_body_timeout_seconds=1.0) as base, await connect(base) as stream:
        await stream.send(request)
        started = time.monotonic()
        async with anyio.create_task_group() as tg:

            async def trickle() -> None:
                for _ in range(200):  # 20 s at most, far short of the declared length
                    await stream.send(b" ")
                    await anyio.sleep(0.1)

            tg.start_soon(trickle)
            answer = await until_closed(stream, 20)
            tg.cancel_scope.cancel()
        took = time.monotonic() - started
    assert 0.8 <= took <= 2.0, took
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (head("PUT", "/api/v1/subscribers/x@example.org", 65536), b"401"),
        (head("PUT", "/api/v1/subscribers/x@example.org", 65536, "Authorization: Bearer einmal_guess\r\n"), b"401"),
        (head("POST", "/unsubscribe?token=1.2.3.forged", 65536), b"400"),
    ],
    ids=["no key", "a key that is not valid", "a forged unsubscribe token"],
)
async def test_what_a_path_trusts_is_checked_before_its_body_takes_room(
    dsn: str, request_head: bytes, status: bytes
) -> None:
    async with http_server(dsn, http_body_timeout_seconds=5.0) as base, await connect(base) as stream:
        await stream.send(request_head)  # and not a byte of the body
        with anyio.fail_after(2):
            answer = await stream.receive()
        async with httpx.AsyncClient() as client:
            metrics = (await client.get(f"{base}/metrics")).text
    assert answer.startswith(b"HTTP/1.1 " + status), answer
    assert "einmal_http_body_bytes 0.0" in metrics.splitlines()
