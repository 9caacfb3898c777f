"""What the command line does for one account beyond subscribers, lists and drafts, over /api/v1 against a
real PostgreSQL: the account's page settings (`einmal accounts set`), a campaign's failed rows queued again
(`einmal campaign retry`) and its in-doubt rows listed and decided (`einmal reconcile`)."""

import asyncpg
import httpx
import pytest

from tests.cli.test_campaign_commands import seed_campaign
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio


async def statuses(conn: asyncpg.Connection, campaign: int) -> dict[str, str]:
    return dict(await conn.fetch("SELECT email, status FROM einmal.sends WHERE campaign_id = $1", campaign))


async def test_the_account_page_settings_are_read_and_changed_as_accounts_set_changes_them(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    key, read = auth(make_key(dsn, "acme")), auth(make_key(dsn, "acme", "--scope", "read"))
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        assert (await client.get("/account", headers=read)).json() == {
            "name": "acme",
            "display_name": None,
            "language": "en",
            "contact": None,
            "time_zone": "UTC",
        }
        changed = await client.patch(
            "/account",
            headers=key,
            json={"display_name": " Acme News ", "language": "de", "contact": "Help@Example.ORG"},
        )
        assert changed.json() == {
            "name": "acme",
            "display_name": "Acme News",
            "language": "de",
            "contact": "Help@example.org",
            "time_zone": "UTC",
        }, changed.text
        for bad, said in (
            ({"language": "xx"}, "language 'xx': no texts for it"),
            ({"language": None}, "body.language: Input should be a valid string"),
            ({"contact": "not an address"}, "contact 'not an address' is not a valid address"),
            ({"display_name": "two\nlines"}, "display_name must not contain line breaks"),
            ({"name": "other"}, "body.name: Extra inputs are not permitted"),
        ):
            refused = await client.patch("/account", headers=key, json={"display_name": "changed", **bad})
            assert refused.status_code == 422 and refused.json()["error"].startswith(said), (bad, refused.text)
        assert (await client.patch("/account", headers=read, json={"language": "en"})).status_code == 403
        cleared = await client.patch("/account", headers=key, json={"display_name": None, "contact": ""})
        assert cleared.json() == {
            "name": "acme",
            "display_name": None,
            "language": "de",
            "contact": None,
            "time_zone": "UTC",
        }
    assert tuple(await conn.fetchrow("SELECT display_name, language, contact FROM einmal.accounts")) == (
        None,
        "de",
        None,
    )


async def test_failed_rows_are_queued_again_by_reason_and_a_sent_campaign_reopens(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "failed", "failed"))
    await conn.execute(
        "UPDATE einmal.sends SET last_reply = CASE email WHEN 'r1@example.org' THEN "
        "'550 5.1.1 user unknown' ELSE '552 5.2.2 mailbox full' END "
        "WHERE campaign_id = $1 AND status = 'failed'",
        campaign,
    )
    key = auth(make_key(dsn, "acme"))
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        full = await client.post(f"/campaigns/{campaign}/retry", headers=key, json={"reason": "mailbox_full"})
        assert full.json() == {"moved": 1, "reopened": True, "left": 0}, full.text
        assert await statuses(conn, campaign) == {
            "r0@example.org": "sent",
            "r1@example.org": "failed",
            "r2@example.org": "queued",
        }
        bad = await client.post(f"/campaigns/{campaign}/retry", headers=key, json={"reason": "bored"})
        assert bad.status_code == 422
        rest = await client.post(f"/campaigns/{campaign}/retry", headers=key, json={})
        assert rest.json() == {"moved": 1, "reopened": False, "left": 0}, rest.text
        await conn.execute("UPDATE einmal.campaigns SET status = 'cancelled' WHERE id = $1", campaign)
        cancelled = await client.post(f"/campaigns/{campaign}/retry", headers=key, json={})
        assert (cancelled.status_code, cancelled.json()) == (
            409,
            {"error": f"cannot retry failed rows of campaign {campaign}: it is cancelled"},
        )


async def test_in_doubt_rows_are_listed_and_decided_all_or_by_id_and_address(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("sent", "in_doubt", "in_doubt", "in_doubt"))
    ids = dict(await conn.fetch("SELECT email, id FROM einmal.sends WHERE campaign_id = $1", campaign))
    key = auth(make_key(dsn, "acme"))
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        listed = (await client.get(f"/campaigns/{campaign}/in-doubt", headers=key)).json()["rows"]
        assert [(r["id"], r["email"], r["node"], r["last_reply"]) for r in listed] == [
            (ids[f"r{i}@example.org"], f"r{i}@example.org", "node-a", "connection lost after DATA") for i in (1, 2, 3)
        ]
        marked = await client.post(
            f"/campaigns/{campaign}/reconcile",
            headers=key,
            json={"decision": "mark_sent", "ids": [ids["r1@example.org"]], "emails": ["R2@Example.org"]},
        )
        assert marked.json() == {"moved": 2, "reopened": False, "left": 0}, marked.text
        refused = await client.post(
            f"/campaigns/{campaign}/reconcile", headers=key, json={"decision": "resend", "ids": [ids["r0@example.org"]]}
        )
        assert (refused.status_code, refused.json()) == (
            409,
            {"error": f"campaign {campaign} has no in-doubt row with id {ids['r0@example.org']}; nothing decided"},
        )
        assert (await statuses(conn, campaign))["r3@example.org"] == "in_doubt"
        assert (
            await client.post(f"/campaigns/{campaign}/reconcile", headers=key, json={"decision": "later"})
        ).status_code == 422
        rest = await client.post(f"/campaigns/{campaign}/reconcile", headers=key, json={"decision": "resend"})
        assert rest.json() == {"moved": 1, "reopened": False, "left": 0}, rest.text
        assert (await client.get(f"/campaigns/{campaign}/in-doubt", headers=key)).json() == {"rows": []}
    assert await statuses(conn, campaign) == {
        "r0@example.org": "sent",
        "r1@example.org": "sent",
        "r2@example.org": "sent",
        "r3@example.org": "queued",
    }
