"""Bulk mail goes out only with a one-click unsubscribe (RFC 8058), unless the operator said otherwise: a
node without EINMAL_UNSUBSCRIBE_URL and _SECRET pauses such a campaign instead of sending it, `campaign
create` and `approve` (the command line's and the API's) refuse it where they have none, and a campaign made
with --no-unsubscribe (the API's "unsubscribe": false) goes out without one, marked as such."""

import json
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.conftest import cells, einmal
from tests.support.pipeline import (
    NO_UNSUBSCRIBE,
    UNSUBSCRIBE,
    Received,
    node_env,
    recording_server,
    seed,
    stop_node,
    wait_status,
)
from tests.support.pipeline import start_node as start
from tests.support.web import http_server

pytestmark = pytest.mark.anyio

FIX = "set EINMAL_UNSUBSCRIBE_URL and EINMAL_UNSUBSCRIBE_SECRET, or create the campaign with --no-unsubscribe"


def create(dsn: str, *extra: str, env: dict = NO_UNSUBSCRIBE):
    return einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "c",
        "--subject",
        "Hi",
        "--from",
        "news@example.org",
        "--text",
        "Hello {{ name }}",
        *extra,
        dsn=dsn,
        env=env,
    )


async def test_create_and_approve_refuse_bulk_mail_where_no_one_click_unsubscribe_is_set(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await seed(conn, ["a@example.org"])
    refused = create(dsn)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.startswith("einmal: not created: no one-click unsubscribe, which Gmail and Yahoo "), (
        refused.stderr
    )
    assert refused.stderr.rstrip("\n").endswith(FIX) and refused.stderr.count("\n") == 1, refused.stderr
    made = create(dsn, env=UNSUBSCRIBE)
    assert made.returncode == 0, made.stderr
    assert "neither body shows {{ unsubscribe_url }}" in made.stderr  # the header alone: a loud hint
    approve = einmal("campaign", "approve", made.stdout.strip(), dsn=dsn, env=NO_UNSUBSCRIBE)
    assert approve.returncode == 1 and approve.stderr.count("\n") == 1, approve.stderr
    assert approve.stderr.startswith(f"einmal: campaign {made.stdout.strip()} not approved: no one-click")
    assert approve.stderr.rstrip("\n").endswith(FIX)
    marked = create(dsn, "--no-unsubscribe")
    assert marked.returncode == 0 and "may go out without a one-click unsubscribe" in marked.stderr, marked.stderr
    campaign = marked.stdout.strip()
    assert einmal("campaign", "approve", campaign, dsn=dsn, env=NO_UNSUBSCRIBE).returncode == 0
    status = json.loads(einmal("campaign", "status", campaign, "--json", dsn=dsn).stdout)
    assert status["unsubscribe"] is False
    assert "made with --no-unsubscribe" in einmal("campaign", "status", campaign, dsn=dsn).stdout
    listed = einmal("campaign", "list", dsn=dsn).stdout.splitlines()
    assert next(line for line in listed if cells(line)[0] == campaign).count("(--no-unsubscribe)") == 1


async def test_a_node_without_one_click_unsubscribe_pauses_a_bulk_campaign_and_sends_one_made_without(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    required = await seed(conn, ["a@example.org", "b@example.org"])
    without = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, "
        "unsubscribe_required) SELECT account_id, 'marked', subject, from_address, body_text, list_ids, false "
        "FROM einmal.campaigns WHERE id = $1 RETURNING id",
        required,
    )
    await conn.execute("UPDATE einmal.campaigns SET status = 'approved'")  # approved where one was set
    received = Received()
    async with recording_server(received) as port:
        env = {k: v for k, v in node_env(dsn, port).items() if k not in UNSUBSCRIBE}
        node = start(env, tmp_path / "node.log")
        try:
            await wait_status(conn, required, "paused")
            await wait_status(conn, without, "sent")
        finally:
            assert await stop_node(node) == 0
    reason = await conn.fetchval("SELECT pause_reason FROM einmal.campaigns WHERE id = $1", required)
    assert reason.startswith("no one-click unsubscribe") and reason.endswith(FIX), reason
    assert (
        await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status <> 'queued'", required)
        == 0
    )
    assert sorted(r for _, r, _ in received.messages) == ["a@example.org", "b@example.org"]
    assert all(f"campaign.{without}." in m for _, _, m in received.messages)


async def test_the_api_refuses_bulk_mail_without_unsubscribe_and_approves_no_template_that_never_renders(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await seed(conn, ["a@example.org", "b@example.org"])
    key = einmal("account", "key", "create", "--account", "acme", dsn=dsn).stdout.strip()
    headers = {"Authorization": f"Bearer {key}"}
    draft = {"name": "n", "subject": "Hi", "from": "news@example.org", "text": "Hi {{ attributes.city }}"}
    async with http_server(dsn, unsubscribe_url=None) as base, httpx.AsyncClient(base_url=base, headers=headers) as api:
        refused = await api.post("/api/v1/campaigns", json=draft)
        assert refused.status_code == 422 and refused.json()["error"].endswith(
            'or create the campaign with "unsubscribe": false'
        ), refused.text
        made = await api.post("/api/v1/campaigns", json={**draft, "unsubscribe": False})
        assert made.status_code == 201 and made.json()["unsubscribe"] is False, made.text
        assert any("cannot be rendered for 2 of 2 subscribers tried" in w for w in made.json()["warnings"])
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=base, headers=headers) as api:
        campaign = made.json()["id"]
        approve = await api.post(f"/api/v1/campaigns/{campaign}/approve")
        assert approve.status_code == 409, approve.text
        assert "cannot be rendered for any of the 2 subscribers tried" in approve.json()["error"]
        assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "draft"
        fixed = await api.patch(f"/api/v1/campaigns/{campaign}", json={"text": "Hi {{ name }}"})
        assert fixed.status_code == 200 and fixed.json()["warnings"] == [
            "warning: neither body shows {{ unsubscribe_url }}: the List-Unsubscribe header works, but a visible "
            "link is what people look for before they press 'spam'"
        ], fixed.text
        await api.patch(f"/api/v1/campaigns/{campaign}", json={"text": "Hi {{ attributes.city }}"})
        forced = await api.post(f"/api/v1/campaigns/{campaign}/approve", params={"force": "true"})
        assert forced.status_code == 200 and forced.json()["status"] == "approved", forced.text
        assert forced.json()["warnings"] and forced.json()["unsubscribe"] is False
