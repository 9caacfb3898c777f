"""The operations pages through real HTTP, signed in as a browser is: an account's deliverability counts its own
campaign mail of the last 30 days against the thresholds, with the doctor's kept findings; *Replay* makes a
webhook's parked deliveries pending through the API's function, with its audit line, and is refused without
the form's token or from another site; messages and a sequence's funnel show what the service functions say;
an operator chooses the account first."""

import json

import asyncpg
import pytest

from tests.support.console import accounts, operated, page_token, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def came_back(conn: asyncpg.Connection, campaign: int, kind: str, days_ago: int) -> None:
    """A bounce or complaint of one of the campaign's sent rows, recorded `days_ago`."""
    row = await conn.fetchrow(
        "SELECT s.id, s.account_id FROM einmal.sends s WHERE s.campaign_id = $1 AND s.status = 'sent' "
        "AND NOT EXISTS (SELECT 1 FROM einmal.bounces b WHERE b.send_id = s.id) LIMIT 1",
        campaign,
    )
    event = f"test:{kind}:{row['id']}"
    await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')", event)
    await conn.execute(
        "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason, campaign_id, created_at) "
        "VALUES ($1, $2, $3, $4, '5.1.1', $5, $6, now() - make_interval(days => $7))",
        event,
        row["account_id"],
        row["id"],
        kind,
        "complaint" if kind == "complaint" else "no_mailbox",
        campaign,
        days_ago,
    )


