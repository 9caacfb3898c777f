"""Local send times (docs/guide/campaigns.md#local-send-times): each row of a campaign made with a local time gets
its own not-before from its subscriber's time zone (else the account's), and the claim takes no row before it,
in its order, once — also across a node SIGKILLed half-way."""

import json
import signal
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import asyncpg
import pytest

from actors.builder import Builder
from service import db
from service.campaigns import status
from tests.support.claims import claim_args
from tests.support.pipeline import TAKEOVER_TIMEOUT, node_env, seed, start_node, stop_node
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio


async def zoned(conn: asyncpg.Connection, zones: dict[str, object], local: str, started: str | datetime) -> int:
    """A campaign to one subscriber per address of `zones`, each with that `time_zone` attribute (None: none),
    made with the local time `local`, started at `started` (not built yet); its id."""
    campaign = await seed(conn, list(zones))
    for email, zone in zones.items():
        if zone is not None:
            await conn.execute(
                "UPDATE einmal.subscribers SET attributes = $2::jsonb WHERE email = $1",
                email,
                json.dumps({"time_zone": zone}),
            )
    await conn.execute(
        "UPDATE einmal.campaigns SET status = 'sending', local_time = $2::time, started_at = $3 WHERE id = $1",
        campaign,
        time.fromisoformat(local),
        datetime.fromisoformat(started) if isinstance(started, str) else started,
    )
    return campaign


async def not_before(conn: asyncpg.Connection, campaign: int) -> dict[str, datetime]:
    rows = await conn.fetch("SELECT email, next_attempt_at FROM einmal.sends WHERE campaign_id = $1", campaign)
    return {r["email"]: r["next_attempt_at"].astimezone(UTC) for r in rows}


def expected(local: str, zone: str, started: datetime) -> datetime:
    """The first moment at or after `started` at which the clock in `zone` shows `local`, by Python's zoneinfo."""
    day = started.astimezone(ZoneInfo(zone)).date()
    for offset in (0, 1):
        at = datetime.combine(day + timedelta(days=offset), time.fromisoformat(local), ZoneInfo(zone))
        if at >= started:
            return at.astimezone(UTC)
    raise AssertionError("within a day")


async def test_each_row_gets_nine_in_its_own_zone_across_a_dst_change_and_a_bad_zone_falls_back(
    conn: asyncpg.Connection, the_builder: Builder
) -> None:
    # Saturday 2027-03-27 10:00 UTC; Europe/Berlin moves to summer time that night (CET +1 -> CEST +2)
    started = "2027-03-27T10:00:00+00:00"
    zones = {
        "ny@example.com": "America/New_York",  # already summer time (since 14 March): 09:00 EDT today
        "tokyo@example.com": "Asia/Tokyo",  # 19:00 there: tomorrow's 09:00
        "plain@example.com": None,  # the account's zone
        "mars@example.com": "Mars/Olympus",  # no such zone: the account's, counted
        "number@example.com": 5,  # not a zone name either
        "posix@example.com": "UTC+3",  # PostgreSQL reads it as a POSIX zone, but it is no name it knows
    }
    campaign = await zoned(conn, zones, "09:00", started)
    await conn.execute("UPDATE einmal.accounts SET time_zone = 'Europe/Berlin'")
    assert await the_builder.build(campaign, chunk=2) == len(zones)
    berlin = datetime(2027, 3, 28, 7, 0, tzinfo=UTC)  # 09:00 CEST on Sunday, not 08:00 (a day after 09:00 CET)
    assert await not_before(conn, campaign) == {
        "ny@example.com": datetime(2027, 3, 27, 13, 0, tzinfo=UTC),
        "tokyo@example.com": datetime(2027, 3, 28, 0, 0, tzinfo=UTC),
        "plain@example.com": berlin,
        "mars@example.com": berlin,
        "number@example.com": berlin,
        "posix@example.com": berlin,
    }
    snap = await status.snapshot(conn, campaign_id=campaign)
    assert snap.zone_fallbacks == 3, "a bad time_zone attribute is counted; a missing one is not"
    assert snap.local_time == "09:00"
    assert await the_builder.build(campaign) == 0
    assert (await status.snapshot(conn, campaign_id=campaign)).zone_fallbacks == 3, "a build again counts nothing"


