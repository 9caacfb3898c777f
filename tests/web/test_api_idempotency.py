"""Idempotency-Key on the API's POSTs over real HTTP and a real PostgreSQL: a repeat returns the first
answer without a second effect, 50 at once make one campaign, another body under the same key is 422 (the
same JSON written otherwise is the same body), a request without a valid key claims nothing, and a claim
left unanswered is taken over by the same request only."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service.api import idempotency
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
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "order-1"}
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post("/campaigns", headers=headers, json=DRAFT)
        again = await client.post("/campaigns", headers=headers, json=DRAFT)
        other_body = await client.post("/campaigns", headers=headers, json={**DRAFT, "name": "Autumn"})
        other_key = await client.post(
            "/campaigns", headers={**auth(keys["other"]), "Idempotency-Key": "order-1"}, json=DRAFT
        )
        unkeyed = await client.post("/campaigns", headers=auth(keys["acme"]), json=DRAFT)
        bad = await client.post("/campaigns", headers={**auth(keys["acme"]), "Idempotency-Key": "x" * 201}, json=DRAFT)
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
    counts = await conn.fetch(
        "SELECT a.name, count(*) FROM einmal.campaigns c JOIN einmal.accounts a "
        "ON a.id = c.account_id GROUP BY 1 ORDER BY 1"
    )
    assert [tuple(r) for r in counts] == [("acme", 2), ("other", 1)]


async def test_fifty_identical_posts_at_once_make_one_campaign_and_one_answer(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "burst"}
    answers = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", limits=httpx.Limits(max_connections=50)) as client,
    ):

        async def post() -> None:
            answers.append(await client.post("/campaigns", headers=headers, json=DRAFT, timeout=30))

        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(post)
    assert [a.status_code for a in answers] == [201] * 50, {a.status_code: a.text for a in answers}
    assert len({a.content for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 49
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 1


async def inserted_claims(conn: asyncpg.Connection, at_least: int) -> int:
    """Rows ever inserted into einmal.api_requests (its statistics, flushed when the server's connections
    have closed), once they count `at_least` (10 s at most)."""
    for _ in range(100):
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        inserted = await conn.fetchval(
            "SELECT n_tup_ins FROM pg_stat_user_tables WHERE schemaname = 'einmal' AND relname = 'api_requests'"
        )
        if inserted >= at_least:
            return inserted
        await anyio.sleep(0.1)
    return inserted


async def test_a_request_without_a_valid_key_claims_no_idempotency_key(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    statuses = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", limits=httpx.Limits(max_connections=20)) as client,
    ):

        async def post(headers: dict[str, str], n: int) -> None:
            answer = await client.post("/campaigns", headers={**headers, "Idempotency-Key": f"k{n}"}, json=DRAFT)
            statuses.append(answer.status_code)

        async with anyio.create_task_group() as tg:
            for n in range(200):
                tg.start_soon(post, {}, n)
            for n in range(10):  # a key that is not valid, fewer times than a network may fail
                tg.start_soon(post, auth("einmal_" + "x" * 43), n)
        keyed = await client.post("/campaigns", headers={**auth(keys["acme"]), "Idempotency-Key": "real"}, json=DRAFT)
    assert sorted(statuses) == [401] * 210 and keyed.status_code == 201
    assert await inserted_claims(conn, 1) == 1  # before: 211, each claim inserted and then deleted


async def test_the_same_json_written_otherwise_is_the_same_request(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "order-2", "Content-Type": "application/json"}
    written = json.dumps(DRAFT)
    otherwise = [
        "{\n  " + json.dumps(dict(reversed(DRAFT.items())))[1:-1] + "\n}\n",
        written + "\n",
        json.dumps(DRAFT, indent=4),
    ]
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post("/campaigns", headers=headers, content=written)
        again = [await client.post("/campaigns", headers=headers, content=body) for body in otherwise]
        other = await client.post("/campaigns", headers=headers, content=json.dumps({**DRAFT, "text": "Hi!"}))
        not_json = [
            await client.post("/campaigns", headers={**headers, "Idempotency-Key": "raw"}, content=body)
            for body in (b"{nope", b"{nope ")
        ]
    assert first.status_code == 201
    assert [(a.status_code, a.headers.get("idempotent-replayed")) for a in again] == [(201, "true")] * 3, [
        a.text for a in again
    ]  # before: 422, "another request"
    assert all(a.content == first.content for a in again)
    assert other.status_code == 422
    assert [a.status_code for a in not_json] == [422, 422]  # a body that is not JSON is compared as bytes:
    assert "another request" in not_json[1].json()["error"] and "another" not in not_json[0].json()["error"]
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 1


async def test_a_claim_left_unanswered_is_taken_over_by_the_same_request_only(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    headers = {**auth(keys["acme"]), "Idempotency-Key": "crashed"}
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.post("/campaigns", headers=headers, json=DRAFT)
        with anyio.fail_after(10):  # its answer is stored just after it is sent
            while await conn.fetchval("SELECT status FROM einmal.api_requests") is None:
                await anyio.sleep(0.01)
        # as if the node had died while running it: the claim without an answer, past the takeover's wait
        await conn.execute(
            "UPDATE einmal.api_requests SET status = NULL, content_type = NULL, body = NULL, "
            "claimed_at = now() - make_interval(secs => $1)",
            idempotency.TAKEOVER_SECONDS + 60,
        )
        another = await client.post("/campaigns", headers=headers, json={**DRAFT, "name": "Autumn"})
        same = await client.post("/campaigns", headers=headers, json=DRAFT)
    assert first.status_code == 201
    assert another.status_code == 422, another.text  # not run: another body never takes a claim over
    assert same.status_code == 201 and "idempotent-replayed" not in same.headers  # the retry runs again
    names = await conn.fetch("SELECT name FROM einmal.campaigns ORDER BY id")
    assert [r["name"] for r in names] == ["Spring", "Spring"]  # a second draft, as documented; no Autumn
