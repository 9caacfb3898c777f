"""Helpers for the double opt-in tests: an account with a list and a key, settings with double opt-in set
up, and the confirmation link of a captured message."""

import email
import re
from email import policy

import anyio
import asyncpg

from service import clients
from service.subscribers import optin
from tests.conftest import einmal

SECRET = "optin-test-key-of-32-characters-or-more"
FROM = "Acme News <news@example.com>"
SETTINGS = {"optin_from": FROM, "confirm_url": "http://127.0.0.1/confirm"}


async def one_window(conn: asyncpg.Connection, seconds: float = 60) -> None:
    """Wait, if need be, until the sign-up counts' hour (a window of the clock, the same for every client) has
    `seconds` left, so that a test's sign-ups all fall into one window rather than start afresh halfway."""
    rest = (await clients.count(conn, optin.CLIENT_KIND, "127.0.0.0/24", optin.HOUR)).rest
    if rest < seconds:
        await anyio.sleep(rest + 0.5)


TOKEN = "news-form-token-012345"  # the form of list 'news' of account_with_list: /forms/<TOKEN>
FORM = f"/forms/{TOKEN}"


async def account_with_list(
    conn: asyncpg.Connection, dsn: str, members: list[str] = (), open_form: bool = True
) -> tuple[int, int, str]:
    """(account id, list id, write key) of account acme with list 'news' holding `members`, confirmed (an
    import's: they assert consent); its sign-ups open (its form at FORM) unless not `open_form`."""
    account_id = await conn.fetchval(
        "INSERT INTO einmal.accounts (name, display_name) VALUES ('acme', 'Acme') RETURNING id"
    )
    list_id = await conn.fetchval(
        "INSERT INTO einmal.lists (account_id, name, form_open, form_token) VALUES ($1, 'news', $2, $3) RETURNING id",
        account_id,
        open_form,
        TOKEN if open_form else None,
    )
    for address in members:
        subscriber = await conn.fetchval(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, lower($2)) RETURNING id",
            account_id,
            address,
        )
        await conn.execute(
            "INSERT INTO einmal.list_members (list_id, subscriber_id) VALUES ($1, $2)", list_id, subscriber
        )
    made = einmal("account", "key", "create", "--account", "acme", dsn=dsn)
    assert made.returncode == 0, made.stderr
    return account_id, list_id, made.stdout.strip()


def confirm_link(data: bytes) -> str:
    """The confirmation link in a captured message's text."""
    message = email.message_from_bytes(data, policy=policy.default)
    text = message.get_body(("plain",)).get_content()
    return re.search(r"https?://\S+/confirm\?token=\S+", text).group(0)


async def memberships(conn: asyncpg.Connection, list_id: int) -> dict[str, str]:
    """address -> membership state of the list's members."""
    rows = await conn.fetch(
        """SELECT s.email, m.state FROM einmal.list_members m
                               JOIN einmal.subscribers s ON s.id = m.subscriber_id WHERE m.list_id = $1""",
        list_id,
    )
    return {r["email"]: r["state"] for r in rows}


async def confirmation_rows(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch("""SELECT s.email, s.status FROM einmal.sends s JOIN einmal.campaigns c
                               ON c.id = s.campaign_id WHERE c.kind = 'confirmation' ORDER BY s.id""")
