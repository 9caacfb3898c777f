"""What an account is shown of its rows' replies over the API (service/accounts/replies.py): an account whose
mail goes through the installation's relays sees a reply's codes, never the relay's name or words; an account
with relays of its own sees them whole. The rows' replies are written as the sender writes them."""

import json

import asyncpg
import httpx
import pytest

from service.accounts import replies
from tests.messages.support import FROM, account_with_key
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

BOUNCED = "550 5.1.1 <ann@example.org>: rejected: unknown at relay-7.ops.internal (gave up after 1 attempts)"
UNREACHED = "not sent: SMTP ops-relay-east: authentication rejected: 535 5.7.8 credentials of ops@internal refused"
TOLD = {
    BOUNCED: "550 5.1.1 (gave up after 1 attempts)",
    UNREACHED: "not sent: the relay could not be reached",
}


async def message_with_reply(client: httpx.AsyncClient, conn: asyncpg.Connection, status: str, reply: str) -> int:
    sent = await client.post("/messages", json={"to": "ann@example.org", "subject": "Hi", "text": "Hi.", "from": FROM})
    assert sent.status_code == 202, sent.text
    message_id = sent.json()["id"]
    await conn.execute(
        "UPDATE einmal.sends SET status = $2, last_reply = $3, claimed_by = NULL WHERE campaign_id = $1",
        message_id,
        status,
        reply,
    )
    return message_id


async def shared_and_own(conn: asyncpg.Connection, dsn: str) -> tuple[tuple[int, str], tuple[int, str]]:
    """(id, key) of an account on the installation's relays and of one with a relay of its own."""
    shared = await account_with_key(conn, dsn, "shared")
    own = await account_with_key(conn, dsn, "own")
    relay = await conn.fetchval(
        "INSERT INTO einmal.relays (name, url) VALUES ('own-relay', 'smtp://127.0.0.1:9') RETURNING id"
    )
    await conn.execute("INSERT INTO einmal.account_relays (account_id, relay_id) VALUES ($1, $2)", own[0], relay)
    return shared, own


async def test_an_account_on_the_installations_relays_sees_codes_not_the_relays_words(
    conn: asyncpg.Connection, dsn: str
) -> None:
    (shared_id, shared_key), (own_id, own_key) = await shared_and_own(conn, dsn)
    async with http_server(dsn) as base:
        for key, whole in ((shared_key, False), (own_key, True)):
            async with httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client:
                for reply in (BOUNCED, UNREACHED):
                    failed = await message_with_reply(client, conn, "failed", reply)
                    shown = (await client.get(f"/messages/{failed}")).json()["last_reply"]
                    assert shown == (reply if whole else TOLD[reply]), shown
                    status = (await client.get(f"/campaigns/{failed}")).json()
                    assert status["failures"] == [{"reply": reply if whole else TOLD[reply], "count": 1}], status
                doubt = await message_with_reply(client, conn, "in_doubt", UNREACHED)
                rows = (await client.get(f"/campaigns/{doubt}/in-doubt")).json()["rows"]
                assert [r["last_reply"] for r in rows] == [UNREACHED if whole else TOLD[UNREACHED]], rows
    assert shared_id != own_id


SAID = [
    BOUNCED,
    UNREACHED,
    "421 4.7.0 Try again later, closing connection. relay.ops.internal",
    "451",
    "250 2.0.0 Ok: queued as 4F1A2B",
    "unexpected reply to end of DATA: 354 go ahead, relay.ops.internal",
    "connection lost after end of DATA, reply unknown: timed out after 30s",
    "cannot render: 'attributes' is undefined",
    "suppressed when claimed",
    "left the list",
    "not sent: SMTP a: b: c\nd",
]


async def test_webhook_events_and_the_api_show_a_reply_alike(conn: asyncpg.Connection) -> None:
    """The database's rule for webhook events (einmal.reply_shown) and the API's (replies.shown) say the same."""
    for reply in SAID:
        assert await conn.fetchval("SELECT einmal.reply_shown($1)", reply) == replies.shown(reply, own_relays=False)


async def test_a_failed_rows_webhook_event_carries_the_reply_as_its_account_is_shown_it(
    conn: asyncpg.Connection, dsn: str
) -> None:
    (shared_id, shared_key), (own_id, own_key) = await shared_and_own(conn, dsn)
    made = {}
    async with http_server(dsn, webhook_allow_http_loopback=True) as base:
        for name, key in (("shared", shared_key), ("own", own_key)):
            async with httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client:
                hook = await client.post("/webhooks", json={"url": "http://127.0.0.1:9/hook"})
                assert hook.status_code == 201, hook.text
                made[name] = await message_with_reply(client, conn, "queued", "")
    for message_id in made.values():  # a move to failed, as the writer's, which the trigger sees
        await conn.execute(
            "UPDATE einmal.sends SET status = 'failed', last_reply = $2 WHERE campaign_id = $1", message_id, BOUNCED
        )
    events = {
        r["account_id"]: json.loads(r["payload"])
        for r in await conn.fetch("SELECT account_id, payload FROM einmal.webhook_events WHERE type = 'message.failed'")
    }
    assert events[shared_id]["reply"] == TOLD[BOUNCED] and events[own_id]["reply"] == BOUNCED, events
