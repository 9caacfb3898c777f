"""The recipient build: einmal's builder (actors/builder.py Builder.build, in chunks) against one bare
`INSERT … SELECT DISTINCT ON (email_lower) …` writing the same rows, on the same data."""

import os
import time
from dataclasses import dataclass

import anyio
import asyncpg

from actors.builder import Builder
from actors.wires import Fencing, Wakeups
from bench import database
from service import db
from service.settings import Settings


@dataclass
class Build:
    subscribers: int
    rows: int
    seed_seconds: float
    einmal_seconds: float  # when not `complete`: the time limit it was stopped at
    bare_seconds: float
    einmal_rows: int  # rows einmal's builder wrote (fewer than `rows` when stopped)

    @property
    def complete(self) -> bool:
        return self.einmal_rows == self.rows

    @property
    def ratio(self) -> float:
        return self.einmal_seconds / self.bare_seconds


async def _checkpoint(conn: asyncpg.Connection) -> None:
    """Start each timed build without the dirty pages of what came before, where allowed."""
    try:
        await conn.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        pass


async def _bare(conn: asyncpg.Connection, campaign_id: int) -> tuple[float, int]:
    started = time.monotonic()
    await conn.execute(database.sql("build_bare"), campaign_id)
    seconds = time.monotonic() - started
    return seconds, await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", campaign_id)


async def _einmal(dsn: str, campaign_id: int, limit: float) -> tuple[float, int]:
    """einmal's builder, stopped after `limit` seconds: (seconds, rows it wrote)."""
    pool = await db.create_pool(dsn, size=2)
    try:
        the_builder = Builder(pool, Fencing(), Wakeups(), Settings(database_url=dsn).db_timeout_seconds)
        started = time.monotonic()
        with anyio.move_on_after(limit):
            await the_builder.build(campaign_id)
        seconds = time.monotonic() - started
    finally:
        pool.terminate()  # a build stopped mid-statement leaves its connection busy
    conn = await asyncpg.connect(dsn)
    try:
        return seconds, await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE campaign_id = $1", campaign_id)
    finally:
        await conn.close()


async def compare(server: str, subscribers: int, deadline: float) -> Build:
    """Seed once; time the bare statement, then einmal's builder, each into an empty sends table.
    einmal's builder is stopped at the monotonic `deadline` (then its figure is a lower bound)."""
    name = f"einmal_bench_{os.getpid()}_build"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            started = time.monotonic()
            await conn.fetchval(database.sql("seed_build"), subscribers)
            await conn.execute("VACUUM ANALYZE")
            seed_seconds = time.monotonic() - started
            bare_id = await conn.fetchval(database.sql("build_campaign"), "bare")
            einmal_id = await conn.fetchval(database.sql("build_campaign"), "einmal")
            # both read warm tables: one untimed pass over what the build reads
            await conn.fetchval("""SELECT count(*) FROM einmal.subscribers s
                                   WHERE EXISTS (SELECT 1 FROM einmal.list_members m WHERE m.subscriber_id = s.id)""")
            await _checkpoint(conn)
            bare_seconds, bare_rows = await _bare(conn, bare_id)
            await conn.execute("TRUNCATE einmal.bounces, einmal.sends")
            await _checkpoint(conn)
        finally:
            await conn.close()
        limit = max(deadline - time.monotonic(), 1.4 * bare_seconds)
        einmal_seconds, einmal_rows = await _einmal(dsn, einmal_id, limit)
        if einmal_rows > bare_rows or (einmal_rows < bare_rows and einmal_seconds < limit):
            raise RuntimeError(f"einmal's builder wrote {einmal_rows} rows, the bare statement {bare_rows}")
        return Build(subscribers, bare_rows, seed_seconds, einmal_seconds, bare_seconds, einmal_rows)
    finally:
        await database.drop(server, name)
