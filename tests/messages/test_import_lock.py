"""A message while an import holds its account's subscribers (einmal serve on loopback, a real PostgreSQL): the
import's lock is held by the test's own transaction, as `subscribers_import_lock` takes it. A single message is
answered 503 with Retry-After, as a subscriber's upsert is, and nothing is made; the answer is not kept for its
Idempotency-Key, so the same request sent again once the import is over makes the message. A batch waits for
the lock once, not once for each item: the items left are invalid at once with the same reason."""

import asyncpg
import httpx
import pytest

from service import db
from service.messages import messages
from service.subscribers import subscriber
from tests.messages.support import FROM, account_with_key, message_rows
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

BUSY = "an import into this account is running; try again shortly"
MESSAGE = {"to": "ann@example.org", "subject": "Reset", "text": "Your link.", "from": FROM}


async def _import_lock(conn: asyncpg.Connection, account_id: int) -> None:
    """Hold the account's import lock until `conn`'s transaction ends."""
    await conn.execute(*db.sql("subscribers_import_lock", account_id=account_id))


async def test_a_message_during_an_import_is_busy_and_made_when_sent_again(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber, "LOCK_SECONDS", 0.3)
    account_id, key = await account_with_key(conn, dsn)
    headers = auth(key) | {"Idempotency-Key": "reset-1"}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=headers) as client,
    ):
        async with conn.transaction():
            await _import_lock(conn, account_id)
            busy = await client.post("/messages", json=MESSAGE)
        assert (busy.status_code, busy.headers.get("retry-after")) == (503, "5"), busy.text
        assert busy.json()["error"] == BUSY
        assert await message_rows(conn) == []
        again = await client.post("/messages", json=MESSAGE)  # the import is over: the same request
        assert again.status_code == 202, again.text
        assert again.json()["created"] is True
    assert [r["email"] for r in await message_rows(conn)] == ["ann@example.org"]


async def test_a_batch_during_an_import_waits_for_the_lock_once(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber, "LOCK_SECONDS", 0.3)
    made = messages.make
    tries: list[str] = []

    async def make(*args, **kwargs):  # each item's try to make its message, counted
        tries.append(kwargs["email"])
        return await made(*args, **kwargs)

    monkeypatch.setattr(messages, "make", make)
    account_id, key = await account_with_key(conn, dsn)
    items = [MESSAGE | {"to": f"user{i}@example.org"} for i in range(8)]
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=60, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        async with conn.transaction():
            await _import_lock(conn, account_id)
            answer = await client.post("/messages/batch", json={"messages": items})
    assert answer.status_code == 202, answer.text
    told = answer.json()
    assert (told["queued"], told["invalid"]) == (0, 8)
    assert {m["reason"] for m in told["messages"]} == {BUSY}
    assert tries == ["user0@example.org"], "one wait for the import, not one an item"
    assert await message_rows(conn) == []
