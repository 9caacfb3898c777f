"""The engagement reads at scale: a campaign of 1,000,000 send rows (5 % of its recipients clicking, 20 % opening,
1 % bounced), a message template counted by 200 writers, a subscriber among 1,000,000; each read's median over
21 runs, against the count of the campaign's send rows by state that the counts spare (what `einmal campaign
status` reads).

    python -m bench.engagement [--rows 1000000]
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import anyio
import asyncpg

from bench import database
from bench.report import row
from service import db
from service.engagement import activity, counts

RUNS = 21
TARGET_MS = 10.0  # each read of the counts, at any number of rows


async def _median_ms(read: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        await read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(server: str, rows: int) -> tuple[float, dict[str, float], counts.CampaignEngagement]:
    name = f"einmal_bench_{os.getpid()}_engagement"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            started = time.monotonic()
            campaign = await conn.fetchval(database.sql("seed_campaign"), rows, "https://example.org/1 2")
            await conn.fetchval(database.sql("seed_engagement"), campaign, rows)
            await conn.execute(database.sql("seed_engagement_bounces"), campaign)
            await conn.execute("VACUUM ANALYZE")
            seeded = time.monotonic() - started
            account = await conn.fetchval("SELECT account_id FROM einmal.campaigns WHERE id = $1", campaign)
            someone = await conn.fetchval(
                "SELECT subscriber_id FROM einmal.sends WHERE campaign_id = $1 LIMIT 1", campaign
            )
            found = await counts.of_campaign(conn, campaign_id=campaign)
            figures = {
                "campaign: counts and clicks": await _median_ms(lambda: counts.of_campaign(conn, campaign_id=campaign)),
                "campaign: counts alone": await _median_ms(
                    lambda: conn.fetch(
                        *db.sql("engagement_counts", account_id=account, subjects=[f"campaign:{campaign}"])
                    )
                ),
                "template: counts": await _median_ms(
                    lambda: counts.of_template(conn, account_id=account, name="receipt")
                ),
                "subscriber: last activity": await _median_ms(
                    lambda: activity.of_subscriber(conn, subscriber_id=someone)
                ),
                "send rows counted by state (not used)": await _median_ms(
                    lambda: conn.fetch(
                        "SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign
                    )
                ),
            }
            return seeded, figures, found
        finally:
            await conn.close()
    finally:
        await database.drop(server, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engagement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="send rows of the campaign (default 1000000)")
    args = parser.parse_args(argv)
    if not 1_000 <= args.rows <= 10_000_000:
        parser.exit(2, "python -m bench.engagement: --rows from 1000 to 10000000\n")
    server, _ = database.server_url()
    seeded, figures, found = anyio.run(measure, server, args.rows)
    clicks = found.clicks.all.total if found.clicks else 0
    print(
        f"seeded in {seeded:.1f} s: {args.rows:,} send rows, delivered {found.delivered:,}, bounced {found.bounced:,}, "
        f"{clicks:,} clicks"
    )
    report(args.rows, figures)
    return 0


def report(rows: int, figures: dict[str, float], say=print) -> None:
    """Each read's median against its target; the count by state it spares, for scale."""
    for what, ms in figures.items():
        counted = not what.startswith("send rows")
        say(
            row(
                f"engagement, {rows:,} send rows: {what}",
                f"{ms:.2f} ms median of {RUNS}",
                f"<= {TARGET_MS:g} ms" if counted else "",
                ms <= TARGET_MS if counted else None,
            )
        )


if __name__ == "__main__":
    sys.exit(main())
