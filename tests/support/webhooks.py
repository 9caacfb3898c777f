"""Helpers for the webhook tests: an account with send rows, an endpoint of it, what the outbox holds."""

import asyncpg

from service.addresses import email_key
from service.webhooks import signing

ALL = [
    "message.sent",
    "message.failed",
    "message.bounced",
    "message.complained",
    "subscriber.unsubscribed",
    "subscriber.confirmed",
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
