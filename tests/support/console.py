"""Helpers for the console's tests: users made through the service functions, and a client that signs in
over real HTTP as a browser does (the sign-in page's token, its cookie, the session's cookie)."""

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx

from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from service.settings import Settings
from service.users import users

PASSWORD = "correct horse battery"
TOKEN = re.compile(r'name="form_token" value="([^"]+)"')


async def user(conn: asyncpg.Connection, name: str, account: str | None = None, password: str = PASSWORD) -> int:
    return await users.add(conn, name=name, account=account, password=password, actor="test")


def form_token(page: str) -> str:
    found = TOKEN.search(page)
    assert found is not None, page[:500]
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, name: str, password: str = PASSWORD, **headers: str) -> httpx.Response:
    """The sign-in form fetched and sent: the answer to the POST (303 to the dashboard when signed in)."""
    page = await client.get("/console/login")
    assert page.status_code == 200, page.text
    data = {"form_token": form_token(page.text), "name": name, "password": password}
    return await client.post("/console/login", data=data, headers={"Origin": str(client.base_url), **headers})


@asynccontextmanager
async def signed_in(base: str, name: str, password: str = PASSWORD) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await sign_in(client, name, password)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/", answer.text
        yield client


async def page_token(client: httpx.AsyncClient) -> str:
    """The session's form token, as the dashboard's sign-out form carries it."""
    return form_token((await client.get("/console/")).text)


async def sending_campaign(conn: asyncpg.Connection, account: str, name: str, rows: int = 40) -> int:
    """A campaign of the account, sending, with `rows` send rows: a quarter sent, one in ten in doubt, one
    failed, the rest queued (its subscribers made for it)."""
    account_id = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = $1", account)
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, "
        "recipients_built_at) VALUES ($1, $2, 'News of ' || $2, 'news@example.com', 'b', '{}', 'sending', now()) "
        "RETURNING id",
        account_id,
        name,
    )
    await conn.execute(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "SELECT $1, $2 || i || '@example.org', lower($2) || i || '@example.org' FROM generate_series(1, $3) AS i",
        account_id,
        f"{name.replace(' ', '')}-",
        rows,
    )
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                  next_attempt_at)
        SELECT $1::bigint, account_id, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id,
               CASE WHEN n % 4 = 0 THEN 'sent' WHEN n % 10 = 1 THEN 'in_doubt' WHEN n = 3 THEN 'failed'
                    ELSE 'queued' END,
               now() + interval '1 hour'
        FROM (SELECT s.*, row_number() OVER (ORDER BY id) AS n FROM einmal.subscribers AS s
              WHERE account_id = $2 AND email LIKE $3) AS s""",
        campaign,
        account_id,
        f"{name.replace(' ', '')}-%",
    )
    return campaign


async def accounts(conn: asyncpg.Connection, *names: str) -> dict[str, int]:
    """The accounts, each with its list `news` and its member `<name>-member`, and the operator `root`: the
    accounts' ids by name."""
    ids = {}
    for name in names:
        ids[name] = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
        await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", ids[name])
        await user(conn, f"{name}-member", name)
    await user(conn, "root")
    return ids


async def operated(conn: asyncpg.Connection, account: str) -> dict[str, int]:
    """The account's objects of the operations pages, written as the service leaves them: a webhook endpoint
    with a delivery parked, a transactional message sent, a sequence on its list `news` whose one step reached
    2 of its 3 members. Their ids, by the console's path parameters."""
    account_id = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = $1", account)
    endpoint_id = await conn.fetchval(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) "
        "VALUES ($1, 'https://hooks.example.org/' || $2, '{message.sent}', 'whsec_test') RETURNING id",
        account_id,
        account,
    )
    event = await conn.fetchval(
        "INSERT INTO einmal.webhook_events (account_id, type, sequence, payload) "
        "VALUES ($1, 'message.sent', 1, '{}') RETURNING id",
        account_id,
    )
    await conn.execute(
        "INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id, state, attempts, last_status) "
        "VALUES ($1, $2, 'parked', 12, 500)",
        event,
        endpoint_id,
    )
    subscribers = [
        await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2) RETURNING id",
            account_id,
            f"{account}-{i}@example.org",
        )
        for i in range(3)
    ]
    message_id = await conn.fetchval("SELECT nextval('einmal.message_ids')")
    await conn.execute(
        "INSERT INTO einmal.campaigns (id, account_id, name, subject, from_address, body_text, list_ids, kind, "
        "status, recipients_built_at, started_at, unsubscribe_required) OVERRIDING SYSTEM VALUE "
        "VALUES ($1, $2, 'message', 'Receipt of ' || $3, 'shop@example.com', 'b', '{}', 'message', 'sent', now(), "
        "now(), false)",
        message_id,
        account_id,
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.messages (campaign_id, account_id, template) VALUES ($1, $2, 'receipt')",
        message_id,
        account_id,
    )
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, "
        "sent_at) VALUES ($1::bigint, $2, $3::bigint, $4, $4, 'campaign:' || $1::bigint || ':' || $3::bigint, 'sent', "
        "now())",
        message_id,
        account_id,
        subscribers[0],
        f"{account}-0@example.org",
    )
    list_id = await conn.fetchval("SELECT id FROM einmal.lists WHERE account_id = $1 AND name = 'news'", account_id)
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT $1, unnest($2::bigint[])", list_id, subscribers
    )
    sequence = await sequences.create(
        conn, account_id=account_id, name=f"Welcome to {account}", list_name="news", existing=True
    )
    mailing = Mailing.of(Settings(unsubscribe_url="https://example.org/u", unsubscribe_secret="s" * 32))
    added = await steps.add(
        conn,
        mailing=mailing,
        account_id=account_id,
        sequence_id=sequence.id,
        subject=f"Hello from {account}",
        from_address="news@example.com",
        text="b",
    )
    step = added.campaign_id
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, "
        "sent_at) SELECT $1::bigint, $2, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id, 'sent', now() "
        "FROM einmal.subscribers WHERE id = ANY($3::bigint[])",
        step,
        account_id,
        subscribers[:2],
    )
    return {"endpoint_id": endpoint_id, "message_id": message_id, "sequence_id": sequence.id}
