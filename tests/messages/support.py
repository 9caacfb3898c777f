"""Helpers for the tests of transactional messages: an account with a key, a message's send row, the opt-outs
each layer of a message's sending applies alone."""

import asyncpg

from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
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


# (address, its suppression's reason, honour_unsubscribe) -> whether that stops the message: a hard bounce, a
# complaint or the operator's suppression stops any message, an unsubscribe only one that honours it
OPT_OUTS = {
    ("unsub@example.com", "unsubscribe", False): False,
    ("unsub-h@example.com", "unsubscribe", True): True,
    ("hard@example.com", "bounce", False): True,
    ("complained@example.com", "complaint", False): True,
    ("blocked@example.com", "manual", False): True,
    ("fresh@example.com", None, True): False,
}


async def opt_out_messages(conn: asyncpg.Connection, settings: Settings, account_id: int) -> dict[str, int]:
    """A message to each address of OPT_OUTS, honouring unsubscribes as it says: {address: message id}."""
    return {
        email: (
            await messages.send(
                conn,
                queueing=Queueing.of(settings),
                account_id=account_id,
                to=email,
                subject="Receipt",
                body_text="Thanks.",
                from_address=FROM,
                honour_unsubscribe=honour,
            )
        ).id
        for email, _, honour in OPT_OUTS
    }


async def opt_outs(conn: asyncpg.Connection, account_id: int) -> None:
    """The suppressions OPT_OUTS names."""
    for email, reason, _ in OPT_OUTS:
        if reason:
            await suppress(conn, account_id, email, reason)
