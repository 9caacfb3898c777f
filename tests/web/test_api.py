"""The JSON API under /api/v1 over real HTTP (einmal serve on loopback) against a real PostgreSQL: keys made
by the real command line, each request acting for its key's account alone, the generated OpenAPI document,
and bad input answered without a traceback or a write."""

import json

import anyio
import asyncpg
import httpx
import pytest

from service import db
from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
from service.subscribers import subscriber
from tests.conftest import cells, einmal
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

ALICE = "Alice@Example.org"
ACME_KEY = (
    "SELECT k.id FROM einmal.api_keys AS k JOIN einmal.accounts AS a ON a.id = k.account_id WHERE a.name = 'acme'"
)


def make_key(dsn: str, account: str, *options: str) -> str:
    done = einmal("account", "key", "create", "--account", account, *options, dsn=dsn)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
async def two_accounts(conn: asyncpg.Connection, dsn: str) -> dict[str, str]:
    """Accounts acme and other, each with one subscriber (alice in acme, bob in other), and a key each."""
    for account, email in (("acme", ALICE), ("other", "bob@example.net")):
        account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", account)
        await conn.execute(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes) "
            'VALUES ($1, $2, lower($2), \'{"city": "Köln"}\')',
            account_id,
            email,
        )
    return {
        "acme": make_key(dsn, "acme"),
        "other": make_key(dsn, "other"),
        "acme-read": make_key(dsn, "acme", "--scope", "read", "--name", "reports"),
    }


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_key_is_printed_once_alone_and_only_its_hash_is_kept(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = two_accounts["acme"]
    assert key.startswith("einmal_") and len(key) == 50 and "\n" not in key
    stored = await conn.fetch("SELECT prefix, hash FROM einmal.api_keys")
    assert len(stored) == 3 and all(key not in (r["prefix"], bytes(r["hash"]).hex()) for r in stored)
    assert key[:13] in {r["prefix"] for r in stored}
    listed = einmal("account", "key", "list", "--account", "acme", dsn=dsn)
    assert listed.returncode == 0 and key not in listed.stdout
    assert "reports" in listed.stdout and "read" in [cells(line)[2] for line in listed.stdout.splitlines()]
    unknown = einmal("account", "key", "create", "--account", "nosuch", dsn=dsn)
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.strip() == "einmal: no account named 'nosuch'", unknown.stderr


async def test_without_a_valid_key_every_route_is_401_and_a_revoked_key_is_refused(
    dsn: str, two_accounts: dict[str, str]
) -> None:
    bad = ({}, auth("einmal_" + "x" * 43), auth("not-ours"), {"Authorization": "Basic eDp4"})
    values = {
        "email": ALICE,
        "campaign_id": "1",
        "verb": "cancel",
        "name": "news",
        "key_id": "1",
        "domain": "a.example",
        "endpoint_id": "1",
        "message_id": str(2**52),
        "sequence_id": "1",
        "position": "1",
    }
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        document = (await client.get("/openapi.json")).json()
    operations = [(method, path) for path, ops in document["paths"].items() for method in ops]
    assert len(operations) >= 20
    for kind, headers in enumerate(bad):  # a server each: fewer failures than slow a client down
        fresh = await asyncpg.connect(dsn)  # and a new window of guesses each (deps.Guesses counts in the table)
        try:
            await fresh.execute("DELETE FROM einmal.client_counts")
        finally:
            await fresh.close()
        async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
            for method, path in operations[kind :: len(bad)]:
                answer = await client.request(method.upper(), path.format(**values), headers=headers, json={})
                assert answer.status_code == 401, (method, path, headers, answer.text)
                assert answer.headers["www-authenticate"] == "Bearer"
    # that many wrong keys from one network are past its guesses (deps.Guesses): a new window for what follows
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DELETE FROM einmal.client_counts")
    finally:
        await conn.close()
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        key = two_accounts["acme"]
        assert (await client.get("/subscribers", headers=auth(key))).status_code == 200
        [key_id] = [
            cells(line)[0]
            for line in einmal("account", "key", "list", "--account", "acme", dsn=dsn).stdout.splitlines()
            if cells(line)[-1] == "-" and cells(line)[2] == "write"
        ]
        assert einmal("account", "key", "revoke", "--account", "acme", key_id, dsn=dsn).returncode == 0
        assert (await client.get("/subscribers", headers=auth(key))).status_code == 401
        again = einmal("account", "key", "revoke", "--account", "acme", key_id, dsn=dsn)
        assert again.returncode == 1 and "no key" in again.stderr


async def test_a_key_of_another_account_gets_404_on_every_route_and_changes_nothing(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    """Every operation of the document, asked by other's key about acme's subscriber, suppression and
    campaign: 404 where it names one, nothing of acme's in a listing, and acme's rows as they were."""
    acme = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) "
        "VALUES ($1, 'alice@example.org', 'unsubscribe')",
        acme,
    )
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, "
        "body_text, list_ids) VALUES ($1, 'c', 's', 'n@example.com', 'b', '{}') "
        "RETURNING id",
        acme,
    )
    news = await conn.fetchval("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news') RETURNING id", acme)
    await conn.execute(
        "INSERT INTO einmal.message_templates (account_id, name, subject, body_text) VALUES ($1, 'news', 's', 't')",
        acme,
    )
    message = (
        await messages.send(
            conn,
            queueing=Queueing.of(Settings(database_url=dsn)),
            account_id=acme,
            to=ALICE,
            subject="s",
            body_text="t",
            from_address="n@acme.example",
        )
    ).id
    sequence = await conn.fetchval(
        "INSERT INTO einmal.sequences (account_id, list_id, name) VALUES ($1, $2, 'welcome') RETURNING id", acme, news
    )
    await conn.execute(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status, "
        "sequence_id, step_position, step_delay_seconds) "
        "VALUES ($1, 's', 's', 'n@example.com', 'b', ARRAY[$2::bigint], 'step', 'sending', $3, 1, 0)",
        acme,
        news,
        sequence,
    )
    await conn.execute("INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'acme.example')", acme)
    await conn.execute(
        "INSERT INTO einmal.list_members SELECT l.id, s.id FROM einmal.lists l, einmal.subscribers s "
        "WHERE l.account_id = $1 AND s.account_id = $1",
        acme,
    )
    webhook = await conn.fetchval(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) "
        "VALUES ($1, 'https://hooks.acme.example/h', '{message.sent}', 'whsec_c2VjcmV0') RETURNING id",
        acme,
    )
    await conn.execute(
        "INSERT INTO einmal.segments (account_id, name, rule) VALUES ($1, 'news', '{\"member\": \"news\"}')", acme
    )
    before = await snapshot(conn)
    other = auth(two_accounts["other"])
    acme_keys = await conn.fetch("SELECT id, prefix FROM einmal.api_keys WHERE account_id = $1", acme)
    values = {
        "email": ALICE,
        "campaign_id": str(campaign),
        "verb": "cancel",
        "name": "news",
        "key_id": str(acme_keys[0]["id"]),
        "domain": "acme.example",
        "endpoint_id": str(webhook),
        "message_id": str(message),
        "sequence_id": str(sequence),
        "position": "1",
    }
    bodies = {
        ("put", "/subscribers/{email}"): {"name": "x"},
        ("post", "/subscribers/batch"): {"subscribers": [{"email": ALICE, "name": "x", "lists": ["news"]}]},
        ("put", "/suppressions/{email}"): {},
        ("put", "/lists/{name}"): None,
        ("put", "/lists/{name}/members/{email}"): None,
        ("put", "/lists/{name}/form"): {"open": True},
        ("put", "/lists/{name}/title"): {"title": "x"},
        ("post", "/campaigns"): None,
        ("post", "/keys"): None,
        ("post", "/webhooks"): None,
        ("post", "/subscribe"): {"list": "news", "email": ALICE},
        ("patch", "/campaigns/{campaign_id}"): {"name": "x"},
        ("patch", "/account"): None,
        ("post", "/campaigns/{campaign_id}/retry"): {},
        ("post", "/campaigns/{campaign_id}/reconcile"): {"decision": "resend"},
        ("post", "/campaigns/{campaign_id}/test"): {"to": "qa@example.net"},
        ("post", "/account/domains/{domain}/dkim"): {"selector": "s1"},
        ("patch", "/account/identity"): {"unsubscribe_mailto": "unsub@other.example"},
        ("post", "/messages"): None,
        ("post", "/messages/batch"): {"messages": [{"to": ALICE, "template": "news"}]},
        ("put", "/message-templates/{name}"): None,
        ("post", "/sequences"): None,
        ("post", "/sequences/{sequence_id}/steps"): {"subject": "s", "from": "n@acme.example", "text": "t"},
        ("patch", "/sequences/{sequence_id}/steps/{position}"): {"subject": "x"},
        ("post", "/segments"): None,
        ("put", "/segments/{name}"): {"rule": {"member": "news"}},
    }
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        document = (await client.get("/openapi.json")).json()
        asked = 0
        operations = sorted(
            ((method, path) for path, ops in document["paths"].items() for method in ops), key=lambda op: op[0] == "put"
        )  # the PUTs last: they make other's own rows
        for method, path in operations:
            if (method, path) in bodies and bodies[(method, path)] is None:
                continue  # creates in the key's own account: nothing of acme's to reach
            url = path.format(**values)
            answer = await client.request(method.upper(), url, headers=other, json=bodies.get((method, path)))
            asked += 1
            if path == "/doctor":  # the key's own account, and this server names no From domain to check
                assert answer.status_code == 422 and "no From domain" in answer.json()["error"], answer.text
            elif path == "/subscribe":  # acme's list, by its name: none of other's
                assert (answer.status_code, answer.json()) == (404, {"error": "no such list"}), answer.text
            elif "{" in path and (method != "put" or path.endswith(("/form", "/title")) or "/segments/" in path):
                assert (answer.status_code, answer.json()) in (
                    (404, {"error": "no such subscriber"}),
                    (404, {"error": "no such list"}),
                    (404, {"error": "no such suppression"}),
                    (404, {"error": "no such membership"}),
                    (404, {"error": "no such campaign"}),
                    (404, {"error": "no such key"}),
                    (404, {"error": "no such webhook endpoint"}),
                    (404, {"error": "no such message"}),
                    (404, {"error": "no such message template"}),
                    (404, {"error": "no such sequence"}),
                    (404, {"error": "no such segment"}),
                    (404, {"error": "the account has no domain 'acme.example'"}),
                    (404, {"error": "the account has no domain 'acme.example': add it first"}),
                ), (method, path, answer.text)
            elif path == "/subscribers/batch":  # other's own alice; acme's list is none of other's
                assert answer.status_code == 200, answer.text
                [row] = answer.json()["subscribers"]
                assert (row["outcome"], row["reason"]) == ("invalid", "lists: the account has no list 'news'")
            elif path == "/messages/batch":  # acme's template, by its name: none of other's
                assert answer.status_code == 202, answer.text
                [item] = answer.json()["messages"]
                assert (item["outcome"], item["reason"]) == ("invalid", "template: no such message template")
            else:
                assert answer.status_code in (200, 201), (method, path, answer.text)
                assert "alice" not in answer.text.lower() or method == "put", (method, path, answer.text)
            assert not any(k["prefix"] in answer.text for k in acme_keys), (method, path, answer.text)
        assert asked >= 17
    assert await snapshot(conn, "acme") == before
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "draft"


