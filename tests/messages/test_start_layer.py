"""The start statement's opt-out check for messages, alone (docs/design.md#messages, "What a message honours";
sql/queries/send_advance.sql): rows already claimed, with no claim check and no last look after, are started
or settled by the writer's statement as the suppressions are at that moment. A suppression for a hard bounce,
a complaint or by the operator stops any message; an unsubscribe stops only a message that honours it, and
any campaign's row."""

import asyncpg
import pytest

from actors.writer import advance
from service.settings import Settings
from tests.messages.support import OPT_OUTS, account_with_key, opt_out_messages, opt_outs
from tests.support.wiring import recording

pytestmark = pytest.mark.anyio

TOKEN = "node-1:pipeline-1"


async def test_the_start_statement_alone_applies_what_a_message_honours(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    made = await opt_out_messages(conn, settings, account_id)
    # claimed as a claim leaves them, before any suppression: the claim's own check saw nothing
    await conn.execute(
        "UPDATE einmal.sends SET status = 'claimed', claimed_by = $1 WHERE campaign_id = ANY ($2::bigint[])",
        TOKEN,
        list(made.values()),
    )
    await opt_outs(conn, account_id)
    starts = [(await conn.fetchval("SELECT id FROM einmal.sends WHERE campaign_id = $1", c), c) for c in made.values()]
    started = {
        r["id"] for r in await advance(conn, recording(settings).pauses, [], TOKEN, starts) if r["id"] is not None
    }
    found = {
        r["email"]: (r["status"], r["id"] in started)
        for r in await conn.fetch(
            "SELECT id, email, status FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])", list(made.values())
        )
    }
    expected = {
        email: ("suppressed", False) if stops else ("sending", True) for (email, _, _), stops in OPT_OUTS.items()
    }
    assert found == expected, found
