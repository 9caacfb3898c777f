"""Helpers for the webhook tests: an account with send rows, an endpoint of it, what the outbox holds."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
from standardwebhooks import Webhook

from actors.sections import webhook_config
from actors.webhooks import WebhookActor
from service.addresses import email_key
from service.settings import Settings
from service.webhooks import signing
from tests.support.webhook_receiver import Request

ALL = [
    "message.sent",
    "message.failed",
    "message.bounced",
    "message.complained",
    "subscriber.unsubscribed",
    "subscriber.confirmed",
    "sequence.step_sent",
]


async def account_with_sends(conn: asyncpg.Connection, name: str, addresses: list[str]) -> tuple[int, int]:
    """An account `name` with subscribers on list 'l' and a sending campaign with a 'sending' row for each
    address (claimed by token 't'): (account id, campaign id)."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
    list_id = await conn.fetchval("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'l') RETURNING id", account)
    await conn.execute(
        """INSERT INTO einmal.subscribers (account_id, email, email_lower)
           SELECT $1, e, k FROM unnest($2::text[], $3::text[]) AS u (e, k)""",
        account,
        addresses,
        [email_key(a) for a in addresses],
    )
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT $1, id FROM einmal.subscribers "
        "WHERE account_id = $2",
        list_id,
        account,
    )
    campaign = await conn.fetchval(
        """INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
           VALUES ($1, 'c', 's', 'news@example.com', 'b', ARRAY[$2::bigint], 'sending') RETURNING id""",
        account,
        list_id,
    )
    await conn.execute(
        """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                     claimed_by)
           SELECT $1::bigint, $2::bigint, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id, 'sending', 't'
           FROM einmal.subscribers WHERE account_id = $2""",
        campaign,
        account,
    )
    return account, campaign


async def endpoint(
    conn: asyncpg.Connection, account: int, url: str, events: list[str] = ALL, secret: str | None = None
) -> tuple[int, str]:
    """An endpoint written straight to the table (the URL policy is tested apart): (id, secret)."""
    secret = secret or signing.new_secret()
    endpoint_id = await conn.fetchval(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) VALUES ($1, $2, $3, $4) RETURNING id",
        account,
        url,
        events,
        secret,
    )
    return endpoint_id, secret


async def events(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT id, account_id, type, sequence, payload::text AS payload FROM einmal.webhook_events "
        "ORDER BY created_at, sequence"
    )


async def deliveries(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT * FROM einmal.webhook_deliveries ORDER BY created_at, event_id")


@asynccontextmanager
async def running_actor(dsn: str, **overrides: object) -> AsyncIterator[WebhookActor]:
    """`async with running_actor(dsn, webhook_retry_seconds="0.05"):` the delivery actor of a node, alone,
    in this event loop: loopback over http allowed, short waits; cancelled on exit."""
    values: dict[str, object] = dict(
        database_url=dsn,
        webhook_allow_http_loopback=True,
        webhook_retry_seconds="0.05,0.05,0.05,0.05,0.05",
        webhook_tick_seconds=0.2,
        webhook_timeout_seconds=2.0,
    )
    values.update(overrides)
    actor = WebhookActor(webhook_config(Settings(**values), dsn), "test-node")
    async with anyio.create_task_group() as tg:
        await tg.start(actor.run)
        try:
            yield actor
        finally:
            tg.cancel_scope.cancel()


async def wait_until(conn: asyncpg.Connection, query: str, *args: object, timeout: float = 20) -> None:
    """Until `query` answers true, asked every 50 ms, at most `timeout` seconds."""
    with anyio.fail_after(timeout):
        while not await conn.fetchval(query, *args):
            await anyio.sleep(0.05)


def verified(request: Request, *secrets: str) -> dict:
    """The request's payload, verified with each of `secrets` by the Standard Webhooks library."""
    payload = {}
    for secret in secrets:
        payload = Webhook(secret).verify(request.body, request.headers)
    return payload
