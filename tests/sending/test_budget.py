"""The sending budget every node shares (einmal.send_claim): a cluster-wide rate as a schedule of send
slots, and sliding-window quotas, taken in the claim itself. Several connections claim at once here, as
several nodes would."""

import time

import anyio
import asyncpg
import pytest

from service import db
from tests.support.pipeline import seed

pytestmark = pytest.mark.anyio

CLAIM = "SELECT * FROM einmal.send_claim($1, $2, $3, $4, $5, $6, $7, $8, '{}', '{}', 1, 60, 3600)"
# with per-domain limits: $9 domains, $10 their rates, $11 probes, $12 first pause
CLAIM_DOMAINS = "SELECT * FROM einmal.send_claim($1, $2, $3, 0, 0, 0, 3600, 86400, $4, $5, $6, $7, 3600)"


async def sending_campaign(conn: asyncpg.Connection, recipients: int, suppressed: list[str] = ()) -> int:
    campaign = await seed(conn, [f"r{i}@example.com" for i in range(recipients)], suppressed=suppressed)
    await conn.execute(
        """
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
        SELECT c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id
        FROM einmal.campaigns c JOIN einmal.subscribers s ON s.account_id = c.account_id WHERE c.id = $1""",
        campaign,
    )
    await conn.execute("UPDATE einmal.campaigns SET status = 'sending' WHERE id = $1", campaign)
    return campaign


async def claimers(dsn: str, campaign: int, nodes: int, seconds: float, *limits) -> list[list[float]]:
    """`nodes` connections claiming batches of 50 for `seconds`; each claimed row's slot (epoch seconds)."""
    slots: list[list[float]] = [[] for _ in range(nodes)]
    conns = [await asyncpg.connect(dsn) for _ in range(nodes)]
    end = time.monotonic() + seconds  # one window for all: a connection slow to open does not stretch it

    async def node(i: int) -> None:
        while time.monotonic() < end:
            rows = await conns[i].fetch(CLAIM, campaign, f"node-{i}", 50, *limits)
            slots[i].extend(r["slot_at"].timestamp() if r["slot_at"] else 0.0 for r in rows if r["status"] == "claimed")
            if not rows:
                await anyio.sleep(0.02)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(nodes):
                tg.start_soon(node, i)
    finally:
        for conn in conns:
            await conn.close()
    return slots


def worst_window(slots: list[float], width: float = 1.0) -> int:
    """The most slots in any window of `width` seconds."""
    slots, worst, first = sorted(slots), 0, 0
    for last, t in enumerate(slots):
        while t - slots[first] >= width:
            first += 1
        worst = max(worst, last - first + 1)
    return worst


async def test_three_claimers_share_one_rate(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await sending_campaign(conn, 2000)
    slots = await claimers(dsn, campaign, 3, 2.5, 100.0, 0, 0, 3600.0, 86400.0)
    every = [t for node in slots for t in node]
    assert worst_window(every) <= 101, f"{worst_window(every)} slots in one second at a rate of 100"
    # claims reach at most one second of slots ahead, so 2.5 s of claiming gives 2.5-3.5 s of slots
    assert 200 <= len(every) <= 352, len(every)
    assert len(set(every)) == len(every), "no two rows share a slot"


async def test_the_hour_quota_is_spent_exactly_once_across_claimers(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await sending_campaign(conn, 400, suppressed=["r7@example.com"])
    slots = await claimers(dsn, campaign, 3, 1.0, 0.0, 120, 0, 3600.0, 86400.0)
    assert sum(map(len, slots)) == 120
    counts = dict(
        await conn.fetch("SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign)
    )
    assert counts["claimed"] == 120 and counts.get("suppressed", 0) <= 1, counts  # suppressed rows are free
    assert await conn.fetchval("SELECT einmal.quota_used('hour', 3600)") == 120


async def test_a_quota_window_frees_what_it_counted_once_it_has_passed(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await sending_campaign(conn, 100)
    first = await conn.fetch(CLAIM, campaign, "n", 100, 0.0, 0, 30, 3600.0, 2.0)
    assert len(first) == 30
    assert await conn.fetch(CLAIM, campaign, "n", 100, 0.0, 0, 30, 3600.0, 2.0) == []
    await anyio.sleep(2.2)  # the window (2 s) and one bucket (1/60 of it) later
    assert len(await conn.fetch(CLAIM, campaign, "n", 100, 0.0, 0, 30, 3600.0, 2.0)) == 30


async def test_without_limits_the_claim_is_the_plain_one(conn: asyncpg.Connection) -> None:
    campaign = await sending_campaign(conn, 10, suppressed=["r3@example.com"])
    rows = await conn.fetch(CLAIM, campaign, "n", 100, 0.0, 0, 0, 3600.0, 86400.0)
    assert sorted(r["status"] for r in rows) == ["claimed"] * 9 + ["suppressed"]
    assert {(r["delay"], r["slot_at"]) for r in rows} == {(0.0, None)}
    assert await conn.fetchval("SELECT count(*) FROM einmal.send_quota") == 0
    assert await conn.fetchval("SELECT next_slot FROM einmal.send_pace") is not None


async def test_a_claim_holds_at_most_two_seconds_of_slots_and_given_back_rows_leave_the_quota(
    conn: asyncpg.Connection,
) -> None:
    """What a node that dies holding its claim wastes: under a rate, no more than the slots a claim may
    take ahead (well within the node timeout); under a quota, nothing once its rows are returned."""
    campaign = await sending_campaign(conn, 100)
    first = await conn.fetch(CLAIM, campaign, "dead/1", 100, 10.0, 0, 0, 3600.0, 86400.0)
    second = await conn.fetch(CLAIM, campaign, "dead/1", 100, 10.0, 0, 0, 3600.0, 86400.0)
    assert len(first) == len(second) == 10
    assert await conn.fetch(CLAIM, campaign, "dead/1", 100, 10.0, 0, 0, 3600.0, 86400.0) == []
    assert max(r["delay"] for r in second) < 2.0
    charged = await conn.fetch(CLAIM, campaign, "other/1", 100, 0.0, 50, 0, 3600.0, 86400.0)
    assert len(charged) == 50 and await conn.fetchval("SELECT einmal.quota_used('hour', 3600)") == 50
    returned = [r["id"] for r in charged[:20]]
    await conn.execute(*db.sql("send_release", ids=returned, token="other/1", campaign_ids=[campaign] * 20))
    assert await conn.fetchval("SELECT einmal.quota_used('hour', 3600)") == 30
    rescued = await conn.fetchrow(
        *db.sql("node_rescue", node_timeout_seconds=30.0, in_doubt="hold", dead_tokens=["other/1"], max_attempts=5)
    )
    assert rescued["queued"] == 30 + 20  # and the rate's 20, whose token has no node row either
    assert await conn.fetchval("SELECT einmal.quota_used('hour', 3600)") == 0
