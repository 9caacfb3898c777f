"""The JSON API under /api/v1 over real HTTP (einmal serve on loopback) against a real PostgreSQL: keys made
by the real command line, each request acting for its key's account alone, the generated OpenAPI document,
and bad input answered without a traceback or a write."""

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

ALICE = "Alice@Example.org"


def make_key(dsn: str, account: str, *options: str) -> str:
    done = einmal("account", "key", "create", "--account", account, *options, dsn=dsn)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
async def two_accounts(conn: asyncpg.Connection, dsn: str) -> dict[str, str]:
    """Accounts acme and other, each with one subscriber (alice in acme, bob in other), and a key each."""
    for account, email in (("acme", ALICE), ("other", "bob@example.net")):
        account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", account)
        await conn.execute("INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes) "
                           "VALUES ($1, $2, lower($2), '{\"city\": \"Köln\"}')", account_id, email)
    return {"acme": make_key(dsn, "acme"), "other": make_key(dsn, "other"),
            "acme-read": make_key(dsn, "acme", "--scope", "read", "--name", "reports")}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_key_is_printed_once_alone_and_only_its_hash_is_kept(
        conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]) -> None:
    key = two_accounts["acme"]
    assert key.startswith("einmal_") and len(key) == 50 and "\n" not in key
    stored = await conn.fetch("SELECT prefix, hash FROM einmal.api_keys")
    assert len(stored) == 3 and all(key not in (r["prefix"], bytes(r["hash"]).hex()) for r in stored)
    assert key[:13] in {r["prefix"] for r in stored}
    listed = einmal("account", "key", "list", "--account", "acme", dsn=dsn)
    assert listed.returncode == 0 and key not in listed.stdout
    assert "reports" in listed.stdout and "\tread\t" in listed.stdout
    unknown = einmal("account", "key", "create", "--account", "nosuch", dsn=dsn)
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.strip() == "einmal: no account named 'nosuch'", unknown.stderr


async def test_without_a_valid_key_every_route_is_401_and_a_revoked_key_is_refused(
        dsn: str, two_accounts: dict[str, str]) -> None:
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for headers in ({}, auth("einmal_" + "x" * 43), auth("not-ours"), {"Authorization": "Basic eDp4"}):
            for method, path in (("GET", "/subscribers"), ("GET", f"/subscribers/{ALICE}"),
                                 ("PUT", f"/subscribers/{ALICE}"), ("DELETE", f"/subscribers/{ALICE}")):
                answer = await client.request(method, path, headers=headers, json={})
                assert answer.status_code == 401, (method, path, headers, answer.text)
                assert answer.headers["www-authenticate"] == "Bearer"
        key = two_accounts["acme"]
        assert (await client.get("/subscribers", headers=auth(key))).status_code == 200
        [key_id] = [line.split("\t")[0] for line in einmal("account", "key", "list", "--account", "acme",
                                                             dsn=dsn).stdout.splitlines()
                    if line.endswith("\t") and "\twrite\t" in line]
        assert einmal("account", "key", "revoke", "--account", "acme", key_id, dsn=dsn).returncode == 0
        assert (await client.get("/subscribers", headers=auth(key))).status_code == 401
        again = einmal("account", "key", "revoke", "--account", "acme", key_id, dsn=dsn)
        assert again.returncode == 1 and "no key" in again.stderr


