"""The claim's opt-out check for messages, alone (docs/design.md#messages, "What a message honours";
sql/queries/message_claim_batch.sql): suppressions made before the claim settle the rows the claim reaches,
without the start statement or the last look after it. A suppression for a hard bounce, a complaint or by the
operator stops any message; an unsubscribe only a message that honours it."""

import asyncpg
import pytest

from service import db
from service.settings import Settings
from tests.messages.support import OPT_OUTS, account_with_key, opt_out_messages, opt_outs
from tests.support.claims import NO_LIMITS

pytestmark = pytest.mark.anyio

TOKEN = "node-1:pipeline-1"


async def test_the_claim_alone_applies_what_a_message_honours(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    await opt_outs(conn, account_id)  # before the messages are made: the claim is the first to look
    await opt_out_messages(conn, settings, account_id)
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
    expected = {email: "suppressed" if stops else "claimed" for (email, _, _), stops in OPT_OUTS.items()}
    assert answered == expected, answered
    assert stored == expected, stored  # settled in the claim's own statement, nothing left for a later layer
