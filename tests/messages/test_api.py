"""Transactional messages over /api/v1 (einmal serve on loopback, a real PostgreSQL): templates made, listed,
replaced and removed; a message queued from a template or from inline sources answers 202 with its id at once
and is told by GET from its send row; another account's is 404; a template changed after a message was queued
changes nothing of that message; a From outside the account's domains and a template that cannot compile are 422.
Idempotency: 50 POSTs at once with one Idempotency-Key make one message, through the API and through the route's
own function without the middleware (what a retry after a node died between claim and answer runs)."""

import anyio
import asyncpg
import httpx
import pytest

from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
from tests.messages.support import FROM, account_with_key, message_rows
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio


async def test_templates_and_a_message_from_one(conn: asyncpg.Connection, dsn: str) -> None:
    _, other_key = await account_with_key(conn, dsn, "other")
    _, key = await account_with_key(conn, dsn)
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        made = await client.put(
            "/message-templates/receipt",
            json={
                "subject": "Your order {{ attributes.order }}",
                "text": "Thanks, {{ attributes.order }}.",
                "from": FROM,
            },
        )
        assert made.status_code == 201, made.text
        assert made.json()["from"] == FROM
        again = await client.put(
            "/message-templates/receipt", json={"subject": "Order", "text": "Thanks.", "from": FROM}
        )
        assert again.status_code == 200, again.text
        await client.put(
            "/message-templates/receipt",
            json={
                "subject": "Your order {{ attributes.order }}",
                "text": "Thanks, {{ attributes.order }}.",
                "from": FROM,
            },
        )
        assert [t["name"] for t in (await client.get("/message-templates")).json()] == ["receipt"]
        bad = await client.put("/message-templates/broken", json={"subject": "x", "text": "{{ oops(", "from": FROM})
        assert bad.status_code == 422, bad.text
        sent = await client.post(
            "/messages", json={"to": "Ann@Example.org", "template": "receipt", "data": {"order": "A-17"}}
        )
        assert sent.status_code == 202, sent.text
        message_id = sent.json()["id"]
        assert message_id >= 2**52 and sent.json()["created"] is True
        # the template changed after: the queued message keeps what it was made with
        await client.put("/message-templates/receipt", json={"subject": "Changed", "text": "Changed.", "from": FROM})
        shown = await client.get(f"/messages/{message_id}")
        assert shown.status_code == 200, shown.text
        body = shown.json()
        assert (body["state"], body["email"], body["subject"], body["template"]) == (
            "queued",
            "Ann@Example.org",
            "Your order {{ attributes.order }}",
            "receipt",
        )
        assert body["data"] == {"order": "A-17"} and body["honour_unsubscribe"] is False and body["attempts"] == 0
        assert (await client.get(f"/messages/{message_id}", headers=auth(other_key))).status_code == 404
        assert (await client.get(f"/messages/{2**52 + 999}")).status_code == 404
        inline = await client.post(
            "/messages",
            json={
                "to": "bob@example.org",
                "subject": "Reset",
                "text": "Your link.",
                "from": FROM,
                "honour_unsubscribe": True,
            },
        )
        assert inline.status_code == 202, inline.text
        assert (await client.get(f"/messages/{inline.json()['id']}")).json()["honour_unsubscribe"] is True
        listed = (await client.get("/messages")).json()  # newest first, a page at a time
        assert [(m["id"], m["email"], m["state"]) for m in listed] == [
            (inline.json()["id"], "bob@example.org", "queued"),
            (message_id, "Ann@Example.org", "queued"),
        ]
        assert [m["id"] for m in (await client.get("/messages", params={"before": listed[0]["id"]})).json()] == [
            message_id
        ]
        assert (await client.get("/messages", headers=auth(other_key))).json() == []
        assert (await client.post("/messages", json={"to": "bob@example.org", "template": "nope"})).status_code == 404
        no_from = await client.post("/messages", json={"to": "bob@example.org", "subject": "x", "text": "y"})
        assert no_from.status_code == 422, no_from.text
        both = await client.post("/messages", json={"to": "b@example.org", "template": "receipt", "subject": "x"})
        assert both.status_code == 422, both.text
        assert (await client.post("/messages", json={"to": "not an address", "template": "receipt"})).status_code == 422
        assert (await client.delete("/message-templates/receipt")).status_code == 204
        assert (await client.delete("/message-templates/receipt")).status_code == 404
    rows = await message_rows(conn)
    assert [(r["email"], r["status"], r["kind"], r["campaign_status"]) for r in rows] == [
        ("Ann@Example.org", "queued", "message", "sending"),
        ("bob@example.org", "queued", "message", "sending"),
    ]
    # the address had no subscriber: the message made one, on no list
    made = await conn.fetchrow(
        "SELECT s.id, (SELECT count(*) FROM einmal.list_members m WHERE m.subscriber_id = s.id) AS lists "
        "FROM einmal.subscribers s WHERE s.email_lower = 'ann@example.org'"
    )
    assert made is not None and made["lists"] == 0
    # no partition per message: they share einmal.sends_messages
    assert await conn.fetchval("SELECT count(*) FROM pg_inherits WHERE inhparent = 'einmal.sends'::regclass") == 2


