"""A campaign to a segment, made over the API and sent by a real node to a real SMTP server: each mailbox the
rule takes gets exactly one message, no other gets any, a suppressed one gets none; a campaign on a list narrowed
by a segment takes only the list's members the rule takes; a campaign keeps the rule it was made with."""

import asyncpg
import httpx
import pytest

from tests.segments.helpers import seed
from tests.support.pipeline import Received, node_settings, recording_server, running_node, wait_status
from tests.support.web import http_server
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

DRAFT = {"subject": "Hi {{ name }}", "from": "news@example.com", "text": "Hello\n{{ unsubscribe_url }}\n"}
PRO = {"attribute": "plan", "op": "eq", "value": "pro"}


async def rows(conn: asyncpg.Connection, campaign: int) -> dict[str, str]:
    found = await conn.fetch("SELECT email, status FROM einmal.sends WHERE campaign_id = $1", campaign)
    return {r["email"]: r["status"] for r in found}


async def test_a_campaign_to_a_segment_sends_once_to_each_mailbox_it_takes(conn: asyncpg.Connection, dsn: str) -> None:
    account = await seed(conn)
    await seed(conn, "other")  # the same addresses in another account: none of them is taken
    # a second spelling of ann's mailbox, newer: the build takes the mailbox once, through its oldest subscriber
    await conn.execute(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes) "
        "VALUES ($1, 'ANN@example.org', 'ann@example.org', '{\"plan\": \"pro\"}')",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM einmal.lists l, "
        "einmal.subscribers s WHERE l.account_id = $1 AND l.name = 'news' AND s.email = 'ANN@example.org'",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.suppressions (account_id, email_lower) VALUES ($1, 'dan@example.org')", account
    )
    key = auth(make_key(dsn, "acme"))
    received = Received()
    async with recording_server(received) as port, http_server(dsn) as base:
        async with httpx.AsyncClient(base_url=f"{base}/api/v1") as client:
            made = await client.post("/segments", headers=key, json={"name": "pro", "rule": PRO})
            assert made.status_code == 201, made.text
            counted = (await client.get("/segments/pro/count", headers=key)).json()
            assert (counted["subscribers"], counted["suppressed"]) == (4, 1)  # ann, bob, dan (suppressed), eve

            alone = await client.post("/campaigns", headers=key, json={**DRAFT, "name": "alone", "segment": "pro"})
            assert alone.status_code == 201, alone.text
            narrowed = await client.post(
                "/campaigns",
                headers=key,
                json={**DRAFT, "name": "narrowed", "lists": ["news"], "segment": "pro"},
            )
            assert narrowed.status_code == 201, narrowed.text
            # a change of the segment after the campaigns were made is not theirs
            changed = await client.put("/segments/pro", headers=key, json={"rule": {"member": "offers"}})
            assert changed.status_code == 200
            unknown = await client.post("/campaigns", headers=key, json={**DRAFT, "name": "x", "segment": "nope"})
            assert unknown.status_code == 422 and unknown.json() == {"error": "the account has no segment named 'nope'"}

            async with running_node(node_settings(dsn, port)):
                for made in (alone, narrowed):
                    approved = await client.post(f"/campaigns/{made.json()['id']}/approve", headers=key)
                    assert approved.status_code == 200, approved.text
                    await wait_status(conn, made.json()["id"], "sent")
    alone_rows, narrowed_rows = await rows(conn, alone.json()["id"]), await rows(conn, narrowed.json()["id"])
    assert alone_rows == {
        "ann@example.org": "sent",
        "bob@example.org": "sent",
        "dan@example.org": "suppressed",
        "eve@example.org": "sent",
    }
    # on news only: eve (offers) is not; gus (no list) is on neither
    assert narrowed_rows == {"ann@example.org": "sent", "bob@example.org": "sent", "dan@example.org": "suppressed"}
    got = sorted(rcpt for _, rcpt, _ in received.messages)
    assert got == sorted(
        ["ann@example.org", "bob@example.org", "eve@example.org", "ann@example.org", "bob@example.org"]
    )
    assert len(set(received.ids())) == len(got)  # one message per (campaign, mailbox)


async def test_the_command_line_makes_a_campaign_to_a_segment(conn: asyncpg.Connection, dsn: str) -> None:
    from tests.conftest import einmal

    await seed(conn)
    assert (
        einmal(
            "segments",
            "create",
            "pro",
            "--account",
            "acme",
            "--rule",
            '{"attribute": "plan", "op": "eq", "value": "pro"}',
            dsn=dsn,
        ).returncode
        == 0
    )
    common = [
        "campaign",
        "create",
        "--account",
        "acme",
        "--subject",
        "s",
        "--from",
        "news@example.com",
        "--text",
        "t {{ unsubscribe_url }}",
    ]
    alone = einmal(*common, "--name", "a", "--segment", "pro", dsn=dsn)
    assert alone.returncode == 0, alone.stderr
    assert "goes to those of segment 'pro' on any list" in alone.stderr
    narrowed = einmal(*common, "--name", "b", "--segment", "pro", "--list", "offers", dsn=dsn)
    assert narrowed.returncode == 0, narrowed.stderr
    made = await conn.fetch(
        "SELECT c.segment, c.segment_rule::text AS rule, array(SELECT l.name FROM einmal.lists l "
        "WHERE l.id = ANY (c.list_ids) ORDER BY l.name) AS lists FROM einmal.campaigns c ORDER BY c.id"
    )
    rule = '{"op": "eq", "value": "pro", "attribute": "plan"}'
    assert [tuple(r) for r in made] == [
        ("pro", rule, ["churned", "news", "offers"]),
        ("pro", rule, ["offers"]),
    ]
    missing = einmal(*common, "--name", "c", "--segment", "nope", dsn=dsn)
    assert (missing.returncode, missing.stderr) == (1, "einmal: the account has no segment named 'nope'\n")
