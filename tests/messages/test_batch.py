"""POST /api/v1/messages/batch (einmal serve on loopback, a real PostgreSQL) and its function
(service/messages/batch.py): each item's outcome in order, the invalid ones with their reason and the valid ones
made; a template read and compiled once a batch; the bounds (items and bytes); another account's templates not
usable; a replay under the Idempotency-Key and a retry of the route itself (after its messages committed, after
only some of them did, and two at once) making nothing twice; a batch's messages sent by a real node to a
real SMTP server on loopback, each once; and the guide's example run as written, answering what it shows."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service.mail import render
from service.messages import batch, messages
from service.settings import Settings
from tests.messages.support import FROM, account_with_key, message_rows
from tests.messages.test_sending import settled
from tests.support import doc_examples
from tests.support.pipeline import node_settings, running_node
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

RECEIPT = {"subject": "Order {{ attributes.order }}", "text": "Thanks for {{ attributes.order }}.", "from": FROM}


def _item(to: str, **fields) -> batch.Item:
    return batch.Item(to=to, subject="Reset", body_text="Your link for {{ email }}.", from_address=FROM, **fields)


async def test_each_item_has_its_outcome_in_order(conn: asyncpg.Connection, dsn: str) -> None:
    account_id, key = await account_with_key(conn, dsn)
    await conn.execute("INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'example.com')", account_id)
    items = [
        {"to": "ann@example.org", "template": "receipt", "data": {"order": "A-1"}},
        {"to": "not an address", "template": "receipt"},
        {"to": "bob@example.org", "subject": "Reset", "text": "Your link.", "from": FROM, "honour_unsubscribe": True},
        {"to": "cy@example.org", "template": "nope"},
        {"to": "di@example.org", "template": "receipt", "subject": "x"},
        {"to": "ed@example.org", "subject": "x", "text": "y"},
        {"to": "fay@example.org", "subject": "x", "text": "y", "from": "Other <a@other.example>"},
        {"to": "gus@example.org", "subject": "x", "text": "{{ oops(", "from": FROM},
        {"to": "hal@example.org", "template": "receipt", "data": {"order": "x" * (messages.MAX_DATA + 1)}},
        {"to": "Ann@Example.org", "template": "receipt", "data": {"order": "A-2"}},  # ann again: a second message
    ]
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        assert (await client.put("/message-templates/receipt", json=RECEIPT)).status_code == 201
        answer = await client.post("/messages/batch", json={"messages": items})
        assert answer.status_code == 202, answer.text
        body = answer.json()
        told = [(m["outcome"], m["reason"]) for m in body["messages"]]
        assert told == [
            ("queued", None),
            ("invalid", "to: not an email address: An email address must have an @-sign."),
            ("queued", None),
            ("invalid", "template: no such message template"),
            ("invalid", "give a template or subject and text, not both"),
            ("invalid", "from: none given, and the template has none"),
            (
                "invalid",
                "from 'Other <a@other.example>': the account sends only from its domains (example.com): "
                "add the domain first (`einmal account domain add`)",
            ),
            ("invalid", told[7][1]),
            ("invalid", f"data: longer than {messages.MAX_DATA} characters as JSON"),
            ("queued", None),
        ], told
        assert told[7][1] and "\n" not in told[7][1] and len(told[7][1]) < 300, told[7]
        assert (body["queued"], body["invalid"]) == (3, 7)
        ids = [m["id"] for m in body["messages"]]
        assert all(m["created"] for m in body["messages"] if m["outcome"] == "queued")
        assert all(ids[i] is None for i in range(len(ids)) if told[i][0] == "invalid")
        ann = (await client.get(f"/messages/{ids[0]}")).json()
        bob = (await client.get(f"/messages/{ids[2]}")).json()
        again = (await client.get(f"/messages/{ids[9]}")).json()
    assert (ann["email"], ann["subject"], ann["template"], ann["data"]) == (
        "ann@example.org",
        RECEIPT["subject"],
        "receipt",
        {"order": "A-1"},
    )
    assert (bob["template"], bob["honour_unsubscribe"]) == (None, True)
    assert again["data"] == {"order": "A-2"}
    assert [r["email"] for r in await message_rows(conn)] == ["ann@example.org", "bob@example.org", "Ann@Example.org"]


async def test_a_template_is_compiled_once_a_batch(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    await messages.put_template(
        conn,
        settings=settings,
        account_id=account_id,
        name="receipt",
        subject=RECEIPT["subject"],
        body_text=RECEIPT["text"],
        body_html=None,
        from_address=FROM,
    )
    messages._tried.clear()  # as after a restart: put_template's trial render is not this process's
    compiled: list[str] = []
    compile_ = render.CampaignTemplate.compile

    def counted(campaign, settings):
        compiled.append(campaign["subject"])
        return compile_(campaign, settings)

    monkeypatch.setattr(render.CampaignTemplate, "compile", staticmethod(counted))
    items = [batch.Item(to=f"r{i}@example.org", template_name="receipt", data={"order": str(i)}) for i in range(40)]
    items += [_item(f"s{i}@example.org") for i in range(40)]
    outcomes = await batch.send(conn, settings=settings, account_id=account_id, items=items)
    assert [o.outcome for o in outcomes] == ["queued"] * 80
    assert sorted(compiled) == sorted([RECEIPT["subject"], "Reset"])  # two distinct sources: two compiles
    assert len({o.id for o in outcomes}) == 80
    assert len(await message_rows(conn)) == 80


async def test_the_bounds_of_a_batch(conn: asyncpg.Connection, dsn: str) -> None:
    _, key = await account_with_key(conn, dsn)
    one = {"to": "a@example.org", "subject": "s", "text": "t", "from": FROM}
    too_many = {"messages": [one] * (batch.MAX_MESSAGES + 1)}
    too_big = {"messages": [{**one, "text": "t" * (batch.MAX_BODY // 50)}] * 60}
    full = {"messages": [{**one, "to": f"r{i}@example.org", "text": "t" * 9000} for i in range(batch.MAX_MESSAGES)]}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", headers=auth(key), timeout=60) as client,
    ):
        many = await client.post("/messages/batch", json=too_many)
        big = await client.post("/messages/batch", json=too_big)
        empty = await client.post("/messages/batch", json={"messages": []})
        shapeless = await client.post("/messages/batch", json={"messages": [{"template": "x"}]})
        assert not await message_rows(conn)
        fits = await client.post("/messages/batch", json=full)
    assert many.status_code == 422 and str(batch.MAX_MESSAGES) in many.json()["error"], many.text
    assert big.status_code == 413, big.text
    assert empty.status_code == 422 and shapeless.status_code == 422, (empty.text, shapeless.text)
    assert fits.status_code == 202 and fits.json()["queued"] == batch.MAX_MESSAGES, fits.text[:300]
    assert len(await message_rows(conn)) == batch.MAX_MESSAGES


async def test_another_accounts_template_is_not_usable(conn: asyncpg.Connection, dsn: str) -> None:
    _, other = await account_with_key(conn, dsn, "other")
    _, key = await account_with_key(conn, dsn)
    async with http_server(dsn) as base, httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1") as client:
        assert (await client.put("/message-templates/receipt", headers=auth(key), json=RECEIPT)).status_code == 201
        answer = await client.post(
            "/messages/batch",
            headers=auth(other),
            json={"messages": [{"to": "ann@example.org", "template": "receipt", "data": {"order": "A-1"}}]},
        )
    assert answer.status_code == 202, answer.text
    assert answer.json()["messages"] == [
        {"outcome": "invalid", "id": None, "created": False, "reason": "template: no such message template"}
    ]
    assert not await message_rows(conn)


async def test_a_replay_under_the_idempotency_key_makes_nothing_new(conn: asyncpg.Connection, dsn: str) -> None:
    _, key = await account_with_key(conn, dsn)
    body = {
        "messages": [
            {"to": "ann@example.org", "subject": "s", "text": "t", "from": FROM},
            {"to": "bad", "subject": "s", "text": "t", "from": FROM},
            {"to": "bob@example.org", "subject": "s", "text": "t", "from": FROM},
        ]
    }
    headers = {**auth(key), "Idempotency-Key": "orders-17"}
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=headers) as client,
    ):
        first = await client.post("/messages/batch", json=body)
        again = await client.post("/messages/batch", json=body)
        other = await client.post("/messages/batch", json={"messages": body["messages"][:1]})
    assert first.status_code == again.status_code == 202, (first.text, again.text)
    assert again.json() == first.json() and again.headers.get("Idempotent-Replayed") == "true", again.headers
    assert other.status_code == 422, other.text
    assert len(await message_rows(conn)) == 2
    keys = await conn.fetch("SELECT idempotency_key FROM einmal.messages ORDER BY campaign_id")
    assert [r["idempotency_key"] for r in keys] == ["orders-17:0", "orders-17:2"]


async def test_a_retry_of_the_route_itself_makes_each_message_once(conn: asyncpg.Connection, dsn: str) -> None:
    """What a retry runs when a node died between the items' commits and the answer (the middleware's claim
    expired with it): the function again, under the same key. Once after all the items committed, once after only
    the first two did (a batch of its first two items), and twice at once on two connections."""
    account_id, _ = await account_with_key(conn, dsn)
    settings = Settings(database_url=dsn)
    items = [_item(f"r{i}@example.org") for i in range(6)]
    first = await batch.send(conn, settings=settings, account_id=account_id, items=items, idempotency_key="k1")
    retry = await batch.send(conn, settings=settings, account_id=account_id, items=items, idempotency_key="k1")
    assert [o.created for o in first] == [True] * 6 and [o.created for o in retry] == [False] * 6
    assert [o.id for o in retry] == [o.id for o in first]
    assert len(await message_rows(conn)) == 6

    died = await batch.send(conn, settings=settings, account_id=account_id, items=items[:2], idempotency_key="k2")
    rest = await batch.send(conn, settings=settings, account_id=account_id, items=items, idempotency_key="k2")
    assert [o.created for o in rest] == [False, False, True, True, True, True]
    assert [o.id for o in rest[:2]] == [o.id for o in died]
    assert len(await message_rows(conn)) == 12

    answers: list[list[batch.Outcome]] = []

    async def run() -> None:
        other = await asyncpg.connect(dsn)
        try:
            answers.append(
                await batch.send(other, settings=settings, account_id=account_id, items=items, idempotency_key="k3")
            )
        finally:
            await other.close()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            group.start_soon(run)
    assert len(answers) == 2 and [o.id for o in answers[0]] == [o.id for o in answers[1]]
    assert sorted(o.created for a in answers for o in a) == [False] * 6 + [True] * 6
    assert len(await message_rows(conn)) == 18
    assert await conn.fetchval("SELECT count(DISTINCT idempotency_key) FROM einmal.messages") == 18


async def test_a_batchs_messages_are_sent_by_a_node_each_once(conn: asyncpg.Connection, dsn: str, smtp_server) -> None:
    account_id, key = await account_with_key(conn, dsn)
    settings = node_settings(dsn, smtp_server.port)
    items = [
        {"to": f"r{i}@example.org", "subject": "Code {{ attributes.code }}", "text": "Yours.", "from": FROM}
        | {"data": {"code": str(i)}}
        for i in range(20)
    ]
    items.insert(7, {"to": "broken", "subject": "s", "text": "t", "from": FROM})
    async with (
        running_node(settings),
        http_server(dsn) as base,
        httpx.AsyncClient(
            timeout=30, base_url=f"{base}/api/v1", headers={**auth(key), "Idempotency-Key": "codes"}
        ) as client,
    ):
        answer = await client.post("/messages/batch", json={"messages": items})
        assert answer.status_code == 202 and answer.json()["queued"] == 20, answer.text
        rows = await settled(conn, 20)
        # the route run again under the key (as after a node died before its answer): nothing new is sent
        again = await batch.send(
            conn,
            settings=settings,
            account_id=account_id,
            items=[batch.Item(to="r0@example.org", subject="x", body_text="y", from_address=FROM)],
            idempotency_key="codes",
        )
        assert again[0].id == answer.json()["messages"][0]["id"] and not again[0].created
        await anyio.sleep(1)  # a tick or two of the node: time for a second send, were there one
    assert [r["status"] for r in rows] == ["sent"] * 20
    got = sorted(m.rcpt_tos[0] for m in smtp_server.messages)
    assert got == sorted(f"r{i}@example.org" for i in range(20)), got
    by_to = {m.rcpt_tos[0]: m for m in smtp_server.messages}
    assert b"Subject: Code 13" in by_to["r13@example.org"].data


async def test_the_guide_example_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    heading = "## Many messages in one call {#batch}"
    _, key = await account_with_key(conn, dsn)
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=auth(key)) as client:
            receipt = {**RECEIPT, "from": "Acme Shop <shop@example.org>"}
            assert (await client.put("/message-templates/receipt", json=receipt)).status_code == 201
        block = doc_examples.example("guide/messages.md", "bash", heading)
        # KEY and API as the page's first block set them
        code, out, err = await doc_examples.run(f"KEY={key}\nAPI=${{API_URL:-}}\n{block}", dsn, base)
    assert code == 0, err
    shown = json.loads(doc_examples.example("guide/messages.md", "json", heading))
    got = json.loads(out)
    rows = await message_rows(conn)
    assert [m["id"] for m in got["messages"]] == [rows[0]["campaign_id"], None, rows[1]["campaign_id"]]
    for m in shown["messages"] + got["messages"]:
        m["id"] = m["id"] is not None
    assert got == shown, out
    assert [r["email"] for r in rows] == ["ada@example.org", "cy@example.org"]


async def test_the_batch_path_is_no_message_id(conn: asyncpg.Connection, dsn: str) -> None:
    """GET /messages/batch is a method the batch does not take (405), not a message whose id is not a number
    (before: 422 from GET /messages/{message_id}, found by the API fuzz)."""
    _, key = await account_with_key(conn, dsn)
    async with http_server(dsn) as base, httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1") as client:
        answer = await client.get("/messages/batch", headers=auth(key))
    assert answer.status_code == 405, answer.text


async def test_a_body_that_is_no_batch_is_answered_as_fastapi_answers_and_makes_nothing(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """The route reads its body itself, in a worker thread (service/api/deps.py body_as): each odd body gets
    the answer FastAPI gives a body of the MessageBatch model, word for word, and nothing is made."""
    _, key = await account_with_key(conn, dsn)
    json_type = {"content-type": "application/json"}
    one = {"to": "a@example.org", "subject": "s", "text": "t", "from": FROM}
    cases = [
        (b"{not json", json_type, 422, "body.1: JSON decode error"),
        (b"", json_type, 422, "body: Field required"),
        ('{"messages": [{"to": "\xe9"}]}'.encode("latin-1"), json_type, 400, "There was an error parsing the body"),
        (json.dumps({"messages": [one]}).encode(), {"content-type": "text/plain"}, 422, None),
        (json.dumps({"messages": [{**one, "x": 1}]}).encode(), json_type, 422, "body.messages.0.x: Extra inputs"),
        (json.dumps({"messages": [{**one, "to": 42}]}).encode(), json_type, 422, "body.messages.0.to: Input should"),
        (json.dumps({"messages": [{**one, "from": "x" * 600}]}).encode(), json_type, 422, "body.messages.0.from: "),
    ]
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", headers=auth(key), timeout=60) as client,
    ):
        for body, headers, status, error in cases:
            answer = await client.post("/messages/batch", headers=headers, content=body)
            assert answer.status_code == status, (body[:60], answer.text)
            assert error is None or answer.json()["error"].startswith(error), (body[:60], answer.text)
        document = (await client.get("/openapi.json")).json()
    assert not await message_rows(conn)
    operation = document["paths"]["/messages/batch"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/MessageBatch"}, operation
    assert "messages" in document["components"]["schemas"]["MessageBatch"]["properties"]