async def snapshot(conn: asyncpg.Connection, account: str = "acme") -> list:
    """acme's subscribers, suppressions, memberships, campaigns, keys, domains and webhooks, as rows."""
    return [
        tuple(r)
        for r in await conn.fetch(
            """
        SELECT 'subscriber', s.email, s.name || s.status || s.attributes::text FROM einmal.subscribers s
            JOIN einmal.accounts a ON a.id = s.account_id WHERE a.name = $1
        UNION ALL SELECT 'suppression', x.email_lower, x.reason FROM einmal.suppressions x
            JOIN einmal.accounts a ON a.id = x.account_id WHERE a.name = $1
        UNION ALL SELECT 'member', l.name, m.subscriber_id::text FROM einmal.list_members m
            JOIN einmal.lists l ON l.id = m.list_id JOIN einmal.accounts a ON a.id = l.account_id WHERE a.name = $1
        UNION ALL SELECT 'campaign', c.name, c.status || c.subject || c.updated_at::text FROM einmal.campaigns c
            JOIN einmal.accounts a ON a.id = c.account_id WHERE a.name = $1
        UNION ALL SELECT 'key', k.prefix, coalesce(k.revoked_at::text, 'live') FROM einmal.api_keys k
            JOIN einmal.accounts a ON a.id = k.account_id WHERE a.name = $1
        UNION ALL SELECT 'domain', d.domain, array_to_string(d.keys, ',') FROM einmal.account_domains d
            JOIN einmal.accounts a ON a.id = d.account_id WHERE a.name = $1
        UNION ALL SELECT 'segment', g.name, g.rule::text || g.updated_at::text FROM einmal.segments g
            JOIN einmal.accounts a ON a.id = g.account_id WHERE a.name = $1
        UNION ALL SELECT 'webhook', w.url, w.secret || coalesce(w.disabled_at::text, 'on')
            FROM einmal.webhook_endpoints w JOIN einmal.accounts a ON a.id = w.account_id WHERE a.name = $1
        ORDER BY 1, 2""",
            account,
        )
    ]


