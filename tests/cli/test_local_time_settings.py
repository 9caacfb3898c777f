"""A campaign's local send time and an account's time zone, from the command line and the API: a wrong value is
one line and nothing written; `campaign status` says how many rows wait for their local time."""

import asyncpg
import httpx
import pytest

from tests.conftest import einmal
from tests.support.web import http_server, subscriber
from tests.web.test_api import auth, make_key

pytestmark = pytest.mark.anyio

CREATE = "campaign create --account acme --name n --subject s --from news@example.com --text hi".split()


async def test_the_account_time_zone_and_the_local_time_are_checked_and_kept(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account_id = (await subscriber(conn))[0]
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", account_id)
    await conn.execute('UPDATE einmal.subscribers SET attributes = \'{"time_zone": "Asia/Tokyo"}\'')
    before = await conn.fetchval("SELECT count(*) FROM einmal.campaigns")
    cases = {
        ("accounts", "set", "acme", "--time-zone", "Mars/Olympus"): "einmal: time_zone 'Mars/Olympus': no time zone",
        ("accounts", "set", "acme", "--time-zone", "a\nb"): "einmal: --time-zone must not contain line breaks",
        (*CREATE, "--local-time", "25:00"): "einmal: --local-time '25:00': a time of day from 00:00 to 23:59",
        (*CREATE, "--local-time", "9am"): "einmal: --local-time '9am': a time of day",
        (*CREATE, "--local-time", "9:00"): "einmal: --local-time '9:00': a time of day",
    }
    for args, expected in cases.items():
        result = einmal(*args, dsn=dsn)
        assert result.returncode == 1 and result.stderr.startswith(expected), (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert await conn.fetchval("SELECT time_zone FROM einmal.accounts") == "UTC"
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == before

    done = einmal("accounts", "set", "acme", "--time-zone", "Europe/Berlin", dsn=dsn)
    assert done.returncode == 0 and done.stdout.endswith(", time zone Europe/Berlin\n"), done.stderr
    made = einmal(*CREATE, "--local-time", "09:00", dsn=dsn)
    assert made.returncode == 0, made.stderr
    campaign = int(made.stdout.split()[-1])
    assert str(await conn.fetchval("SELECT local_time FROM einmal.campaigns WHERE id = $1", campaign)) == "09:00:00"

    # started an hour ago; its rows (made here as a build would) wait three hours more
    await conn.execute(
        "UPDATE einmal.campaigns SET status = 'sending', started_at = now() - interval '1 hour' WHERE id = $1",
        campaign,
    )
    built = einmal("campaign", "status", str(campaign), dsn=dsn)
    assert "at 09:00 local time" in built.stdout, built.stdout
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, next_attempt_at)"
        " SELECT $1::bigint, account_id, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id,"
        " now() + interval '3 hours 30 seconds'"
        " FROM einmal.subscribers",
        campaign,
    )
    shown = einmal("campaign", "status", str(campaign), dsn=dsn)
    assert "at 09:00 local time: 2 wait for it, the next due " in shown.stdout and "(in 3 h)" in shown.stdout, (
        shown.stdout
    )
    as_json = einmal("campaign", "status", str(campaign), "--json", dsn=dsn)
    assert '"waiting_for_local_time": 2' in as_json.stdout and '"local_time": "09:00"' in as_json.stdout


async def test_the_api_takes_a_local_time_and_the_accounts_time_zone(conn: asyncpg.Connection, dsn: str) -> None:
    account_id = (await subscriber(conn))[0]
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'default')", account_id)
    key = make_key(dsn, "acme")
    draft = {"name": "n", "subject": "s", "from": "news@example.com", "text": "hi"}
    async with http_server(dsn) as base, httpx.AsyncClient() as client:
        wrong = await client.post(f"{base}/api/v1/campaigns", json={**draft, "local_time": "24:00"}, headers=auth(key))
        made = await client.post(f"{base}/api/v1/campaigns", json={**draft, "local_time": "07:30"}, headers=auth(key))
        changed = await client.patch(
            f"{base}/api/v1/campaigns/{made.json()['id']}", json={"local_time": "08:15"}, headers=auth(key)
        )
        plain = await client.post(f"{base}/api/v1/campaigns", json=draft, headers=auth(key))
        zone_wrong = await client.patch(f"{base}/api/v1/account", json={"time_zone": "Nowhere"}, headers=auth(key))
        zone = await client.patch(f"{base}/api/v1/account", json={"time_zone": "America/Chicago"}, headers=auth(key))
        shown = await client.get(f"{base}/api/v1/account", headers=auth(key))
    assert wrong.status_code == 422 and "local_time '24:00': a time of day" in wrong.text, wrong.text
    assert (made.status_code, made.json()["local_time"]) == (201, "07:30"), made.text
    assert (changed.status_code, changed.json()["local_time"]) == (200, "08:15"), changed.text
    assert (plain.status_code, plain.json()["local_time"]) == (201, None), plain.text
    assert zone_wrong.status_code == 422 and "no time zone of that name" in zone_wrong.text, zone_wrong.text
    assert zone.status_code == 200 and shown.json()["time_zone"] == "America/Chicago", (zone.text, shown.text)
    assert await conn.fetchval("SELECT time_zone FROM einmal.accounts WHERE id = $1", account_id) == "America/Chicago"
