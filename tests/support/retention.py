"""Retention's figures on a real PostgreSQL: `python -m tests.support.retention` (make retention).

- the migration of an einmal.sends of today's shape (1,000,000 rows by default) to the partitioned table:
  each step's time and the lock it holds (docs/design.md#retention);
- a prune's time for a campaign of 1,000 and of 100,000 rows, and their ratio: a partition dropped is
  catalog work, whatever its rows.
The suite runs bounded versions (tests/core/test_sends_partitioned.py); this prints the long measurement.
"""

import argparse
import sys
import time

import anyio
import asyncpg

from service import db
from service.campaigns import retention
from service.db.migrate import migrate

FIRST = 50  # the first migration of the partitioned table (0050_bounce_campaign.sql)
STEPS = {
    50: "0050 bounces.campaign_id filled (row locks on bounces)",
    51: "0051 CHECK … NOT VALID (ACCESS EXCLUSIVE, an instant)",
    52: "0052 VALIDATE (SHARE UPDATE EXCLUSIVE: writes go on)",
    53: "0053 rename, parent, attach (ACCESS EXCLUSIVE, catalog only)",
    54: "0054 campaign_counts, pruned_at",
}


async def seed_old_shape(conn: asyncpg.Connection, campaigns: int, rows: int) -> None:
    """Campaigns with `rows` send rows each, in einmal.sends as migrations below 0050 left it, some bounced."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute(
        """
        INSERT INTO einmal.subscribers (account_id, email, email_lower)
        SELECT $1, 'r' || i || '@example.org', 'r' || i || '@example.org' FROM generate_series(1, $2) AS i""",
        account,
        rows,
    )
    first = await conn.fetchval("SELECT min(id) FROM einmal.subscribers")
    for _ in range(campaigns):
        campaign = await conn.fetchval(
            "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, "
            "sent_at) VALUES ($1, 'old', 's', 'news@example.org', 'b', '{}', 'sent', now() - interval '90 days') "
            "RETURNING id",
            account,
        )
        await conn.execute(
            """
            INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                                      attempts, sent_at, last_reply)
            SELECT $1, $2, s, 'r' || (s - $3 + 1) || '@example.org', 'r' || (s - $3 + 1) || '@example.org',
                   'campaign:' || $1::bigint || ':' || s,
                   (ARRAY['sent', 'sent', 'sent', 'failed', 'suppressed', 'in_doubt'])[1 + s % 6],
                   1, now(), '250 ok'
            FROM generate_series($3::bigint, $3::bigint + $4 - 1) AS s""",
            campaign,
            account,
            first,
            rows,
        )
        await conn.execute(
            """
            WITH e AS (INSERT INTO einmal.inbound_events (event_id, payload_hash)
                       SELECT 'seed:' || id, 'h' FROM einmal.sends WHERE campaign_id = $1 AND id % 997 = 0
                       RETURNING event_id)
            INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status)
            SELECT e.event_id, $2, substr(e.event_id, 6)::bigint, 'hard', '5.1.1' FROM e""",
            campaign,
            account,
        )


async def fresh(server: str, name: str) -> str:
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return server.rsplit("/", 1)[0] + f"/{name}"


async def timed_migration(conn: asyncpg.Connection) -> dict[int, float]:
    """Apply 0050 on, one at a time: seconds each."""
    took = {}
    for version in sorted(v for v, _, _ in db.migrations() if v >= FIRST):
        start = time.perf_counter()
        await migrate(conn, before=version + 1)
        took[version] = time.perf_counter() - start
    return took


async def timed_prune(conn: asyncpg.Connection, rows: int) -> float:
    """Seconds to prune a sent campaign of `rows` rows in its own partition."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('p' || clock_timestamp()) RETURNING id")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, "
        "sent_at) VALUES ($1, 'p', 's', 'news@example.org', 'b', '{}', 'sending', now()) RETURNING id",
        account,
    )
    await conn.execute(
        """
        WITH s AS (INSERT INTO einmal.subscribers (account_id, email, email_lower)
                   SELECT $2, 'p' || i || '@example.org', 'p' || i || '@example.org'
                   FROM generate_series(1, $3) AS i RETURNING id, email)
        INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)
        SELECT $1, $2, s.id, s.email, s.email, 'campaign:' || $1::bigint || ':' || s.id, 'sent' FROM s""",
        campaign,
        account,
        rows,
    )
    await conn.execute("UPDATE einmal.campaigns SET recipients_built_at = now() WHERE id = $1", campaign)
    assert await conn.fetchrow(*db.sql("campaign_finish", campaign_id=campaign)) is not None  # the counts, kept here
    await conn.execute("CHECKPOINT")  # the rows on disk, as a campaign finished days ago has them
    start = time.perf_counter()
    [candidate] = await retention.candidates(conn, older_than_seconds=0, campaign_id=campaign)
    done = await retention.prune(conn, candidate=candidate)
    took = time.perf_counter() - start
    assert (done.how, done.rows) == ("partition dropped", rows), done
    return took


async def main(server: str, rows: int, campaigns: int) -> None:
    dsn = await fresh(server, "einmal_retention_bench")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, before=FIRST)
        start = time.perf_counter()
        await seed_old_shape(conn, campaigns, rows // campaigns)
        size = await conn.fetchval("SELECT pg_size_pretty(pg_total_relation_size('einmal.sends'))")
        print(f"seeded {rows:,} send rows of today's shape in {time.perf_counter() - start:.1f} s; einmal.sends {size}")
        for version, took in (await timed_migration(conn)).items():
            print(f"  {STEPS.get(version, f'{version:04d}')}: {took:.2f} s")
        kept = await conn.fetchval("SELECT count(*) FROM einmal.sends_legacy")
        print(f"rows in einmal.sends_legacy after the migration: {kept:,}")
        legacy = await conn.fetchval("SELECT min(id) FROM einmal.campaigns")
        start = time.perf_counter()
        [candidate] = await retention.candidates(conn, older_than_seconds=0, campaign_id=legacy)
        done = await retention.prune(conn, candidate=candidate)
        print(
            f"prune of a campaign of {done.rows:,} rows from before the migration ({done.how}): "
            f"{time.perf_counter() - start:.2f} s"
        )
        small, big = [], []
        for _ in range(3):  # alternately, each figure the median of three
            small.append(await timed_prune(conn, 1_000))
            big.append(await timed_prune(conn, 100_000))
        small, big = sorted(small)[1], sorted(big)[1]
        print(
            f"prune of a sent campaign: 1,000 rows {small * 1000:.0f} ms, 100,000 rows {big * 1000:.0f} ms, "
            f"ratio {big / small:.2f}"
        )
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.support.retention", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="send rows of today's shape (default 1,000,000)")
    parser.add_argument("--campaigns", type=int, default=10, help="campaigns they belong to (default 10)")
    options = parser.parse_args()
    from bench.database import server_url

    anyio.run(main, server_url()[0], options.rows, options.campaigns)
    sys.exit(0)