async def test_the_autumn_change_and_a_time_already_past_today(conn: asyncpg.Connection, the_builder: Builder) -> None:
    # Sunday 2027-10-31 00:30 UTC = 02:30 CEST, before Berlin goes back to CET at 03:00 CEST
    zones = {"berlin@example.com": "Europe/Berlin", "utc@example.com": "UTC", "la@example.com": "America/Los_Angeles"}
    started = datetime(2027, 10, 31, 0, 30, tzinfo=UTC)
    campaign = await zoned(conn, zones, "00:15", started)
    await the_builder.build(campaign)
    found = await not_before(conn, campaign)
    assert found == {email: expected("00:15", zone, started) for email, zone in zones.items()}
    assert found["berlin@example.com"] == datetime(2027, 10, 31, 23, 15, tzinfo=UTC)  # 00:15 CET on Monday
    assert found["utc@example.com"] == datetime(2027, 11, 1, 0, 15, tzinfo=UTC)  # past today: tomorrow's


async def test_a_campaign_without_a_local_time_is_due_at_once(conn: asyncpg.Connection, the_builder: Builder) -> None:
    campaign = await seed(conn, ["a@example.com", "b@example.com"])
    await conn.execute('UPDATE einmal.subscribers SET attributes = \'{"time_zone": "Nowhere/Else"}\'')
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending', started_at = now() WHERE id = $1", campaign)
    await the_builder.build(campaign)
    assert await conn.fetchval(
        "SELECT array_agg(DISTINCT next_attempt_at) = '{-infinity}' FROM einmal.sends WHERE campaign_id = $1", campaign
    )
    snap = await status.snapshot(conn, campaign_id=campaign)
    assert (snap.local_time, snap.waiting, snap.zone_fallbacks, snap.local) == (None, 0, 0, None)


# zones a whole number of hours from UTC, none with summer time. The campaign started three hours ago, its local
# time the time of day half an hour ago in UTC: that time came 0.5, 1.5 and 2.5 hours ago in the first three
# (UTC, UTC+1, UTC+2), and comes in 2.5, 4.5 and 17.5 hours in the others (UTC-3, UTC-5, UTC+6)
DUE, LATER = ("UTC", "Etc/GMT-1", "Etc/GMT-2"), ("Etc/GMT+3", "Etc/GMT+5", "Etc/GMT-6")


async def started_three_hours_ago(conn: asyncpg.Connection, addresses: dict[str, str]) -> tuple[int, datetime]:
    """A campaign started three hours ago, its local time half an hour ago in UTC; its id and its start."""
    now = await conn.fetchval("SELECT date_trunc('minute', now())")
    campaign = await zoned(conn, addresses, (now - timedelta(minutes=30)).astimezone(UTC).strftime("%H:%M"), now)
    started = now - timedelta(hours=3)
    await conn.execute("UPDATE einmal.campaigns SET started_at = $2 WHERE id = $1", campaign, started)
    return campaign, started


async def test_rows_are_claimed_once_their_time_has_come_in_its_order_and_once(
    conn: asyncpg.Connection, the_builder: Builder
) -> None:
    zones = {f"z{i}-{n}@example.com": zone for i, zone in enumerate(DUE + LATER) for n in range(5)}
    campaign, started = await started_three_hours_ago(conn, zones)
    local = await conn.fetchval("SELECT to_char(local_time, 'HH24:MI') FROM einmal.campaigns WHERE id = $1", campaign)
    await the_builder.build(campaign)
    found = await not_before(conn, campaign)
    assert found == {email: expected(local, zone, started) for email, zone in zones.items()}
    now = await conn.fetchval("SELECT now()")
    due = {email for email, at in found.items() if at <= now}
    assert due == {email for email, zone in zones.items() if zone in DUE}
    assert all(found[e] > now + timedelta(hours=1) for e in set(zones) - due), "the others wait for hours"

    snap = await status.snapshot(conn, campaign_id=campaign)
    assert snap.waiting == len(zones) - len(due)
    assert snap.next_due == min(found[e] for e in set(zones) - due)
    assert snap.local is not None and f"{snap.waiting} wait for it" in snap.local

    claimed: list[asyncpg.Record] = []
    for token in ("n1/1", "n2/1", "n1/1"):  # two nodes, again and again: only the due rows, each once
        claimed += await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, token, batch_size=7)))
    assert sorted(r["email"] for r in claimed) == sorted(due)
    order = [found[r["email"]] for r in claimed]
    assert order == sorted(order), "claimed in their order"

    # time passes (the waiting rows' times are moved, not the clock): each is claimed once, in its order
    await conn.execute(
        "UPDATE einmal.sends SET next_attempt_at = next_attempt_at - interval '1 day' "
        "WHERE campaign_id = $1 AND status = 'queued'",
        campaign,
    )
    later = await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "n2/1", batch_size=100)))
    assert sorted(r["email"] for r in later) == sorted(set(zones) - due)
    assert [found[r["email"]] for r in later] == sorted(found[r["email"]] for r in later)
    assert not await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "n1/1", batch_size=100)))


