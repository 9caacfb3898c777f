"""Creations at once over /api/v1 (einmal serve on loopback, a real PostgreSQL): 24 steps on 8 sequences, 20
campaigns and 20 message templates posted together all answer 201; each step and campaign has its partition of
einmal.sends. A campaign's partition is attached as it is inserted, and two creators that each held their insert
while waiting for the other's attach used to deadlock (docs/design.md#retention). And one list PUT twenty times at
once is made once, the other nineteen finding it; steps added while members join and are erased deadlock
nobody."""

import anyio
import asyncpg
import httpx
import pytest

from tests.messages.support import FROM, account_with_key
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

SEQUENCES, STEPS, CAMPAIGNS, TEMPLATES = 8, 3, 20, 20


async def test_steps_campaigns_and_templates_created_at_once_all_succeed(conn: asyncpg.Connection, dsn: str) -> None:
    acme, key = await account_with_key(conn, dsn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", acme)
    answers: list[tuple[str, int, str]] = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=60, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        sequences = []
        for n in range(SEQUENCES):
            made = await client.post("/sequences", json={"name": f"drip {n}", "list": "news"})
            assert made.status_code == 201, made.text
            sequences.append(made.json()["id"])

        async def post(what: str, call) -> None:
            answer = await call
            answers.append((what, answer.status_code, answer.text))

        step = {"subject": "Hi", "from": FROM, "text": "Welcome!", "delay_seconds": 0}
        draft = {"subject": "Hello", "from": FROM, "text": "Hi", "lists": ["news"], "at": "2099-01-01T09:00:00Z"}
        template = {"subject": "Order", "text": "Thanks.", "from": FROM}
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for n in range(CAMPAIGNS):
                    tg.start_soon(post, "campaign", client.post("/campaigns", json={**draft, "name": f"c{n}"}))
                for sequence in sequences:
                    for _ in range(STEPS):
                        tg.start_soon(post, "step", client.post(f"/sequences/{sequence}/steps", json=step))
                for n in range(TEMPLATES):
                    tg.start_soon(post, "template", client.put(f"/message-templates/t{n}", json=template))
    refused = [a for a in answers if a[1] != 201]
    assert not refused, refused
    assert sorted(w for w, _, _ in answers) == sorted(
        ["campaign"] * CAMPAIGNS + ["step"] * SEQUENCES * STEPS + ["template"] * TEMPLATES
    )
    positions = await conn.fetch(
        "SELECT sequence_id, array_agg(step_position ORDER BY step_position) AS at FROM einmal.campaigns "
        "WHERE kind = 'step' GROUP BY sequence_id"
    )
    assert sorted(sequences) == sorted(r["sequence_id"] for r in positions)
    assert {tuple(r["at"]) for r in positions} == {(1, 2, 3)}
    unattached = await conn.fetchval(
        "SELECT count(*) FROM einmal.campaigns c WHERE c.kind IN ('campaign', 'step') "
        "AND to_regclass('einmal.sends_c' || c.id) IS NULL"
    )
    assert unattached == 0
    assert await conn.fetchval("SELECT count(*) FROM einmal.message_templates") == TEMPLATES


async def test_one_list_put_twenty_times_at_once_is_made_once_and_found_by_the_rest(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Each PUT's statement inserts the list or, on a conflict, reads it; one that waited on another's insert
    read with the snapshot of its start, saw nothing, and was answered 500."""
    _, key = await account_with_key(conn, dsn)
    answers: list[httpx.Response] = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=60, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):

        async def put() -> None:
            answers.append(await client.put("/lists/launch"))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(put)
    assert sorted(a.status_code for a in answers) == [200] * 19 + [201], [a.text for a in answers]
    assert {a.json()["id"] for a in answers} == {await conn.fetchval("SELECT id FROM einmal.lists")}


async def test_steps_added_while_members_join_and_are_erased_deadlock_nobody(
    conn: asyncpg.Connection, dsn: str
) -> None:
    """Ten rounds, each at once: two steps added to a sequence, and a subscriber of its list put on the list
    (joining the sequence), upserted and erased. A step's creation locked its sequence's row FOR UPDATE, which a
    member's join waits for (its foreign key's KEY SHARE), then waited for the subscribers' writers to let its
    partition attach: answers of each kind were 500 on a PostgreSQL deadlock, in every run."""
    acme, key = await account_with_key(conn, dsn)
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", acme)
    answers: list[httpx.Response] = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=60, base_url=f"{base}/api/v1", headers=auth(key)) as client,
    ):
        made = await client.post("/sequences", json={"name": "drip", "list": "news"})
        assert made.status_code == 201, made.text
        steps = f"/sequences/{made.json()['id']}/steps"
        step = {"subject": "Hi", "from": FROM, "text": "Welcome!", "delay_seconds": 3600}

        async def call(request) -> None:
            answers.append(await request)

        with anyio.fail_after(120):
            for n in range(10):
                address = f"member{n}@example.org"
                assert (await client.put(f"/subscribers/{address}", json={})).status_code == 201
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, client.post(steps, json=step))
                    tg.start_soon(call, client.post(steps, json=step))
                    tg.start_soon(call, client.put(f"/lists/news/members/{address}"))
                    tg.start_soon(call, client.put(f"/subscribers/{address}", json={"name": "N"}))
                    tg.start_soon(call, client.delete(f"/subscribers/{address}"))
    failed = [(a.request.method, a.request.url.path, a.status_code) for a in answers if a.status_code >= 500]
    assert not failed, failed
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns WHERE kind = 'step'") == 20
