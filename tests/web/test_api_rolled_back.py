"""A request whose transaction PostgreSQL rolls back for another's sake (einmal serve on loopback, a real
PostgreSQL): the test's own transaction makes a deadlock with `PUT /lists/{name}/members/{email}` — it holds the
audit log, which the route writes last, and then asks for the subscriber's row, on which the route's new
membership holds a key share. The route, waiting first, is the one PostgreSQL rolls back. It is answered 503 with
Retry-After, as a database that cannot be reached is (not 500), nothing of it is left, and the same request sent
again is done."""

import anyio
import asyncpg
import httpx
import pytest

from tests.messages.support import account_with_key
from tests.support.web import http_server
from tests.web.test_api import auth
from tests.web.test_http_bounds import lock_waiters

pytestmark = pytest.mark.anyio


async def test_a_request_rolled_back_by_a_deadlock_is_503_and_passes_when_sent_again(
    conn: asyncpg.Connection, dsn: str
) -> None:
    acme, key = await account_with_key(conn, dsn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", acme)
    ann = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 'ann@example.org', "
        "'ann@example.org') RETURNING id",
        acme,
    )
    other = await asyncpg.connect(dsn)
    answers: list[httpx.Response] = []
    try:
        async with (
            http_server(dsn) as base,
            httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
        ):

            async def put() -> None:
                answers.append(await client.put("/lists/news/members/ann@example.org"))

            async with other.transaction(), anyio.create_task_group() as tg:
                await other.execute("LOCK TABLE einmal.audit_log IN EXCLUSIVE MODE")
                tg.start_soon(put)
                with anyio.fail_after(10):  # the route: its membership made, its audit line waiting
                    while not await lock_waiters(conn):
                        await anyio.sleep(0.02)
                await other.fetchval("SELECT id FROM einmal.subscribers WHERE id = $1 FOR UPDATE", ann)
            [rolled_back] = answers
            assert (rolled_back.status_code, rolled_back.headers.get("retry-after")) == (503, "1"), rolled_back.text
            assert await conn.fetchval("SELECT count(*) FROM einmal.list_members") == 0
            again = await client.put("/lists/news/members/ann@example.org")
            assert again.status_code == 200 and again.json()["added"] is True, again.text
    finally:
        await other.close()