async def test_the_claim_reads_no_waiting_row(conn: asyncpg.Connection, the_builder: Builder) -> None:
    # 2,000 rows waiting for hours, 10 due: the claim's plan reads the due rows' index entries, not the others
    zones = {f"w{i:04}@example.com": LATER[i % 3] for i in range(2000)}
    zones |= {f"d{i}@example.com": "UTC" for i in range(10)}
    campaign, _ = await started_three_hours_ago(conn, zones)
    await the_builder.build(campaign)
    await conn.execute("ANALYZE einmal.sends")
    picked = await conn.fetch(
        """EXPLAIN (ANALYZE, FORMAT JSON)
        SELECT s.id FROM einmal.sends s
        WHERE s.campaign_id = $1 AND s.status = 'queued' AND s.next_attempt_at <= now()
        ORDER BY s.next_attempt_at, s.id LIMIT 100""",
        campaign,
    )
    plan = json.loads(picked[0][0])[0]["Plan"]
    scans = [p for p in walk(plan) if "Scan" in p["Node Type"]]
    assert scans and all(p.get("Index Name", "").startswith("sends_c") for p in scans), scans
    assert sum(p["Actual Rows"] for p in scans) == 10, scans
    claimed = await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "n/1", batch_size=100)))
    assert len(claimed) == 10


def walk(plan: dict) -> list[dict]:
    return [plan, *(p for child in plan.get("Plans", []) for p in walk(child))]


async def test_a_node_killed_half_way_sends_each_due_row_once_and_none_before_its_time(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    connections = 4
    zones = {f"k{i:03}@example.com": (DUE + LATER)[i % 6] for i in range(300)}
    campaign, _ = await started_three_hours_ago(conn, zones)
    due = {email for email, zone in zones.items() if zone in DUE}
    with FaultServer(seed=7) as server:
        server.inject("data_end", None, delay=0.02, probability=0.5)
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS=str(connections),
            EINMAL_BATCH_SIZE="20",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
        )
        victim = start_node({**env, "EINMAL_NODE_ID": "victim"}, tmp_path / "victim.log")
        try:
            with anyio.fail_after(60):
                await server.arrived(40)
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait()
        survivor = start_node({**env, "EINMAL_NODE_ID": "survivor"}, tmp_path / "survivor.log")
        try:
            with anyio.fail_after(90):
                while await settled(conn, campaign) < len(due):
                    await anyio.sleep(0.2)
            await anyio.sleep(1.5)  # a few more claims: none may take a row whose time has not come
            received = [m.message_id for m in server.messages]
            assert sorted(received) == sorted(set(received)), "nothing received twice"
            assert {m.rcpt_tos[0] for m in server.messages} <= due, "nothing before its time"
            rows = await conn.fetch(
                "SELECT email, status, claimed_by FROM einmal.sends WHERE campaign_id = $1", campaign
            )
            waiting = {r["email"] for r in rows if r["status"] == "queued" and r["claimed_by"] is None}
            assert waiting == set(zones) - due
            in_doubt = [r for r in rows if r["status"] == "in_doubt"]
            assert len(in_doubt) <= connections
            assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "sending"

            # their time comes: each is sent once, and the campaign is done
            await conn.execute(
                "UPDATE einmal.sends SET next_attempt_at = now() - interval '1 second' "
                "WHERE campaign_id = $1 AND status = 'queued'",
                campaign,
            )
            with anyio.fail_after(60):
                while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent":
                    await anyio.sleep(0.2)
        finally:
            assert await stop_node(survivor) == 0, (tmp_path / "survivor.log").read_text()
        received = [m.message_id for m in server.messages]
        recipients = [m.rcpt_tos[0] for m in server.messages]
    assert sorted(received) == sorted(set(received)), "nothing received twice"
    final = dict(
        await conn.fetch("SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY 1", campaign)
    )
    assert set(final) <= {"sent", "in_doubt"} and sum(final.values()) == len(zones), final
    assert set(zones) - due <= set(recipients), "every waiting row sent once its time came"


async def settled(conn: asyncpg.Connection, campaign: int) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status IN ('sent', 'in_doubt')", campaign
    )