async def test_fifty_posts_with_one_key_make_one_message(conn: asyncpg.Connection, dsn: str) -> None:
    _, key = await account_with_key(conn, dsn)
    answers: list[httpx.Response] = []
    body = {"to": "ann@example.org", "subject": "Reset", "text": "Your link.", "from": FROM}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(
            base_url=f"{base}/api/v1", headers={**auth(key), "Idempotency-Key": "reset-1"}, timeout=60
        ) as client,
    ):

        async def post() -> None:
            answers.append(await client.post("/messages", json=body))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(50):
                    group.start_soon(post)
    assert len(answers) == 50 and {a.status_code for a in answers} == {202}, {a.text for a in answers}
    assert len({a.json()["id"] for a in answers}) == 1
    assert len(await message_rows(conn)) == 1
    assert await conn.fetchval("SELECT count(*) FROM einmal.messages") == 1


async def test_the_route_itself_is_idempotent_under_fifty_at_once(conn: asyncpg.Connection, dsn: str) -> None:
    """Without the middleware's claim (as when a node died between it and its answer and the retry runs the route
    again): 50 sessions run `send` with one key at once; one message, one row, every one answers its id."""
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    made: list[messages.Made] = []

    async def send() -> None:
        session = await asyncpg.connect(dsn)
        try:
            made.append(
                await messages.send(
                    session,
                    queueing=Queueing.of(settings),
                    account_id=account_id,
                    to="ann@example.org",
                    subject="Reset",
                    body_text="Your link.",
                    from_address=FROM,
                    idempotency_key="reset-2",
                )
            )
        finally:
            await session.close()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(send)
    assert len(made) == 50 and len({m.id for m in made}) == 1
    assert sum(m.created for m in made) == 1
    assert len(await message_rows(conn)) == 1
    # another key is another message; the same key of another account too
    again = await messages.send(
        conn,
        queueing=Queueing.of(settings),
        account_id=account_id,
        to="ann@example.org",
        subject="R",
        body_text="x",
        from_address=FROM,
        idempotency_key="reset-3",
    )
    assert again.created and again.id != made[0].id
    # the same key of another account is another message of that account (message_by_key is per account)
    other_id, _ = await account_with_key(conn, dsn, "other")
    theirs = await messages.send(
        conn,
        queueing=Queueing.of(settings),
        account_id=other_id,
        to="ann@example.org",
        subject="Reset",
        body_text="Your link.",
        from_address=FROM,
        idempotency_key="reset-2",
    )
    assert theirs.created and theirs.id not in (made[0].id, again.id)
    assert await conn.fetchval("SELECT account_id FROM einmal.messages WHERE campaign_id = $1", theirs.id) == other_id


@pytest.mark.parametrize("hours", [30, 71])
async def test_one_window_and_one_comparison_for_a_message_key(conn: asyncpg.Connection, dsn: str, hours: int) -> None:
    """Aged `hours` (within EINMAL_MESSAGE_KEY_HOURS, 72): another body with the key is 422 and a true retry
    answers the first message; aged past the window, the key is forgotten everywhere and the request is new."""
    _, key = await account_with_key(conn, dsn)
    body = {"to": "ann@example.org", "subject": "Reset", "text": "Your link.", "from": FROM}
    other = {**body, "to": "bob@example.org"}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(
            base_url=f"{base}/api/v1", headers={**auth(key), "Idempotency-Key": "order-7"}, timeout=30
        ) as client,
    ):
        first = await client.post("/messages", json=body)
        assert first.status_code == 202, first.text

        async def age(by: float) -> None:
            await conn.execute(
                "UPDATE einmal.api_requests SET claimed_at = claimed_at - make_interval(hours => $1)", by
            )
            await conn.execute("UPDATE einmal.messages SET created_at = created_at - make_interval(hours => $1)", by)

        await age(hours)
        another = await client.post("/messages", json=other)
        assert another.status_code == 422, another.text
        retry = await client.post("/messages", json=body)
        assert (retry.status_code, retry.json()["id"]) == (202, first.json()["id"]), retry.text
        assert await conn.fetchval("SELECT count(*) FROM einmal.messages") == 1
        await age(73 - hours)  # past the window: forgotten by the API and, pruned, by the message
        await messages.prune_keys(conn, settings=Settings(database_url=dsn))
        anew = await client.post("/messages", json=other)
        assert anew.status_code == 202 and anew.json()["id"] != first.json()["id"], anew.text
