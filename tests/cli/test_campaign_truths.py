"""What einmal shows of a campaign is true and says what to do next: messages in doubt are named with the
command that settles them (status, list, the API, the node's log), and a campaign due while no node is alive
says that nothing sends until one runs."""

import json

import asyncpg
import httpx
import pytest

from actors import scheduler
from tests.cli.test_campaign_commands import seed_campaign
from tests.conftest import einmal
from tests.support.web import http_server, token
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

NO_UNSUBSCRIBE_CHECK: dict[str, str] = {}


async def test_a_campaign_sent_with_messages_in_doubt_says_so_and_how_to_settle_them(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("in_doubt", "in_doubt", "in_doubt"))
    status = einmal("campaign", "status", str(campaign), dsn=dsn).stdout
    assert f"campaign {campaign} 'spring': sent (3 in doubt)\n" in status
    assert (
        f"  next: 3 messages in doubt (the relay may or may not have taken them): decide with "
        f"`einmal reconcile {campaign}`\n"
    ) in status
    printed = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert printed["next_step"].endswith(f"`einmal reconcile {campaign}`")
    listing = einmal("campaign", "list", dsn=dsn).stdout.splitlines()
    assert f"sent (3 in doubt: einmal reconcile {campaign})" in listing[1]
    key = make_key(dsn, "acme", "--scope", "read")
    async with http_server(dsn) as url, httpx.AsyncClient(base_url=f"{url}/api/v1") as client:
        answer = (await client.get(f"/campaigns/{campaign}", headers=auth(key))).json()
    assert answer["next_step"] == printed["next_step"] and answer["counts"]["in_doubt"] == 3


async def test_a_campaign_that_ends_with_messages_in_doubt_is_finished_with_their_count(
    conn: asyncpg.Connection,
) -> None:
    """What the scheduler's finish returns, and logs as a warning naming `einmal reconcile`."""
    campaign = await seed_campaign(conn, "sending", sends=("sent", "in_doubt"))
    await conn.execute("UPDATE einmal.campaigns SET recipients_built_at = now() WHERE id = $1", campaign)
    finished = await scheduler.finish(conn, campaign)
    assert finished is not None and finished["in_doubt"] == 1
    assert await scheduler.finish(conn, campaign) is None  # it is sent: the compare-and-set finds nothing


async def test_approving_with_no_node_alive_says_nothing_sends_until_one_runs(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn)
    approved = einmal("campaign", "approve", str(campaign), dsn=dsn)
    assert approved.stdout == (
        f"campaign {campaign} approved; due now, but no node is running: start one with `einmal run`\n"
    ), approved.stderr
    status = einmal("campaign", "status", str(campaign), dsn=dsn).stdout
    assert "but no node is running: start one with `einmal run`" in status
    assert "a running node starts it within a tick" not in status
    # a node's heartbeat a moment ago: it is alive, and the campaign starts at its next tick
    await conn.execute("INSERT INTO einmal.nodes (id) VALUES ('node-a')")
    status = einmal("campaign", "status", str(campaign), dsn=dsn).stdout
    assert "a running node starts it within a tick" in status and "no node is running" not in status
    # its heartbeat older than EINMAL_NODE_TIMEOUT_SECONDS: dead
    await conn.execute("UPDATE einmal.nodes SET heartbeat_at = now() - interval '10 minutes'")
    printed = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert (printed["nodes_running"], printed["next_step"]) == (
        0,
        "no node is running, so nothing is sent: start one with `einmal run`",
    )


async def test_status_counts_the_one_click_unsubscribes_of_the_campaign_and_no_other(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "sent", "sent"))
    other = await seed_campaign(conn, "sent", sends=("sent",))
    account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
    rows = await conn.fetch("SELECT campaign_id, subscriber_id FROM einmal.sends ORDER BY id")
    async with http_server(dsn) as url, httpx.AsyncClient(base_url=url) as client:
        for row in rows[:2] + rows[3:]:  # two of the campaign's recipients, and one of the other campaign's
            link = f"/unsubscribe?token={token((account, row['campaign_id'], row['subscriber_id']))}"
            answer = await client.post(link, data={"List-Unsubscribe": "One-Click"})
            assert answer.status_code == 200, answer.text
    printed = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert printed["unsubscribed"] == 2 and printed["recipients_estimate"] is None  # started: no estimate
    assert "  unsubscribed     2\n" in einmal("campaign", "status", str(campaign), dsn=dsn).stdout
    assert json.loads(einmal("campaign", "status", str(other), "--json", dsn=dsn).stdout)["unsubscribed"] == 1


async def test_a_draft_has_no_time_until_given_one_and_an_estimate_of_its_recipients(
    conn: asyncpg.Connection, dsn: str, tmp_path
) -> None:
    path = tmp_path / "people.csv"
    path.write_text(
        "email,list\nann@example.org,news\nANN@example.org,news\nbob@example.org,news|vip\n"
        "cy@example.org,vip\ndee@example.org,news\n"
    )
    assert einmal("subscribers", "import", "--account", "acme", "--create-account", str(path), dsn=dsn).returncode == 0
    assert einmal("suppress", "--account", "acme", "dee@example.org", dsn=dsn).returncode == 0
    made = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--list",
        "news",
        "--name",
        "n",
        "--subject",
        "S",
        "--from",
        "news@example.org",
        "--text",
        "Hi",
        dsn=dsn,
        env=NO_UNSUBSCRIBE_CHECK,
    )
    assert made.returncode == 0, made.stderr
    campaign = int(made.stdout.strip())
    printed = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    # ann (one mailbox, two spellings) and bob; dee is suppressed, cy is not on news
    assert (printed["scheduled_for"], printed["recipients_estimate"]) == (None, 2)
    table = einmal("campaign", "status", str(campaign), dsn=dsn).stdout
    assert "  starts when approved\n" in table and "  about 2 recipients now" in table
    key = make_key(dsn, "acme", "--scope", "read")
    async with http_server(dsn) as url, httpx.AsyncClient(base_url=f"{url}/api/v1") as client:
        listed = (await client.get("/campaigns", headers=auth(key))).json()["campaigns"]
        status = (await client.get(f"/campaigns/{campaign}", headers=auth(key))).json()
    assert listed[0]["scheduled_for"] is None and status["recipients_estimate"] == 2


async def test_a_subscriber_is_put_with_no_body_at_all(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    key = make_key(dsn, "acme")
    async with http_server(dsn) as url, httpx.AsyncClient(base_url=f"{url}/api/v1") as client:
        made = await client.put("/subscribers/ann@example.org", headers=auth(key))
        again = await client.put("/subscribers/ann@example.org", headers=auth(key))
    assert (made.status_code, again.status_code) == (201, 200), made.text
    assert (made.json()["email"], made.json()["name"], made.json()["attributes"]) == ("ann@example.org", "", {})