async def test_deliverability_counts_the_accounts_last_30_days_against_the_thresholds(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    mine = await sending_campaign(conn, "acme", "Spring", rows=400)  # 100 sent
    theirs = await sending_campaign(conn, "other", "Autumn", rows=40)
    await conn.execute("UPDATE einmal.sends SET sent_at = now() - interval '3 days' WHERE status = 'sent'")
    await came_back(conn, mine, "complaint", 1)  # 1 % of 100: over the 0.3 % limit
    await came_back(conn, mine, "hard", 0)  # 1 %: under 2 %
    await came_back(conn, mine, "hard", 40)  # before the window: not counted
    await came_back(conn, theirs, "hard", 0)  # another account's
    finding = {"number": 1, "check": "dmarc", "severity": "fail", "title": "no DMARC record at _dmarc.acme.example"}
    for domain, expires in (("acme.example", 1), ("old.example", -1)):
        await conn.execute(
            "INSERT INTO einmal.doctor_reports (account_id, domain, inputs, findings, expires_at) "
            "VALUES ($1, $2, 'i', $3::jsonb, now() + make_interval(hours => $4))",
            ids["acme"],
            domain,
            json.dumps([{**finding, "found": None, "expected": None, "fix": "publish one"}]),
            expires,
        )
    async with http_server(dsn) as base, signed_in(base, "acme-member") as member:
        page = (await member.get("/console/deliverability")).text
    assert "100 messages delivered; hard bounces: 1; complaints: 1." in page  # not the bounce of 40 days ago
    assert '<dd class="over" id="complaint-rate">1.00 %' in page and "at or over the 0.3 % limit" in page
    assert '<dd class="ok" id="bounce-rate">' in page
    # a bar a day of the 7 days' rate: 0 % 3 and 2 days ago, 1 % over the limit from the complaint's day on
    assert page.count('<svg class="chart"') == 2 and page.count('class="bar over"') == 2
    assert "no DMARC record at _dmarc.acme.example" in page and "acme.example" in page
    assert "old.example" not in page  # expired


async def test_replay_a_webhooks_parked_deliveries_refused_without_the_forms_token(
    conn: asyncpg.Connection, dsn: str
) -> None:
    ids = await accounts(conn, "acme", "other")
    made = await operated(conn, "acme")
    endpoint = made["endpoint_id"]

    async def parked() -> list[str]:
        rows = await conn.fetch("SELECT state FROM einmal.webhook_deliveries WHERE endpoint_id = $1", endpoint)
        return [r["state"] for r in rows]

    async with http_server(dsn) as base, signed_in(base, "acme-member") as member:
        listed = (await member.get("/console/webhooks")).text
        assert "https://hooks.example.org/acme" in listed and f'href="/console/webhooks/{endpoint}"' in listed
        page = (await member.get(f"/console/webhooks/{endpoint}", params={"state": "parked"})).text
        assert 'id="parked">1<' in page and "message.sent" in page and "500" in page
        token = await page_token(member)
        refused = [
            await member.post(f"/console/webhooks/{endpoint}/replay", data={}),
            await member.post(f"/console/webhooks/{endpoint}/replay", data={"form_token": "forged"}),
            await member.post(
                f"/console/webhooks/{endpoint}/replay",
                data={"form_token": token},
                headers={"Origin": "https://elsewhere.example"},
            ),
        ]
        assert [r.status_code for r in refused] == [403, 403, 403] and await parked() == ["parked"]
        done = await member.post(f"/console/webhooks/{endpoint}/replay", data={"form_token": token})
        assert done.status_code == 200 and "1 parked delivery pending again." in done.text
        assert 'id="pending">1<' in done.text
    assert await parked() == ["pending"]
    line = await conn.fetchrow(
        "SELECT actor, account_id, action, subject FROM einmal.audit_log WHERE action LIKE 'webhook.%'"
    )
    assert tuple(line) == ("console:acme-member", ids["acme"], "webhook.replay", f"webhook {endpoint}")


async def test_messages_and_a_sequences_funnel_and_an_operator_choosing_the_account(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme", "other")
    mine, theirs = await operated(conn, "acme"), await operated(conn, "other")
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as member:
            listed = (await member.get("/console/messages")).text
            assert "Receipt of acme" in listed and "acme-0@example.org" in listed and "receipt" in listed
            message = (await member.get(f"/console/messages/{mine['message_id']}")).text
            assert 'id="state">sent<' in message and "shop@example.com" in message
            assert (await member.get("/console/messages/12")).status_code == 404  # below the messages' ids
            sequences = (await member.get("/console/sequences")).text
            assert "Welcome to acme" in sequences
            funnel = (await member.get(f"/console/sequences/{mine['sequence_id']}")).text
            assert "of 3 on the list" in funnel and "Hello from acme" in funnel
            assert 'value="2" aria-label="step 1 reached">2</meter>' in funnel
        async with signed_in(base, "root") as operator:
            chooser = (await operator.get("/console/webhooks")).text
            assert "Choose an account" in chooser and 'href="/console/webhooks?account=other"' in chooser
            theirs_page = await operator.get(f"/console/webhooks/{theirs['endpoint_id']}", params={"account": "other"})
            assert "https://hooks.example.org/other" in theirs_page.text
            assert f'action="/console/webhooks/{theirs["endpoint_id"]}/replay?account=other"' in theirs_page.text
            wrong = await operator.get(f"/console/webhooks/{theirs['endpoint_id']}", params={"account": "acme"})
            assert wrong.status_code == 404


async def test_an_ended_campaigns_days_are_counted_once_and_outlive_its_send_rows(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme")
    campaign = await sending_campaign(conn, "acme", "Spring", rows=40)  # 10 sent
    await conn.execute("UPDATE einmal.sends SET sent_at = now() - interval '2 days' WHERE status = 'sent'")
    await conn.execute("UPDATE einmal.campaigns SET status = 'sent', sent_at = now() WHERE id = $1", campaign)
    async with http_server(dsn) as base, signed_in(base, "acme-member") as member:
        first = (await member.get("/console/deliverability")).text
    days = await conn.fetch("SELECT day, delivered FROM einmal.campaign_days WHERE campaign_id = $1", campaign)
    await conn.execute("DELETE FROM einmal.sends WHERE campaign_id = $1", campaign)  # as a prune does
    async with http_server(dsn) as base, signed_in(base, "acme-member") as member:  # a node that kept nothing
        again = (await member.get("/console/deliverability")).text
    assert "10 messages delivered" in first and "10 messages delivered" in again
    assert sorted(r["delivered"] for r in days) == [0, 10]  # the marker, and the day of the 10


async def test_a_campaign_pruned_before_it_was_counted_counts_its_sent_on_the_day_it_finished(
    conn: asyncpg.Connection, dsn: str
) -> None:
    await accounts(conn, "acme")
    campaign = await sending_campaign(conn, "acme", "Spring", rows=40)  # 10 sent
    await conn.execute("DELETE FROM einmal.sends WHERE campaign_id = $1", campaign)  # as a prune does
    await conn.execute("INSERT INTO einmal.campaign_counts (campaign_id, status, n) VALUES ($1, 'sent', 10)", campaign)
    await conn.execute(
        "UPDATE einmal.campaigns SET status = 'sent', sent_at = now() - interval '3 days', pruned_at = now() "
        "WHERE id = $1",
        campaign,
    )
    async with http_server(dsn) as base, signed_in(base, "acme-member") as member:
        page = (await member.get("/console/deliverability")).text
    assert "10 messages delivered" in page
