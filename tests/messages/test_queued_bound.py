"""An account's messages queued and not yet sent are bounded (EINMAL_ACCOUNT_MESSAGES_QUEUED, or the account's
own `einmal accounts set --messages-queued`): past it POST /messages and /messages/batch answer 429 with
Retry-After and make nothing, the command line says so in one line, and a retry under the same Idempotency-Key
runs again once there is room (a 429 is not kept as the key's answer)."""

import asyncpg
import httpx
import pytest

from tests.messages.support import FROM, account_with_key, message_rows
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio


def one(to: str) -> dict[str, str]:
    return {"to": to, "subject": "Reset", "text": "Your link.", "from": FROM}


async def test_past_the_bound_a_message_is_refused_429_and_nothing_is_made(conn: asyncpg.Connection, dsn: str) -> None:
    _, key = await account_with_key(conn, dsn)
    async with (
        http_server(dsn, account_messages_queued=3, rate_limit=2) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        for i in range(2):
            assert (await client.post("/messages", json=one(f"m{i}@example.org"))).status_code == 202
        two = await client.post("/messages/batch", json={"messages": [one("b0@example.org"), one("b1@example.org")]})
        assert two.status_code == 429, two.text
        assert two.headers["Retry-After"] == "1"  # one message too many, at 2 a second
        assert len(await message_rows(conn)) == 2, "the batch made none of its messages"
        third = await client.post("/messages", json=one("m2@example.org"))
        assert third.status_code == 202, third.text
        refused = await client.post("/messages", json=one("m3@example.org"), headers={"Idempotency-Key": "k-3"})
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert "queued" in refused.json()["error"] and "\n" not in refused.json()["error"]
        assert [r["email"] for r in await message_rows(conn)] == [f"m{i}@example.org" for i in range(3)]
        # one is sent: there is room again, and the same key runs the request again
        await conn.execute(
            "UPDATE einmal.sends SET status = 'sent' WHERE id = (SELECT min(id) FROM einmal.sends_messages)"
        )
        again = await client.post("/messages", json=one("m3@example.org"), headers={"Idempotency-Key": "k-3"})
        assert again.status_code == 202, again.text
    assert len(await message_rows(conn)) == 4


async def test_an_accounts_own_bound_comes_before_the_default(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, key = await account_with_key(conn, dsn)
    await conn.execute("UPDATE einmal.accounts SET messages_queued_max = 1 WHERE id = $1", account_id)
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        assert (await client.post("/messages", json=one("a@example.org"))).status_code == 202
        refused = await client.post("/messages", json=one("b@example.org"))
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "5", refused.text  # no rate: 5 s
    assert len(await message_rows(conn)) == 1
