"""Idempotency-Key on the API's POSTs over real HTTP and a real PostgreSQL: a repeat returns the first
answer without a second effect, 50 at once make one campaign, another body under the same key is 422."""

import anyio
import asyncpg
import httpx
import pytest

from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

DRAFT = {"name": "Spring", "subject": "Hello", "from": "news@example.com", "text": "Hi"}


@pytest.fixture
async def keys(conn: asyncpg.Connection, dsn: str) -> dict[str, str]:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme'), ('other')")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) SELECT id, 'default' FROM einmal.accounts")
    return {"acme": make_key(dsn, "acme"), "other": make_key(dsn, "other")}


async def test_a_repeat_returns_the_first_answer_without_a_second_effect(
        conn: asyncpg.Connection, dsn: str, keys: dict[str, str]) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "order-1"}
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post("/campaigns", headers=headers, json=DRAFT)
        again = await client.post("/campaigns", headers=headers, json=DRAFT)
        other_body = await client.post("/campaigns", headers=headers, json={**DRAFT, "name": "Autumn"})
        other_key = await client.post("/campaigns", headers={**auth(keys["other"]), "Idempotency-Key": "order-1"},
                                      json=DRAFT)
        unkeyed = await client.post("/campaigns", headers=auth(keys["acme"]), json=DRAFT)
        bad = await client.post("/campaigns", headers={**auth(keys["acme"]), "Idempotency-Key": "x" * 201},
                                json=DRAFT)
        approve = {**auth(keys["acme"]), "Idempotency-Key": "approve-1"}
        url = f"/campaigns/{first.json()['id']}/approve"
        approved, approved_again = [await client.post(url, headers=approve) for _ in range(2)]
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert other_body.status_code == 422 and "another request" in other_body.json()["error"]
    assert other_key.status_code == 201 and other_key.json()["id"] != first.json()["id"]
    assert unkeyed.status_code == 201 and bad.status_code == 400
    assert (approved.status_code, approved_again.status_code) == (200, 200), approved_again.text  # not 409
    assert approved_again.content == approved.content
    counts = await conn.fetch("SELECT a.name, count(*) FROM einmal.campaigns c JOIN einmal.accounts a "
                              "ON a.id = c.account_id GROUP BY 1 ORDER BY 1")
    assert [tuple(r) for r in counts] == [("acme", 2), ("other", 1)]


async def test_fifty_identical_posts_at_once_make_one_campaign_and_one_answer(
        conn: asyncpg.Connection, dsn: str, keys: dict[str, str]) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "burst"}
    answers = []
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1",
                                                          limits=httpx.Limits(max_connections=50)) as client:
        async def post() -> None:
            answers.append(await client.post("/campaigns", headers=headers, json=DRAFT, timeout=30))

        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(post)
    assert [a.status_code for a in answers] == [201] * 50, {a.status_code: a.text for a in answers}
    assert len({a.content for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 49
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 1
