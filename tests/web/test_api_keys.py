"""The account's keys over /api/v1/keys (einmal serve on loopback, a real PostgreSQL): a write key lists,
creates (the key in that answer only, never stored) and revokes its own account's keys; a read key only
lists; another account's keys are 404."""

import asyncpg
import httpx
import pytest

from service.api import keys
from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio


async def test_a_write_key_creates_lists_and_revokes_its_account_s_keys(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme'), ('other')")
    write, read, other = make_key(dsn, "acme"), make_key(dsn, "acme", "--scope", "read"), make_key(dsn, "other")
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = await client.post("/keys", headers={**auth(write), "Idempotency-Key": "k1"},
                                 json={"name": "reports", "scope": "read"})
        assert made.status_code == 201, made.text
        new = made.json()
        assert (new["name"], new["scope"], new["revoked_at"]) == ("reports", "read", None)
        assert new["key"].startswith("einmal_") and new["prefix"] == new["key"][:keys.PREFIX]
        assert made.headers["cache-control"] == "no-store"
        replayed = await client.post("/keys", headers={**auth(write), "Idempotency-Key": "k1"},
                                     json={"name": "reports", "scope": "read"})
        assert replayed.status_code == 409 and new["key"] not in replayed.text, replayed.text
        assert (await client.get("/subscribers", headers=auth(new["key"]))).status_code == 200
        assert (await client.post("/keys", headers=auth(new["key"]), json={"scope": "write"})).status_code == 403
        assert (await client.post("/keys", headers=auth(read), json={})).status_code == 403
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(read))).status_code == 403
        assert (await client.post("/keys", headers=auth(write), json={"name": "a\nb"})).status_code == 422
        assert (await client.post("/keys", headers=auth(write), json={"scope": "admin"})).status_code == 422
        listed = await client.get("/keys", headers=auth(read))
        assert [(k["name"], k["scope"]) for k in listed.json()] == [("", "write"), ("", "read"), ("reports", "read")]
        assert all("key" not in k for k in listed.json()) and write not in listed.text
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(other))).json() == {"error": "no such key"}
        assert (await client.get("/keys", headers=auth(other))).json()[0]["id"] not in [k["id"] for k in listed.json()]
        write_id = listed.json()[0]["id"]
        itself = await client.delete(f"/keys/{write_id}", headers=auth(write))
        assert itself.status_code == 409 and "does not revoke itself" in itself.text, "no lock-out by mistake"
        assert (await client.get("/subscribers", headers=auth(write))).status_code == 200
        revoked = await client.delete(f"/keys/{new['id']}", headers=auth(write))
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        assert (await client.get("/subscribers", headers=auth(new["key"]))).status_code == 401
        assert (await client.delete(f"/keys/{new['id']}", headers=auth(write))).status_code == 404
    stored = await conn.fetch("SELECT body FROM einmal.api_requests")
    assert stored and all(new["key"].encode() not in bytes(r["body"]) for r in stored)  # the key kept nowhere
    listing = einmal("account", "key", "list", "--account", "acme", dsn=dsn).stdout
    assert "reports" in listing and new["key"] not in listing
