"""The recipient build of a campaign narrowed by a segment: einmal's builder (actors/builder.build, in chunks, the
segment's predicate in each) against the bare list build (one `INSERT … SELECT DISTINCT ON (email_lower)` of
every member, bench/sql/build_bare.sql), on the same subscribers, in one run. The segment: pro plan, not on list
'churned', joined in the last year, aged 18 or more — attributes, a membership and a date (some 12 % of them);
and, the predicate's whole cost, a segment that takes every member (an attribute compared on each row).

    python -m bench.segments [--subscribers 1000000]
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass

import anyio
import asyncpg

from bench import database
from bench.build import _bare, _checkpoint, _einmal, seeded
from bench.report import row
from service.segments.compiled import bound

RULE = {
    "all": [
        {"attribute": "plan", "op": "eq", "value": "pro"},
        {"not": {"member": "churned"}},
        {"subscribed": {"within_days": 365}},
        {"attribute": "age", "op": "ge", "value": 18},
    ]
}
EVERY = {"attribute": "age", "op": "ge", "value": 0}  # true of every subscriber, evaluated on each
TARGET = 2.0  # × the bare list build


@dataclass
class SegmentBuild:
    subscribers: int
    seed_seconds: float
    bare_seconds: float
    bare_rows: int
    segment_seconds: float  # when not `complete`: the time limit it was stopped at
    segment_rows: int
    expected_rows: int  # what the segment's count says a build takes
    every_seconds: float  # the segment that takes every member
    every_rows: int

    @property
    def complete(self) -> bool:
        return self.segment_rows == self.expected_rows and self.every_rows == self.bare_rows

    @property
    def ratio(self) -> float:
        return self.segment_seconds / self.bare_seconds

    @property
    def every_ratio(self) -> float:
        return self.every_seconds / self.bare_seconds


async def measure(server: str, subscribers: int, limit: float = 600.0) -> SegmentBuild:
    """Seed once; time the bare list build, then einmal's build of the segment campaign (stopped after `limit`
    seconds, or 3 × the bare one if longer), each into an empty sends table."""
    name = f"einmal_bench_{os.getpid()}_segments"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            seed_seconds = await seeded(conn, "seed_segment", subscribers)
            bare_id = await conn.fetchval(database.sql("build_campaign"), "bare")
            segment_id = await conn.fetchval(database.sql("segment_campaign"), json.dumps(RULE))
            every_id = await conn.fetchval(database.sql("segment_campaign"), json.dumps(EVERY))
            account_id = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'bench'")
            counted = await conn.fetchrow(
                *bound(
                    "segment_count",
                    RULE,
                    owner=account_id,
                    now=await conn.fetchval("SELECT now()"),
                    account_id=account_id,
                )
            )  # also the untimed pass that warms what both builds read
            await _checkpoint(conn)
            bare_seconds, bare_rows = await _bare(conn, bare_id)
            await conn.execute("TRUNCATE einmal.bounces, einmal.sends")
            await _checkpoint(conn)
        finally:
            await conn.close()
        segment_seconds, segment_rows = await _einmal(dsn, segment_id, max(limit, 3 * bare_seconds))
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("TRUNCATE einmal.bounces, einmal.sends")
            await _checkpoint(conn)
        finally:
            await conn.close()
        every_seconds, every_rows = await _einmal(dsn, every_id, max(limit, 3 * bare_seconds))
        if segment_rows > counted["subscribers"]:
            raise RuntimeError(
                f"the segment's build wrote {segment_rows} rows, its count says {counted['subscribers']}"
            )
        return SegmentBuild(
            subscribers,
            seed_seconds,
            bare_seconds,
            bare_rows,
            segment_seconds,
            segment_rows,
            counted["subscribers"],
            every_seconds,
            every_rows,
        )
    finally:
        await database.drop(server, name)


def report(result: SegmentBuild, say=print) -> None:
    if result.complete:
        measured = f"{result.segment_seconds:.2f} s = {result.ratio:.2f} × bare"
    else:
        measured = (
            f"> {result.segment_seconds:.0f} s = > {result.ratio:.2f} × bare (stopped: {result.segment_rows:,} rows)"
        )
    say(
        row(
            f"segment build, {result.subscribers:,} subscribers",
            measured,
            f"<= {TARGET:g} × bare",
            result.complete and result.ratio <= TARGET,
        )
    )
    say(
        row(
            "  its rows; the bare list build's",
            f"{result.segment_rows:,}; {result.bare_seconds:.2f} s ({result.bare_rows:,} rows)",
            "",
            None,
        )
    )

    say(
        row(
            "a segment taking every member, the same",
            f"{result.every_seconds:.2f} s = {result.every_ratio:.2f} × bare ({result.every_rows:,} rows)",
            f"<= {TARGET:g} × bare",
            result.complete and result.every_ratio <= TARGET,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.segments", description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=1_000_000, help="subscribers (default 1000000)")
    args = parser.parse_args(argv)
    if not 1_000 <= args.subscribers <= 10_000_000:
        parser.exit(2, "python -m bench.segments: --subscribers from 1000 to 10000000\n")
    server, _ = database.server_url()
    result = anyio.run(measure, server, args.subscribers)
    print(f"seeded in {result.seed_seconds:.1f} s")
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
