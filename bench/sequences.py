"""The sequence sweep's cost per tick (actors/sequencer.py, docs/design.md#sequences): one sequence of 1,000,000
members, 1 % of them due (half at their first step, half at their second, its first row sent), swept in batches
of EINMAL_SEQUENCE_BATCH (500) until none is due; each tick timed (the lock, the statement that queues and
advances, the commit), the first as a warm-up left out. Against the same number due in a sequence fifty times
smaller: the work of a tick follows the batch, not the list. And the idle tick's probe (`sequence_due.sql`) when
nobody is due.

    python -m bench.sequences [--members 1000000] [--due-percent 1] [--batch 500]
"""

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

import anyio
import asyncpg

from actors.sequencer import sweep_one
from bench import database
from bench.report import row
from service import db

MAX_TICKS = 40  # timed ticks per sequence at most


@dataclass
class Ticks:
    members: int
    due: int
    batch: int
    seconds: list[float]  # each tick's
    queued: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.95) - 1)] * 1000


@dataclass
class Sweeps:
    big: Ticks
    small: Ticks
    idle_ms: float
    seed_seconds: float

    @property
    def ratio(self) -> float:
        return self.big.median_ms / self.small.median_ms


async def _ticks(conn: asyncpg.Connection, sequence: int, members: int, due: int, batch: int) -> Ticks:
    """The sequence swept until none is due; each tick's time but the first's (its statements planned, its
    pages read in: a warm-up)."""
    seconds, queued = [], 0
    for _ in range(MAX_TICKS):
        began = time.perf_counter()
        locked, added = await sweep_one(conn, sequence_id=sequence, batch=batch, wait_seconds=5)
        if not locked:
            break
        seconds.append(time.perf_counter() - began)
        queued += added
    return Ticks(members, due, batch, seconds[1:] or seconds, queued)


async def measure(server: str, members: int, due_percent: float, batch: int) -> Sweeps:
    name = f"einmal_bench_{os.getpid()}_sequences"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            await db.init(conn)
            due = max(4 * batch, int(members * due_percent / 100))  # a median of four ticks at least
            began = time.monotonic()
            big = await conn.fetchval(database.sql("seed_sequence"), members, "big")
            await conn.execute(database.sql("seed_sequence_members"), big, due)
            await conn.execute(database.sql("seed_sequence_sent"), big)
            small_members = max(due * 2, members // 50)
            small = await conn.fetchval(database.sql("seed_sequence"), small_members, "small")
            await conn.execute(database.sql("seed_sequence_members"), small, due)
            await conn.execute(database.sql("seed_sequence_sent"), small)
            await conn.execute("VACUUM ANALYZE")
            seed_seconds = time.monotonic() - began
            big_ticks = await _ticks(conn, big, members, due, batch)
            small_ticks = await _ticks(conn, small, small_members, due, batch)
            await conn.execute("UPDATE einmal.sequence_members SET due_at = now() + interval '1 day'")
            await conn.execute("VACUUM ANALYZE einmal.sequence_members")
            idle = []
            for _ in range(20):
                began = time.perf_counter()
                assert await conn.fetch(*db.sql("sequence_due")) == []
                idle.append(time.perf_counter() - began)
            return Sweeps(big_ticks, small_ticks, statistics.median(idle) * 1000, seed_seconds)
        finally:
            await conn.close()
    finally:
        await database.drop(server, name)


def report(result: Sweeps, say=print) -> None:
    big, small = result.big, result.small
    per_member = big.median_ms * 1000 / big.batch
    say(
        row(
            f"sequence sweep, {big.members:,} members, {big.due:,} due: a tick of {big.batch}",
            f"{big.median_ms:.1f} ms median, p95 {big.p95_ms:.1f} ms ({per_member:.0f} µs a member, "
            f"{len(big.seconds)} ticks)",
            "(the figure)",
            None,
        )
    )
    say(
        row(
            f"the same at {small.members:,} members, {small.due:,} due",
            f"{small.median_ms:.1f} ms = big {result.ratio:.2f} × small",
            "<= 1.5 × small",
            result.ratio <= 1.5,
        )
    )
    say(
        row(
            f"an idle tick's probe, {big.members + small.members:,} members, none due",
            f"{result.idle_ms:.2f} ms",
            "",
            None,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sequences", description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1_000_000, help="members of the big sequence (default 1000000)")
    parser.add_argument("--due-percent", type=float, default=1.0, help="of them due (default 1)")
    parser.add_argument("--batch", type=int, default=500, help="members a tick (EINMAL_SEQUENCE_BATCH, default 500)")
    args = parser.parse_args(argv)
    if args.members < 10_000 or not 0 < args.due_percent <= 100 or not 1 <= args.batch <= 10_000:
        parser.exit(
            2, "python -m bench.sequences: --members at least 10000, --due-percent in (0, 100], --batch 1-10000\n"
        )
    server, _ = database.server_url()
    began = time.monotonic()
    result = anyio.run(measure, server, args.members, args.due_percent, args.batch)
    print(f"seeded in {result.seed_seconds:.1f} s; measured in {time.monotonic() - began - result.seed_seconds:.1f} s")
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
