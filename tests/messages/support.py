"""Helpers for the tests of transactional messages: an account with a key, a message's send row."""

import asyncpg

from tests.web.test_api import make_key

FROM = "Acme <shop@example.com>"


async def account_with_key(conn: asyncpg.Connection, dsn: str, name: str = "acme") -> tuple[int, str]:
    """(account id, write key) of a new account `name`."""
    account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
    return account_id, make_key(dsn, name)


async def message_rows(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """Every message's send row, oldest first, with its campaign's kind."""
    return await conn.fetch(
        """SELECT s.campaign_id, s.email, s.status, s.attempts, s.last_reply, c.kind, c.status AS campaign_status
           FROM einmal.sends s JOIN einmal.campaigns c ON c.id = s.campaign_id
           WHERE s.campaign_id >= 4503599627370496 ORDER BY s.id"""
    )


async def suppress(conn: asyncpg.Connection, account_id: int, email: str, reason: str) -> None:
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, lower($2), $3)",
        account_id,
        email,
        reason,
    )
