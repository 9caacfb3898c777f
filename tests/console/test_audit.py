"""The audit log: the API's campaign transitions write their line in their own transaction (a refused one
writes none), and the console shows and exports it, a member its own account's lines alone."""

import csv
import io

import asyncpg
import httpx
import pytest

from service.accounts import keys
from tests.support.console import accounts, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

DRAFT = {"name": "Spring", "subject": "Hello", "from": "news@example.com", "text": "Hi", "lists": ["news"]}


async def test_api_transitions_are_audited_and_the_console_shows_each_member_its_own(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    key = await keys.mint_for(conn, account="acme", name="", scope="write")
    key_id = await conn.fetchval("SELECT id FROM einmal.api_keys")
    auth = {"Authorization": f"Bearer {key}"}
    async with http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=f"{base}/api/v1", headers=auth) as api:
            campaign = (await api.post("/campaigns", json=DRAFT)).json()["id"]
            assert (await api.post(f"/campaigns/{campaign}/approve")).status_code == 200
            assert (await api.post(f"/campaigns/{campaign}/approve")).status_code == 409  # refused: no line
            assert (await api.post(f"/campaigns/{campaign}/cancel")).status_code == 200
        lines = await conn.fetch(
            "SELECT actor, account_id, action, subject FROM einmal.audit_log WHERE action LIKE 'campaign.%' ORDER BY id"
        )
        assert [tuple(r) for r in lines] == [
            (f"api:key {key_id}", ids["acme"], "campaign.create", f"campaign {campaign}"),
            (f"api:key {key_id}", ids["acme"], "campaign.approve", f"campaign {campaign}"),
            (f"api:key {key_id}", ids["acme"], "campaign.cancel", f"campaign {campaign}"),
        ]
        async with signed_in(base, "acme-member") as acme, signed_in(base, "other-member") as other:
            page = (await acme.get("/console/audit")).text
            assert "campaign.approve" in page and "other-member" not in page
            page = (await other.get("/console/audit")).text
            assert "campaign.approve" not in page and "other-member" in page
            assert (await other.get("/console/audit", params={"account": "acme"})).status_code == 404
            assert (await other.get("/console/audit.csv", params={"account": "acme"})).status_code == 404
            exported = await acme.get("/console/audit.csv")
            assert exported.headers["content-type"].startswith("text/csv")
            rows = list(csv.DictReader(io.StringIO(exported.text)))
            assert {r["action"] for r in rows} == {
                "user.add",
                "console.login",
                "campaign.create",
                "campaign.approve",
                "campaign.cancel",
            }
            assert {r["account"] for r in rows} == {"acme"}
        async with signed_in(base, "root") as root:
            everything = list(csv.DictReader(io.StringIO((await root.get("/console/audit.csv")).text)))
            assert {r["account"] for r in everything} == {"acme", "other", ""}  # root's own lines: the installation's
            only = (await root.get("/console/audit", params={"account": "other"})).text
            assert "other-member" in only and "campaign.approve" not in only