async def test_suppressions_are_added_listed_and_removed_for_the_keys_account(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        first = await client.put("/suppressions/Eve@Example.org", headers=key, json={"reason": "asked by phone"})
        again = await client.put("/suppressions/eve@example.org", headers=key, json={})
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["reason"] == "asked by phone" and again.json()["mailbox"] == "eve@example.org"
        listed = (await client.get("/suppressions", headers=key)).json()
        assert [s["mailbox"] for s in listed["suppressions"]] == ["eve@example.org"] and listed["next"] is None
        bad = await client.put("/suppressions/not-an-address", headers=key, json={})
        assert bad.status_code == 422 and "invalid address" in bad.json()["error"]
        assert (await client.delete("/suppressions/EVE@example.org", headers=key)).status_code == 204
        assert (await client.delete("/suppressions/eve@example.org", headers=key)).status_code == 404
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0
    key_id = await conn.fetchval(ACME_KEY)
    lines = await conn.fetch("SELECT actor, action, subject FROM einmal.audit_log ORDER BY id")
    assert [tuple(r) for r in lines] == [  # the one added, and removed; not the one already there, nor the refused
        (f"api:key {key_id}", "suppression.add", "eve@example.org"),
        (f"api:key {key_id}", "suppression.remove", "eve@example.org"),
    ]


async def test_lists_are_made_and_members_put_on_and_taken_off(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made, found = [await client.put("/lists/Weekly news", headers=key) for _ in range(2)]
        assert (made.status_code, found.status_code) == (201, 200) and made.json()["id"] == found.json()["id"]
        assert (await client.put("/lists/%20padded", headers=key)).status_code == 422
        put = await client.put("/lists/Weekly news/members/ALICE@example.org", headers=key)
        assert put.status_code == 200 and put.json()["added"] is True
        assert (await client.put("/lists/Weekly news/members/alice@example.org", headers=key)).json()["added"] is False
        assert (await client.put("/lists/nosuch/members/alice@example.org", headers=key)).json() == {
            "error": "no such list"
        }
        assert (await client.put("/lists/Weekly news/members/zed@example.org", headers=key)).json() == {
            "error": "no such subscriber"
        }
        lists = (await client.get("/lists", headers=key)).json()
        assert [(x["name"], x["members"]) for x in lists] == [("Weekly news", 1)]
        members = (await client.get("/subscribers", headers=key, params={"list": "Weekly news"})).json()
        assert [s["email"] for s in members["subscribers"]] == [ALICE] and members["subscribers"][0]["lists"] == [
            "Weekly news"
        ]
        assert (await client.delete("/lists/Weekly news/members/alice@EXAMPLE.org", headers=key)).status_code == 204
        assert (await client.delete("/lists/Weekly news/members/alice@example.org", headers=key)).status_code == 404
        assert (await client.get("/subscribers", headers=key, params={"list": "Weekly news"})).json()[
            "subscribers"
        ] == []


async def test_a_campaign_is_created_approved_and_cancelled_and_its_status_read(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    acme = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", acme)
    key = auth(two_accounts["acme"])
    draft = {
        "name": "Spring",
        "subject": "Hello {{ name }}",
        "from": "News <news@example.com>",
        "text": "Hi {{ name }}",
        "lists": ["news"],
        "at": "2099-01-01T09:00:00+01:00",
    }
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = await client.post("/campaigns", headers=key, json=draft)
        assert made.status_code == 201, made.text
        campaign = made.json()
        assert (campaign["status"], campaign["scheduled_for"]) == ("draft", "2099-01-01T08:00:00Z")
        refused = {
            "no such list": {**draft, "lists": ["nosuch"]},
            "bad template": {**draft, "text": "{% if %}"},
            "bad sender": {**draft, "from": "nobody"},
            "no time zone": {**draft, "at": "2099-01-01T09:00:00"},
            "unknown language": {**draft, "language": "klingon"},
        }
        for what, body in refused.items():
            answer = await client.post("/campaigns", headers=key, json=body)
            assert answer.status_code == 422, (what, answer.text)
        url = f"/campaigns/{campaign['id']}"
        approved = await client.post(f"{url}/approve", headers=key)
        assert approved.status_code == 200 and approved.json()["status"] == "approved"
        again = await client.post(f"{url}/approve", headers=key)
        assert again.status_code == 409 and "it is approved" in again.json()["error"]
        assert (await client.post(f"{url}/cancel", headers=key)).json()["status"] == "cancelled"
        status = (await client.get(url, headers=key)).json()
        assert (status["status"], status["total"], status["counts"]["queued"]) == ("cancelled", 0, 0)
        printed = json.loads(einmal("campaign", "status", str(campaign["id"]), "--json", dsn=dsn).stdout)
        assert status.keys() == printed.keys() and status["counts"] == printed["counts"]
        assert status["scheduled_for"] == "2099-01-01T08:00:00Z" and status["started_at"] is None
        listed = (await client.get("/campaigns", headers=key)).json()
        assert [c["id"] for c in listed["campaigns"]] == [campaign["id"]]
        assert (await client.post(f"{url}/explode", headers=key)).status_code == 404  # no such transition
        assert (await client.post(f"{url}/preview", headers=key)).status_code == 405  # it is a GET
        for listing in ("/campaigns", "/subscribers"):  # a cursor is a bigint: beyond it, 422 and not a 500
            assert (await client.get(listing, headers=key, params={"cursor": "9" * 19})).status_code == 422
            assert (await client.get(listing, headers=key, params={"cursor": "9" * 18})).status_code == 200
        nul = await client.get("/suppressions", headers=key, params={"cursor": "a\x00b"})
        assert (nul.status_code, nul.json()) == (422, {"error": "text with a character that cannot be stored (NUL)"})
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 1
    made = await client_post_language(dsn, key, {**draft, "language": "de"})
    assert await conn.fetchval("SELECT language FROM einmal.campaigns WHERE id = $1", made) == "de"


async def client_post_language(dsn: str, key: dict, draft: dict) -> int:
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        made = await client.post("/campaigns", headers=key, json=draft)
    assert made.status_code == 201, made.text
    return made.json()["id"]


async def test_put_creates_then_updates_one_subscriber_per_mailbox_and_get_finds_any_spelling(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        updated = await client.put(
            "/subscribers/ALICE@example.ORG", headers=key, json={"name": "Alice", "attributes": {"plan": "pro"}}
        )
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
        read_only = await client.put("/subscribers/dave@example.org", headers=auth(two_accounts["acme-read"]), json={})
        assert read_only.status_code == 403
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email_lower LIKE 'dave%'") == 0


async def test_upserts_of_one_mailbox_at_once_make_one_subscriber_and_wait_for_an_import(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 PUTs of one new mailbox in three spellings at once: one subscriber, created by exactly one of them,
    every attribute merged. While an import holds the account's lock, a PUT waits for it, then is 503."""
    key = auth(two_accounts["acme"])
    spellings = ["Race@example.org", "race@EXAMPLE.org", "RACE@example.org"]
    answers: list[httpx.Response] = []
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(base_url=f"{base}/api/v1", limits=httpx.Limits(max_connections=30)) as client,
    ):

        async def put(i: int) -> None:
            answers.append(
                await client.put(
                    f"/subscribers/{spellings[i % 3]}", headers=key, json={"attributes": {f"a{i}": str(i)}}
                )
            )

        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(put, i)
        assert sorted(a.status_code for a in answers) == [200] * 29 + [201], [a.text for a in answers]
        # the wait for an import shortened only now: the 30 PUTs above take turns on the mailbox's row (each with
        # its line of the audit log), and on a loaded machine the last may wait past half a second
        monkeypatch.setattr(subscriber, "LOCK_SECONDS", 0.5)
        async with conn.transaction():
            await conn.execute(
                *db.sql(
                    "subscribers_import_lock",
                    account_id=await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'"),
                )
            )
            started = anyio.current_time()
            waited = await client.put("/subscribers/someone@example.org", headers=key, json={})
            assert (waited.status_code, waited.headers["retry-after"]) == (503, "5"), waited.text
            assert anyio.current_time() - started >= 0.5
    rows = await conn.fetch("SELECT attributes FROM einmal.subscribers WHERE email_lower = 'race@example.org'")
    assert len(rows) == 1 and json.loads(rows[0]["attributes"]) == {f"a{i}": str(i) for i in range(30)}
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email_lower LIKE 'someone%'") == 0


async def test_delete_erases_as_the_command_line_does(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        assert (await client.delete("/subscribers/alice@example.org", headers=key)).status_code == 204
        assert (await client.get(f"/subscribers/{ALICE}", headers=key)).status_code == 404
        assert (await client.delete(f"/subscribers/{ALICE}", headers=key)).status_code == 404
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "erased"
    assert await conn.fetchval("SELECT count(*) FROM einmal.subscribers WHERE email = $1", ALICE) == 0
    alice = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE status = 'erased'")
    line = await conn.fetchrow("SELECT actor, action, subject FROM einmal.audit_log")
    key_id = await conn.fetchval(ACME_KEY)
    assert tuple(line) == (f"api:key {key_id}", "subscriber.erase", f"subscriber {alice}")


async def test_bad_input_is_a_4xx_with_nothing_written(
    conn: asyncpg.Connection, dsn: str, two_accounts: dict[str, str]
) -> None:
    key = auth(two_accounts["acme"])
    before = await conn.fetchval("SELECT count(*) FROM einmal.subscribers")
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
        cases = {
            "not an address": (client.put("/subscribers/nobody", headers=key, json={}), 422),
            "unknown field": (client.put("/subscribers/e@example.org", headers=key, json={"status": "x"}), 422),
            "not JSON": (
                client.put(
                    "/subscribers/e@example.org", content=b"{", headers={**key, "content-type": "application/json"}
                ),
                422,
            ),
            "body over 64 KiB": (
                client.put("/subscribers/e@example.org", headers=key, json={"name": "x" * 70_000}),
                413,
            ),
            "bad cursor": (client.get("/subscribers", headers=key, params={"cursor": "-1"}), 422),
            "limit too high": (client.get("/subscribers", headers=key, params={"limit": 501}), 422),
            "control characters": (client.put("/subscribers/e@example.org", headers=key, json={"name": "a\x00b"}), 422),
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
    assert set(document["paths"]) == {
        "/subscribers",
        "/subscribers/{email}",
        "/subscribers/batch",
        "/suppressions",
        "/suppressions/{email}",
        "/campaigns",
        "/campaigns/{campaign_id}",
        "/campaigns/{campaign_id}/approve",
        "/campaigns/{campaign_id}/pause",
        "/campaigns/{campaign_id}/resume",
        "/campaigns/{campaign_id}/cancel",
        "/campaigns/{campaign_id}/preview",
        "/campaigns/{campaign_id}/test",
        "/campaigns/{campaign_id}/clicks",
        "/campaigns/{campaign_id}/opens",
        "/campaigns/{campaign_id}/stats",
        "/lists",
        "/lists/{name}",
        "/lists/{name}/members/{email}",
        "/lists/{name}/form",
        "/lists/{name}/title",
        "/keys",
        "/keys/{key_id}",
        "/subscribe",
        "/account",
        "/account/domains",
        "/account/domains/{domain}",
        "/account/domains/{domain}/dkim",
        "/account/identity",
        "/doctor",
        "/campaigns/{campaign_id}/retry",
        "/campaigns/{campaign_id}/in-doubt",
        "/campaigns/{campaign_id}/reconcile",
        "/webhooks",
        "/webhooks/{endpoint_id}",
        "/webhooks/{endpoint_id}/rotate",
        "/webhooks/{endpoint_id}/deliveries",
        "/webhooks/{endpoint_id}/replay",
        "/messages",
        "/messages/batch",
        "/messages/{message_id}",
        "/message-templates",
        "/message-templates/{name}",
        "/message-templates/{name}/stats",
        "/sequences",
        "/sequences/{sequence_id}",
        "/sequences/{sequence_id}/stats",
        "/sequences/{sequence_id}/pause",
        "/sequences/{sequence_id}/resume",
        "/sequences/{sequence_id}/steps",
        "/sequences/{sequence_id}/steps/{position}",
        "/segments",
        "/segments/{name}",
        "/segments/{name}/count",
        "/segments/{name}/sample",
    }
    assert set(document["paths"]["/campaigns/{campaign_id}"]) == {"get", "patch"}
    assert set(document["paths"]["/subscribers/{email}"]) == {"get", "put", "delete"}
    assert {"Subscriber", "SubscriberPage", "SubscriberFields", "Problem"} <= set(document["components"]["schemas"])
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_the_docs_page_is_made_from_the_document_and_needs_no_outside_network(dsn: str) -> None:
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        page = await client.get(f"{base}/api/v1/docs")
        document = (await client.get(f"{base}/api/v1/openapi.json")).json()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"{method.upper()}</span> <code>/api/v1{path}</code>" in page.text, (method, path)
    assert "<script" not in page.text and "http://" not in page.text and "https://" not in page.text
    assert 'id="Subscriber"' in page.text and 'href="openapi.json"' in page.text
    # a table of contents links every operation's block and every group's heading
    contents = page.text[page.text.index('<nav aria-label="contents">') : page.text.index("</nav>")]
    for operations in document["paths"].values():
        for op in operations.values():
            assert f'href="#{op["operationId"]}"' in contents and f'id="{op["operationId"]}"' in page.text
    tags = {op["tags"][0] for operations in document["paths"].values() for op in operations.values()}
    assert len(tags) > 5 and all(f'href="#routes-{tag.lower().replace(" ", "-")}"' in contents for tag in tags)