async def test_a_key_sees_and_changes_its_own_account_alone(
        conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]) -> None:
    other = auth(two_accounts["other"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        listing = (await client.get("/subscribers", headers=other)).json()
        assert [s["email"] for s in listing["subscribers"]] == ["bob@example.net"]
        for method, body in (("GET", None), ("DELETE", None)):
            answer = await client.request(method, f"/subscribers/{ALICE}", headers=other, json=body)
            assert (answer.status_code, answer.json()) == (404, {"error": "no such subscriber"}), method
        # a PUT of acme's address by other's key makes other's own subscriber, never touches acme's
        made = await client.put(f"/subscribers/{ALICE}", headers=other, json={"name": "Not Alice"})
        assert made.status_code == 201
    rows = await conn.fetch("SELECT a.name, s.email, s.name AS who, s.status FROM einmal.subscribers s "
                            "JOIN einmal.accounts a ON a.id = s.account_id ORDER BY s.id")
    assert [tuple(r) for r in rows] == [("acme", ALICE, "", "confirmed"), ("other", "bob@example.net", "", "confirmed"),
                                        ("other", ALICE, "Not Alice", "confirmed")]


async def test_put_creates_then_updates_one_subscriber_per_mailbox_and_get_finds_any_spelling(
        conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        updated = await client.put("/subscribers/ALICE@example.ORG", headers=key,
                                   json={"name": "Alice", "attributes": {"plan": "pro"}})
        assert updated.status_code == 200, updated.text
        body = updated.json()
        assert (body["email"], body["name"], body["attributes"]) == (ALICE, "Alice", {"city": "Köln", "plan": "pro"})
        created = await client.put("/subscribers/carol@bücher.example", headers=key, json={})
        assert created.status_code == 201 and created.json()["attributes"] == {}
        found = await client.get("/subscribers/carol@xn--bcher-kva.example", headers=key)
        assert found.status_code == 200 and found.json()["email"] == "carol@bücher.example"
        first = (await client.get("/subscribers", headers=key, params={"limit": 1})).json()
        second = (await client.get("/subscribers", headers=key, params={"limit": 1, "cursor": first["next"]})).json()
        assert [s["email"] for s in first["subscribers"] + second["subscribers"]] == [ALICE, "carol@bücher.example"]
        assert second["next"] is None
        read_only = await client.put("/subscribers/dave@example.org", headers=auth(two_accounts["acme-read"]),
                                     json={})
        assert read_only.status_code == 403
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email_lower LIKE 'dave%'") == 0


async def test_delete_erases_as_the_command_line_does(conn: asyncpg.Connection, dsn: str,
                                                       two_accounts: dict[str, str]) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        assert (await client.delete("/subscribers/alice@example.org", headers=key)).status_code == 204
        assert (await client.get(f"/subscribers/{ALICE}", headers=key)).status_code == 404
        assert (await client.delete(f"/subscribers/{ALICE}", headers=key)).status_code == 404
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "erased"
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email = $1", ALICE) == 0


async def test_bad_input_is_a_4xx_with_nothing_written(conn: asyncpg.Connection, dsn: str,
                                                      two_accounts: dict[str, str]) -> None:
    key = auth(two_accounts["acme"])
    before = await conn.fetchval("SELECT count(*) FROM einmal.subscribers")
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        cases = {
            "not an address": (client.put("/subscribers/nobody", headers=key, json={}), 422),
            "unknown field": (client.put("/subscribers/e@example.org", headers=key, json={"status": "x"}), 422),
            "not JSON": (client.put("/subscribers/e@example.org", content=b"{",
                                    headers={**key, "content-type": "application/json"}), 422),
            "body over 64 KiB": (client.put("/subscribers/e@example.org", headers=key,
                                            json={"name": "x" * 70_000}), 413),
            "bad cursor": (client.get("/subscribers", headers=key, params={"cursor": "-1"}), 422),
            "limit too high": (client.get("/subscribers", headers=key, params={"limit": 501}), 422),
            "control characters": (client.put("/subscribers/e@example.org", headers=key,
                                              json={"name": "a\x00b"}), 422),
        }
        for what, (request, status) in cases.items():
            answer = await request
            assert answer.status_code == status, (what, answer.text)
            assert answer.headers["content-type"] == "application/json", what
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers") == before


async def test_the_openapi_document_is_generated_from_the_models(dsn: str) -> None:
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        answer = await client.get(f"{base}/api/v1/openapi.json")
    assert answer.status_code == 200
    document = answer.json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {"/subscribers", "/subscribers/{email}"}
    assert set(document["paths"]["/subscribers/{email}"]) == {"get", "put", "delete"}
    assert {"Subscriber", "SubscriberPage", "SubscriberFields", "Problem"} <= set(document["components"]["schemas"])
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
