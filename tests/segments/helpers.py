"""An account of subscribers with attributes, lists and dates for the segments' tests."""

import json
from datetime import date

import asyncpg

from service.addresses import email_key

# email: (attributes, lists, created_at)
PEOPLE = {
    "ann@example.org": ({"plan": "pro", "age": 41, "tags": ["vip", "beta"]}, ["news"], "2026-02-01"),
    "bob@example.org": ({"plan": "pro", "age": 29}, ["news", "churned"], "2026-03-01"),
    "cat@example.org": ({"plan": "free", "age": 35}, ["news"], "2026-03-05"),
    "dan@example.org": ({"plan": "pro", "age": "old"}, ["news"], "2025-11-01"),
    "eve@example.org": ({"plan": "pro"}, ["offers"], "2026-04-01"),
    "fay@example.org": ({}, ["news"], "2026-04-02"),
    "gus@example.org": ({"plan": "pro", "age": 50}, [], "2026-04-03"),  # on no list: never taken
}


async def seed(conn: asyncpg.Connection, account: str = "acme", people: dict = PEOPLE) -> int:
    """The account, its lists news, churned and offers, and `people`; its id."""
    account_id: int = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", account)
    await conn.execute(
        "INSERT INTO einmal.lists (account_id, name) SELECT $1, n FROM unnest(ARRAY['news', 'churned', 'offers']) n",
        account_id,
    )
    for email, (attributes, lists, created) in people.items():
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes, created_at) "
            "VALUES ($1, $2, $3, $4::jsonb, $5::date) RETURNING id",
            account_id,
            email,
            email_key(email),
            json.dumps(attributes),
            date.fromisoformat(created),
        )
        await conn.execute(
            "INSERT INTO einmal.list_members (list_id, subscriber_id) "
            "SELECT id, $2 FROM einmal.lists WHERE account_id = $1 AND name = ANY ($3::text[])",
            account_id,
            subscriber,
            lists,
        )
    return account_id
