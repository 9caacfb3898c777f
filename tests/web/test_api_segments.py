"""Segments over the API (einmal serve on loopback, a real PostgreSQL, httpx): made, listed, shown, changed,
deleted; counted and sampled as a campaign's build would take them; a rule that is not right is a 422 naming its
JSON path and writes nothing; another account's segment is 404 and its lists are none of the key's."""

import asyncpg
import httpx
import pytest

from tests.segments.helpers import seed
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

RULE = {
    "all": [
        {"attribute": "plan", "op": "eq", "value": "pro"},
        {"not": {"member": "churned"}},
        {"subscribed": {"after": "2026-01-01"}},
    ]
}


@pytest.fixture
async def keys(conn: asyncpg.Connection, dsn: str) -> dict[str, str]:
    await seed(conn, "acme")
    await seed(conn, "other")
    return {
        "acme": make_key(dsn, "acme"),
        "read": make_key(dsn, "acme", "--scope", "read"),
        "other": make_key(dsn, "other"),
    }


async def test_a_segment_is_made_counted_sampled_changed_and_deleted(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    acme = auth(keys["acme"])
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower) "
        "SELECT id, 'eve@example.org' FROM einmal.accounts WHERE name = 'acme'"
    )
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = await client.post("/segments", headers=acme, json={"name": "pro-new", "rule": RULE})
        assert made.status_code == 201, made.text
        assert (made.json()["name"], made.json()["rule"]) == ("pro-new", RULE)
        again = await client.post("/segments", headers=acme, json={"name": "pro-new", "rule": {"member": "news"}})
        assert again.status_code == 409 and again.json() == {
            "error": "the account has a segment named 'pro-new' already"
        }
        assert [s["name"] for s in (await client.get("/segments", headers=acme)).json()["segments"]] == ["pro-new"]
        assert (await client.get("/segments/pro-new", headers=acme)).json()["rule"] == RULE

        count = await client.get("/segments/pro-new/count", headers=acme)
        assert count.json() == {"name": "pro-new", "subscribers": 2, "suppressed": 1}
        sample = (await client.get("/segments/pro-new/sample", headers=acme, params={"limit": 1})).json()
        assert [(s["email"], s["suppressed"]) for s in sample["subscribers"]] == [("ann@example.org", False)]
        sample = (await client.get("/segments/pro-new/sample", headers=acme)).json()
        assert [(s["email"], s["suppressed"], s["attributes"]) for s in sample["subscribers"]] == [
            ("ann@example.org", False, {"plan": "pro", "age": 41, "tags": ["vip", "beta"]}),
            ("eve@example.org", True, {"plan": "pro"}),
        ]
        for limit in (0, 101, "x"):
            bad = await client.get("/segments/pro-new/sample", headers=acme, params={"limit": limit})
            assert bad.status_code == 422 and set(bad.json()) == {"error"}, limit

        changed = await client.put("/segments/pro-new", headers=acme, json={"rule": {"member": "churned"}})
        assert changed.status_code == 200 and changed.json()["rule"] == {"member": "churned"}
        assert (await client.get("/segments/pro-new/count", headers=acme)).json()["subscribers"] == 1
        assert (await client.delete("/segments/pro-new", headers=acme)).status_code == 204
        gone = await client.get("/segments/pro-new/count", headers=acme)
        assert gone.status_code == 404 and gone.json() == {"error": "no such segment"}


async def test_a_rule_that_is_not_right_is_a_422_naming_its_path_and_writes_nothing(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    acme = auth(keys["acme"])
    refused = {
        "bad op": (
            {"all": [{"attribute": "plan", "op": "like", "value": "p%"}]},
            "rule $.all[0].op: unknown op 'like'",
        ),
        "unknown key": ({"any": [{"member": "news", "since": 3}]}, "rule $.any[0]: one key of"),
        "too deep": (
            {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"member": "news"}}}}}}}}},
            "rule $.not.not.not.not.not.not.not.not: conditions nested deeper than 8",
        ),
        "no such list": ({"member": "nope"}, "rule $.member: the account has no list named 'nope'"),
        "opens": ({"opened": {"last": 3}}, "rule $.opened: einmal records no opens yet"),
    }
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        for what, (rule, said) in refused.items():
            answer = await client.post("/segments", headers=acme, json={"name": "x", "rule": rule})
            assert answer.status_code == 422 and answer.json()["error"].startswith(said), (what, answer.text)
        not_an_object = await client.post("/segments", headers=acme, json={"name": "x", "rule": [1]})
        assert not_an_object.status_code == 422 and set(not_an_object.json()) == {"error"}
        await client.post("/segments", headers=acme, json={"name": "x", "rule": {"member": "news"}})
        bad_change = await client.put("/segments/x", headers=acme, json={"rule": {"attribute": "a", "op": "gt"}})
        assert bad_change.status_code == 422 and bad_change.json() == {"error": "rule $: gt needs a value"}
    assert [tuple(r) for r in await conn.fetch("SELECT name, rule::text FROM einmal.segments")] == [
        ("x", '{"member": "news"}')
    ]


async def test_another_accounts_segment_is_not_found_and_a_read_key_writes_none(
    conn: asyncpg.Connection, dsn: str, keys: dict[str, str]
) -> None:
    acme, other, read = auth(keys["acme"]), auth(keys["other"]), auth(keys["read"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        assert (
            await client.post("/segments", headers=acme, json={"name": "mine", "rule": {"member": "news"}})
        ).status_code == 201
        for method, path in (
            ("GET", "/segments/mine"),
            ("GET", "/segments/mine/count"),
            ("GET", "/segments/mine/sample"),
            ("PUT", "/segments/mine"),
            ("DELETE", "/segments/mine"),
        ):
            body = {"rule": {"member": "news"}} if method == "PUT" else None
            answer = await client.request(method, path, headers=other, json=body)
            assert answer.status_code == 404 and answer.json() == {"error": "no such segment"}, (method, path)
        assert (await client.get("/segments", headers=other)).json() == {"segments": []}
        # the same name in the other account is its own, counting its own subscribers only
        theirs = await client.post("/segments", headers=other, json={"name": "mine", "rule": {"member": "churned"}})
        assert theirs.status_code == 201
        assert (await client.get("/segments/mine/count", headers=acme)).json()["subscribers"] == 5
        assert (await client.get("/segments/mine/count", headers=other)).json()["subscribers"] == 1
        assert (await client.get("/segments/mine/count", headers=read)).status_code == 200
        for method in ("POST", "PUT", "DELETE"):
            path = "/segments" if method == "POST" else "/segments/mine"
            body = {"name": "r", "rule": {"member": "news"}} if method == "POST" else {"rule": {"member": "news"}}
            assert (await client.request(method, path, headers=read, json=body)).status_code == 403, method
    assert await conn.fetchval("SELECT count(*) FROM einmal.segments") == 2
