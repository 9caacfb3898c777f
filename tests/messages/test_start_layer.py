"""The start statement's opt-out check for messages, alone (docs/design.md#messages, "What a message honours";
sql/queries/send_advance.sql): rows already claimed, with no claim check and no last look after, are started
or settled by the writer's statement as the suppressions are at that moment. A suppression for a hard bounce,
a complaint or by the operator stops any message; an unsubscribe stops only a message that honours it, and
any campaign's row."""

import asyncpg
import pytest

from actors.writer import advance
from service.messages import messages
from service.settings import Settings
from tests.messages.support import FROM, account_with_key, suppress

pytestmark = pytest.mark.anyio

TOKEN = "node-1:pipeline-1"


async def test_the_start_statement_alone_applies_what_a_message_honours(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    cases = {  # (address, its suppression made after the claim, honour_unsubscribe) -> status after the start
        ("unsub@example.com", "unsubscribe", False): "sending",
        ("unsub-h@example.com", "unsubscribe", True): "suppressed",
        ("hard@example.com", "bounce", False): "suppressed",
        ("complained@example.com", "complaint", False): "suppressed",
        ("blocked@example.com", "manual", False): "suppressed",
        ("fresh@example.com", None, False): "sending",
    }
    made = {}
    for email, _reason, honour in cases:
        made[email] = (
            await messages.send(
                conn,
                settings=settings,
                account_id=account_id,
                to=email,
                subject="Receipt",
                body_text="Thanks.",
                from_address=FROM,
                honour_unsubscribe=honour,
            )
        ).id
    # claimed as a claim leaves them, before any suppression: the claim's own check saw nothing
    await conn.execute(
        "UPDATE einmal.sends SET status = 'claimed', claimed_by = $1 WHERE campaign_id = ANY ($2::bigint[])",
        TOKEN,
        list(made.values()),
    )
    for email, reason, _ in cases:
        if reason:
            await suppress(conn, account_id, email, reason)
    starts = [(await conn.fetchval("SELECT id FROM einmal.sends WHERE campaign_id = $1", c), c) for c in made.values()]
    started = {r["id"] for r in await advance(conn, settings, [], TOKEN, starts) if r["id"] is not None}
    found = {
        r["email"]: (r["status"], r["id"] in started)
        for r in await conn.fetch(
            "SELECT id, email, status FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])", list(made.values())
        )
    }
    assert found == {email: (status, status == "sending") for (email, _, _), status in cases.items()}, found
