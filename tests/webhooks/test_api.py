"""/api/v1/webhooks over real HTTP: create (the secret once, not stored by the idempotency layer), list,
rotate, deliveries by state, replay, delete; the URL policy's refusals as 422; a read key only reads."""

import httpx
import pytest

from service.accounts import keys
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def key_of(conn, name: str, scope: str = "write") -> str:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
    _made, secret = await keys.mint(conn, account_id=account, name="t", scope=scope)
    return secret


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_endpoints_are_made_listed_rotated_replayed_and_removed(conn, dsn) -> None:
    key = auth(await key_of(conn, "acme"))
    async with (
        http_server(dsn, webhook_allow_http_loopback=True) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        made = await client.post(
            "/webhooks",
            json={"url": "http://127.0.0.1:9/hook", "events": ["message.bounced", "message.sent"]},
            headers={"Idempotency-Key": "w1"},
        )
        assert made.status_code == 201, made.text
        assert made.headers["cache-control"] == "no-store"
        body = made.json()
        assert body["secret"].startswith("whsec_") and body["events"] == ["message.sent", "message.bounced"]
        again = await client.post(
            "/webhooks",
            json={"url": "http://127.0.0.1:9/hook", "events": ["message.bounced", "message.sent"]},
            headers={"Idempotency-Key": "w1"},
        )
        assert again.status_code == 409 and body["secret"] not in again.text  # never shown twice
        assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_endpoints") == 1
        endpoint_id = body["id"]
        [listed] = (await client.get("/webhooks")).json()
        assert listed["id"] == endpoint_id and "secret" not in listed and listed["disabled_at"] is None
        rotated = await client.post(f"/webhooks/{endpoint_id}/rotate")
        assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
        assert rotated.json()["secret"] != body["secret"]
        assert (await client.get("/webhooks")).json()[0]["rotating_until"] is not None
        # a delivery parked, as the actor leaves one after its last attempt
        account = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")
        await conn.execute(
            "INSERT INTO einmal.webhook_events (id, account_id, type, sequence, payload) "
            "VALUES ('evt_1', $1, 'message.sent', 1, '{}')",
            account,
        )
        await conn.execute(
            "INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id, state, attempts, last_status) "
            "VALUES ('evt_1', $1, 'parked', 12, 500)",
            endpoint_id,
        )
        parked = (await client.get(f"/webhooks/{endpoint_id}/deliveries", params={"state": "parked"})).json()
        assert [(d["event_id"], d["attempts"], d["last_status"]) for d in parked] == [("evt_1", 12, 500)]
        assert (await client.get(f"/webhooks/{endpoint_id}/deliveries", params={"state": "pending"})).json() == []
        bad_state = await client.get(f"/webhooks/{endpoint_id}/deliveries", params={"state": "lost"})
        assert bad_state.status_code == 422
        replayed = await client.post(f"/webhooks/{endpoint_id}/replay")
        assert replayed.json() == {"id": endpoint_id, "replayed": 1, "not_kept_since": None}
        assert (await client.get(f"/webhooks/{endpoint_id}/deliveries", params={"state": "pending"})).json()
        assert (await client.delete(f"/webhooks/{endpoint_id}")).status_code == 204
        assert (await client.get("/webhooks")).json() == []
        # its deliveries go with it; the event stays until pruned
        assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_deliveries") == 0
        assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_events") == 1
        gone = await client.delete(f"/webhooks/{endpoint_id}")
        assert (gone.status_code, gone.json()) == (404, {"error": "no such webhook endpoint"})


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://example.org/hook", "https://"),
        ("https://127.0.0.1/hook", "non-public"),
        ("https://10.0.0.8/hook", "non-public"),
        ("https://[::1]/hook", "non-public"),
        ("https://localhost/hook", "non-public"),
    ],
)
async def test_the_url_policy_refuses_with_422(conn, dsn, url: str, why: str) -> None:
    key = auth(await key_of(conn, "acme"))
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        answer = await client.post("/webhooks", json={"url": url})
    assert answer.status_code == 422 and why in answer.json()["error"], answer.text
    assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_endpoints") == 0


async def test_ipv6_forms_of_private_addresses_are_refused_with_422(conn, dsn) -> None:
    key = auth(await key_of(conn, "acme"))
    refused = [
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::a00:1",  # the local-use NAT64 prefix
        "2002:a9fe:a9fe::",  # 6to4
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
        "::a00:1",  # IPv4-compatible
        "::ffff:0:a00:1",  # SIIT
        "::ffff:a00:1",  # IPv4-mapped
        "fec0::1",  # site-local
    ]
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        for address in refused:
            answer = await client.post("/webhooks", json={"url": f"https://[{address}]/h"})
            assert answer.status_code == 422 and "non-public" in answer.json()["error"], (address, answer.text)
            assert "\n" not in answer.json()["error"]
    assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_endpoints") == 0


async def test_a_read_key_lists_but_does_not_create(conn, dsn) -> None:
    key = auth(await key_of(conn, "acme", scope="read"))
    async with (
        http_server(dsn) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        assert (await client.get("/webhooks")).json() == []
        refused = await client.post("/webhooks", json={"url": "https://example.org/hook"})
    assert refused.status_code == 403


async def test_no_event_is_kept_for_a_disabled_endpoint_and_its_replay_says_since_when(conn, dsn) -> None:
    key = auth(await key_of(conn, "acme"))
    account = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'acme'")

    async def unsubscribe(email: str) -> None:  # what the unsubscribe page's insert does: subscriber.unsubscribed
        await conn.execute(
            "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, $2, 'unsubscribe')",
            account,
            email,
        )

    async with (
        http_server(dsn, webhook_allow_http_loopback=True) as base,
        httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1", headers=key) as client,
    ):
        made = await client.post("/webhooks", json={"url": "http://127.0.0.1:9/hook"})
        endpoint_id = made.json()["id"]
        disabled_at = await conn.fetchval(
            "UPDATE einmal.webhook_endpoints SET disabled_at = now() - interval '1 hour', disabled_reason = '410' "
            "WHERE id = $1 RETURNING disabled_at",
            endpoint_id,
        )
        await unsubscribe("while@example.org")
        replayed = (await client.post(f"/webhooks/{endpoint_id}/replay")).json()
        await unsubscribe("after@example.org")
        deliveries = await client.get(f"/webhooks/{endpoint_id}/deliveries")
    assert replayed["replayed"] == 0
    assert replayed["not_kept_since"] == disabled_at.isoformat().replace("+00:00", "Z")
    # the event while it was disabled was kept for no endpoint; the one after the replay is delivered to it
    events = await conn.fetch("SELECT payload->>'email' AS email FROM einmal.webhook_events ORDER BY created_at")
    assert [e["email"] for e in events] == ["after@example.org"]
    assert len(deliveries.json()) == 1
