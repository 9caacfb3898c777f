"""The bound on guessing console passwords: a flood of wrong passwords against one user from one network
(127.0.0.0/24) refuses that user from that network only — the same user signs in from another network
(127.0.1.0/24, the client bound to 127.0.1.1) and another user from the same network — while wrong
passwords against many names from one network refuse that network, whatever the name. Sign-ins sent at once
are counted before any password is tried, so they cannot all slip under the bound."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import httpx
import pytest

from service import clients
from service.users import throttle
from tests.support.console import sign_in, user
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def client_from(base: str, address: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base, transport=httpx.AsyncHTTPTransport(local_address=address)) as client:
        yield client


async def test_a_flood_against_one_user_from_one_network_locks_out_nobody_else(
    conn: asyncpg.Connection, dsn: str
) -> None:
    for name in ("ann", "bob", "cid"):
        await user(conn, name)
    window = await clients.count(conn, throttle.NAME_KIND, "-", throttle.WINDOW_SECONDS)
    if window.rest < 60:  # the counts are per fixed window: the test stays inside one
        await anyio.sleep(window.rest + 0.5)
    async with http_server(dsn) as base:
        async with client_from(base, "127.0.0.1") as here, client_from(base, "127.0.1.1") as there:
            # sent at once, they are counted before any is tried: PER_NAME are tried, the rest refused
            answers: list[int] = []

            async def wrong() -> None:  # a client each: each its own sign-in form's cookie
                async with client_from(base, "127.0.0.1") as one:
                    answers.append((await sign_in(one, "ann", "a wrong password")).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(throttle.PER_NAME + 4):
                    tg.start_soon(wrong)
            assert sorted(answers) == [401] * throttle.PER_NAME + [429] * 4
            for password in ("a wrong password", None):  # refused now, even the right password: not tried
                refused = await sign_in(here, "ann", *(p for p in (password,) if p))
                assert refused.status_code == 429 and 0 < int(refused.headers["retry-after"]) <= 900
            assert (await sign_in(there, "ann")).status_code == 303  # the same user, another network
            assert (await sign_in(here, "bob")).status_code == 303  # another user, the same network
            # many names from one network: past PER_NETWORK failures in all, the network is refused
            for n in range(throttle.PER_NETWORK - throttle.PER_NAME):
                assert (await sign_in(here, f"guess{n}", "a wrong password")).status_code == 401
            assert (await sign_in(here, "cid")).status_code == 429
            assert (await sign_in(there, "cid")).status_code == 303
    counted = await conn.fetch("SELECT kind, client, hits FROM einmal.client_counts ORDER BY kind, client")
    # what was tried and failed, and the attempts refused by their own pair's count; successes taken back
    assert ("console-login-network", "127.0.0.0/24", throttle.PER_NETWORK + 1) in [tuple(r) for r in counted]
    assert ("console-login", "127.0.0.0/24 ann", throttle.PER_NAME + 4 + 2) in [tuple(r) for r in counted]
    assert ("console-login", "127.0.0.0/24 bob", 0) in [tuple(r) for r in counted]
