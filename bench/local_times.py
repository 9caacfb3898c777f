"""The claim's cost with rows waiting for their local send time (docs/design.md#recipient-build, "Local send
times"): a campaign whose 1,000,000 rows wait for their time, spread over the next 24 hours, but for --due of
them, which are claimed in batches of 100 until none is left; against a campaign of the same due rows and none
waiting, a claim of each in turn. Each claim timed (sql/queries/send_claim_batch.sql, no budget), the first as a
warm-up left out; and a claim that finds nothing due, in each.

    python -m bench.local_times [--rows 1000000] [--due 20000]
"""

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

import anyio
import asyncpg

from bench import database
from bench.report import row
from service import db
from tests.support.claims import claim_args

BATCH = 100

SEED = """
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ('bench') RETURNING id
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT a.id, 'one' FROM a RETURNING id
)
INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
SELECT a.id, 'user' || i || '@example.com', 'user' || i || '@example.com', 'User ' || i
FROM a, generate_series(1, $1) AS i
"""
CAMPAIGN = """
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status, started_at,
                              local_time, recipients_built_at)
SELECT a.id, $1, 's', 'news@example.com', 't', (SELECT array_agg(id) FROM einmal.lists), 'sending', now(),
       '09:00', now()
FROM einmal.accounts AS a
RETURNING id
"""
# the first $2 subscribers' rows due a minute ago; the others, up to $3, waiting over the next 24 hours
ROWS = """
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, next_attempt_at)
SELECT $1::bigint, s.account_id, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id,
       CASE WHEN s.n <= $2 THEN now() - interval '1 minute'
            ELSE now() + interval '1 hour' + (s.n % 1440) * interval '1 minute' END
FROM (SELECT id, account_id, email, email_lower, row_number() OVER (ORDER BY id) AS n FROM einmal.subscribers) AS s
WHERE s.n <= $3
"""


@dataclass
class Claims:
    waiting: int
    due: int
    seconds: list[float]  # each claim's
    idle_ms: float  # a claim that finds nothing due

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000


@dataclass
class Compared:
    waiting: Claims
    none: Claims
    seed_seconds: float

    @property
    def ratio(self) -> float:
        return self.waiting.median_ms / self.none.median_ms


async def _claim(conn: asyncpg.Connection, campaign: int) -> tuple[float, int]:
    began = time.perf_counter()
    got = await conn.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "bench/1", batch_size=BATCH)))
    return time.perf_counter() - began, len(got)


async def _claims(conn: asyncpg.Connection, big: int, small: int, waiting: int, due: int) -> tuple[Claims, Claims]:
    """Both campaigns' due rows claimed, a claim of each in turn (the machine's drift falls on both alike), until
    none is left; then claims that find nothing, in turn too."""
    seconds: dict[int, list[float]] = {big: [], small: []}
    claimed = dict.fromkeys(seconds, 0)
    while any(n < due for n in claimed.values()):
        for campaign in seconds:
            took, n = await _claim(conn, campaign)
            seconds[campaign].append(took)
            claimed[campaign] += n
    assert claimed == {big: due, small: due}, claimed
    idle: dict[int, list[float]] = {big: [], small: []}
    for _ in range(20):
        for campaign in idle:
            took, n = await _claim(conn, campaign)
            assert n == 0
            idle[campaign].append(took)

    def of(campaign: int, waiting: int) -> Claims:
        return Claims(waiting, due, seconds[campaign][1:], statistics.median(idle[campaign]) * 1000)

    return of(big, waiting), of(small, 0)


async def measure(server: str, rows: int, due: int) -> Compared:
    name = f"einmal_bench_{os.getpid()}_local_times"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            await db.init(conn)
            began = time.monotonic()
            await conn.execute(SEED, rows)
            big = await conn.fetchval(CAMPAIGN, "waiting")
            small = await conn.fetchval(CAMPAIGN, "none waiting")
            for campaign in (big, small):
                await conn.execute("SELECT einmal.sends_partition($1)", campaign)
            await conn.execute(ROWS, big, due, rows)
            await conn.execute(ROWS, small, due, due)
            await conn.execute("VACUUM ANALYZE")
            seed_seconds = time.monotonic() - began
            waiting, none = await _claims(conn, big, small, rows - due, due)
            return Compared(waiting, none, seed_seconds)
        finally:
            await conn.close()
    finally:
        await database.drop(server, name)


def report(result: Compared, say=print) -> None:
    waiting, none = result.waiting, result.none
    say(
        row(
            f"claim of {BATCH}, {waiting.due:,} due, {waiting.waiting:,} waiting for their local time",
            f"{waiting.median_ms:.2f} ms median ({len(waiting.seconds)} claims); nothing due: {waiting.idle_ms:.2f} ms",
            "(the figure)",
            None,
        )
    )
    say(
        row(
            f"the same, {none.due:,} due, none waiting",
            f"{none.median_ms:.2f} ms = waiting {result.ratio:.2f} × none; nothing due: {none.idle_ms:.2f} ms",
            "<= 1.5 × none",
            result.ratio <= 1.5,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_times", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the campaign (default 1000000)")
    parser.add_argument("--due", type=int, default=20_000, help="of them due now (default 20000)")
    args = parser.parse_args(argv)
    if args.rows < 10_000 or not 1_000 <= args.due < args.rows:
        parser.exit(2, "python -m bench.local_times: --rows at least 10000, --due from 1000 to below --rows\n")
    server, _ = database.server_url()
    began = time.monotonic()
    result = anyio.run(measure, server, args.rows, args.due)
    print(f"seeded in {result.seed_seconds:.1f} s; measured in {time.monotonic() - began - result.seed_seconds:.1f} s")
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
