"""Helpers for tests of the HTTP surface: an `einmal serve` in the test's event loop, a subscriber
with a genuine token, and what the database holds afterwards."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import httpx
from pydantic import SecretStr

from actors import http, node
from service.addresses import email_key
from service.mail import unsubscribe
from service.settings import Settings

SECRET = "first-key-for-tests"
UNSUBSCRIBE_URL = "http://127.0.0.1:9/unsubscribe"  # a one-click unsubscribe: the API creates bulk campaigns
ONE_CLICK = {"List-Unsubscribe": "One-Click"}


@asynccontextmanager
async def http_server(dsn: str, secret: str | None = SECRET, **overrides) -> AsyncIterator[str]:
    """`async with http_server(dsn) as base_url:` einmal serve on a free loopback port, in this loop
    (`overrides`: other settings, e.g. a webhook's secret; unsubscribe_url=None: none)."""
    overrides.setdefault("unsubscribe_url", UNSUBSCRIBE_URL)
    settings = Settings(database_url=dsn, unsubscribe_secret=SecretStr(secret) if secret else None, **overrides)
    sock = http.bind("127.0.0.1:0")
    stop = anyio.Event()
    codes: list[int] = []

    async def serve() -> None:
        codes.append(await node.serve_http(settings, stop, sock))

    base = http.url(sock)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            async with httpx.AsyncClient() as client:
                with anyio.fail_after(30):
                    while True:
                        try:
                            if (await client.get(f"{base}/healthz")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await anyio.sleep(0.02)
            try:
                yield base
            finally:
                stop.set()
    finally:
        sock.close()
    assert codes == [0]


async def subscriber(
    conn: asyncpg.Connection, email: str = "Ann.Example@Example.org", account: str = "acme"
) -> tuple[int, int, int]:
    """(account_id, campaign_id, subscriber_id) of a new subscriber and a draft campaign."""
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", account)
    # other ids first, so that the account, campaign and subscriber ids all differ
    await conn.execute(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, 'x@example.org', 'x@example.org')",
        account_id,
    )
    subscriber_id = await conn.fetchval(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $3) RETURNING id",
        account_id,
        email,
        email_key(email),
    )
    campaign_id = await conn.fetchval(
        """
        WITH made AS (
            INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
            SELECT $1, 'Spring news', 's', 'news@example.com', 'b', '{}' FROM generate_series(1, 3)
            RETURNING id)
        SELECT max(id) FROM made""",
        account_id,
    )
    return account_id, campaign_id, subscriber_id


async def webhook_endpoint(conn: asyncpg.Connection, account_id: int, event: str) -> None:
    """An endpoint of the account that takes `event`: its events are written (and never sent, in a test)."""
    await conn.execute(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) "
        "VALUES ($1, 'https://hooks.example.org/', ARRAY[$2], 'whsec_dGVzdA==')",
        account_id,
        event,
    )


def token(ids: tuple[int, int, int], secret: str = SECRET) -> str:
    return unsubscribe.make_token(secret, *ids)


async def written(conn: asyncpg.Connection) -> tuple[int, int]:
    """(inbound events, suppressions) in the database."""
    return (
        await conn.fetchval("SELECT count(*) FROM einmal.inbound_events"),
        await conn.fetchval("SELECT count(*) FROM einmal.suppressions"),
    )
