"""The claim's opt-out check for messages, alone (docs/design.md#messages, "What a message honours";
sql/queries/message_claim_batch.sql): suppressions made before the claim settle the rows the claim reaches,
without the start statement or the last look after it. A suppression for a hard bounce, a complaint or by the
operator stops any message; an unsubscribe only a message that honours it."""

import asyncpg
import pytest

from service import db
from service.messages import messages
from service.settings import Settings
from tests.messages.support import FROM, account_with_key, suppress
from tests.support.claims import NO_LIMITS

pytestmark = pytest.mark.anyio

TOKEN = "node-1:pipeline-1"


async def test_the_claim_alone_applies_what_a_message_honours(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    cases = {  # (address, its suppression made before the claim, honour_unsubscribe) -> status after the claim
        ("unsub@example.com", "unsubscribe", False): "claimed",
        ("unsub-h@example.com", "unsubscribe", True): "suppressed",
        ("hard@example.com", "bounce", False): "suppressed",
        ("complained@example.com", "complaint", False): "suppressed",
        ("blocked@example.com", "manual", True): "suppressed",
        ("fresh@example.com", None, True): "claimed",
    }
    for email, reason, honour in cases:
        if reason:
            await suppress(conn, account_id, email, reason)
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
    claimed = await conn.fetch(
        *db.sql("message_claim_batch", **{**NO_LIMITS, "batch_size": 50, "account_id": account_id, "token": TOKEN})
    )
    answered = {r["email"]: r["status"] for r in claimed}
    stored = {
        r["email"]: r["status"]
        for r in await conn.fetch(
            "SELECT s.email, s.status FROM einmal.sends AS s JOIN einmal.campaigns AS c ON c.id = s.campaign_id"
            " WHERE c.account_id = $1 AND c.kind = 'message'",
            account_id,
        )
    }
    expected = {email: status for (email, _, _), status in cases.items()}
    assert answered == expected, answered
    assert stored == expected, stored  # settled in the claim's own statement, nothing left for a later layer
