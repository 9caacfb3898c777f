"""Each sequence step's engagement, by the API (GET /api/v1/sequences/{id}/stats) and the command line (`einmal
sequence stats NAME`), and a campaign's (`einmal campaign stats`): a sequence of two steps, the first with its
links tracked, sent by a node (in this process, a real PostgreSQL, a real SMTP server on loopback) to three
members; a person's click on the first step's link recorded by the clicks' own statement, a complaint about one
of the second step's messages, and a member's one-click unsubscribe from the first."""

import json
from datetime import UTC, datetime, timedelta

import anyio
import asyncpg
import httpx
import pytest

from service import db
from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from tests.conftest import einmal
from tests.engagement.test_templates import subscriber_id
from tests.sequences.helpers import Stamped, account_and_list, join
from tests.sequences.test_rules import FAST, settled
from tests.support.pipeline import node_settings, recording_server, running_node
from tests.support.web import http_server
from tests.web.test_api import make_key

pytestmark = pytest.mark.anyio

CLICK_URL = "http://127.0.0.1:9/c"
PEOPLE = ["ann@example.com", "bob@example.com", "cy@example.com"]


async def test_each_steps_engagement_by_the_api_and_the_command_line(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id = await account_and_list(conn)
    made = await sequences.create(conn, account_id=account, name="welcome", list_name="news")
    mailing = Mailing.of(node_settings(dsn, 25, click_url=CLICK_URL))
    ids = []
    for position, tracked in ((1, True), (2, False)):
        step = await steps.add(
            conn,
            mailing=mailing,
            account_id=account,
            sequence_id=made.id,
            subject=f"Step {position}",
            from_address="news@example.com",
            text=f"Step {position}: https://example.org/read-{position}",
            track_clicks=tracked,
        )
        ids.append(step.campaign_id)
    first, second = ids
    await join(conn, account, list_id, PEOPLE)
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, click_url=CLICK_URL, **FAST)):
        await settled(conn, ids, 6)
    assert len(received.arrivals) == 6
    ann, bob, cy = [await subscriber_id(conn, who) for who in PEOPLE]
    at = datetime.now(UTC) + timedelta(minutes=1)  # past the 'early' window after the send
    written = await conn.fetchval(
        *db.sql(
            "clicks_record",
            ids=["clk_test_1"],
            accounts=[account],
            campaigns=[first],
            subscribers=[ann],
            links=[1],
            urls=["https://example.org/read-1"],
            ats=[at],
            said=[""],
            counts=[1],
            early_seconds=15,
            burst_seconds=2,
            repeat_seconds=10,
        )
    )
    assert written == 1
    send = await conn.fetchval("SELECT id FROM einmal.sends WHERE campaign_id = $1 AND subscriber_id = $2", second, bob)
    await conn.execute(
        "INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ('arf:1', 'x');"
        "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status) "
        f"VALUES ('arf:1', {account}, {send}, 'complaint', 'abuse')"
    )
    await conn.execute(
        "INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')",
        f"unsubscribe:{account}.{first}.{cy}",
    )

    key = make_key(dsn, "acme")
    async with http_server(dsn) as base, httpx.AsyncClient(timeout=30, base_url=f"{base}/api/v1") as client:
        answer = await client.get(f"/sequences/{made.id}/stats", headers={"Authorization": f"Bearer {key}"})
        missing = await client.get("/sequences/999999/stats", headers={"Authorization": f"Bearer {key}"})
        shown = await client.get("/subscribers/ann@example.com", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    assert missing.status_code == 404
    found = answer.json()
    assert found["sequence_id"] == made.id and found["name"] == "welcome"
    one, two = found["steps"]
    figures = ("delivered", "bounced", "complained", "unsubscribed")
    assert (one["position"], one["campaign_id"], [one[k] for k in figures]) == (1, first, [3, 0, 0, 1])
    assert (two["position"], two["campaign_id"], [two[k] for k in figures]) == (2, second, [3, 0, 1, 0])
    assert one["clicks"]["tracked"] and one["clicks"]["people"] == {"total": 1, "unique": 1}
    assert one["clicks"]["links"][0]["url"] == "https://example.org/read-1"
    assert not two["clicks"]["tracked"] and two["clicks"]["all"] == {"total": 0, "unique": 0}
    assert shown.status_code == 200 and shown.json()["activity"]["last"] == "clicked"

    printed = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "stats", "welcome", "--account", "acme", dsn=dsn)
    )
    assert printed.returncode == 0, printed.stderr
    assert "delivered 3, bounced 0, complained 0, unsubscribed 1" in printed.stdout
    assert "delivered 3, bounced 0, complained 1, unsubscribed 0" in printed.stdout
    assert "https://example.org/read-1" in printed.stdout
    as_json = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "stats", "welcome", "--account", "acme", "--json", dsn=dsn)
    )
    assert json.loads(as_json.stdout) == found
    unknown = await anyio.to_thread.run_sync(
        lambda: einmal("sequence", "stats", "nosuch", "--account", "acme", dsn=dsn)
    )
    assert unknown.returncode != 0 and unknown.stderr.count("\n") == 1 and "Traceback" not in unknown.stderr
    campaign = await anyio.to_thread.run_sync(lambda: einmal("campaign", "stats", str(second), "--json", dsn=dsn))
    assert json.loads(campaign.stdout)["complained"] == 1 and json.loads(campaign.stdout)["delivered"] == 3
    person = await anyio.to_thread.run_sync(
        lambda: einmal("subscribers", "show", "cy@example.com", "--account", "acme", dsn=dsn)
    )
    assert "last activity: unsubscribed\n" in person.stdout and "last delivered: " in person.stdout
