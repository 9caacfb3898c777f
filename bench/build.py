"""The recipient build: einmal's builder (actors/builder.build, in chunks) against one bare
`INSERT … SELECT DISTINCT ON (email_lower) …` writing the same rows, on the same data."""

import os
import time
from dataclasses import dataclass

import asyncpg

from actors import builder
from bench import database
from service import db
from service.context import NodeContext
from service.settings import Settings


@dataclass
class Build:
    subscribers: int
    rows: int
    seed_seconds: float
    einmal_seconds: float
    bare_seconds: float

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


async def _einmal(dsn: str, campaign_id: int) -> tuple[float, int]:
    pool = await db.create_pool(dsn, size=2)
    try:
        ctx = NodeContext(Settings(database_url=dsn), pool, dsn)
        started = time.monotonic()
        rows = await builder.build(ctx, campaign_id)
        return time.monotonic() - started, rows
    finally:
        await pool.close()


async def compare(server: str, subscribers: int) -> Build:
    """Seed once; time the bare statement, then einmal's builder, each into an empty sends table."""
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
            await conn.execute("TRUNCATE einmal.sends")
            await _checkpoint(conn)
        finally:
            await conn.close()
        einmal_seconds, einmal_rows = await _einmal(dsn, einmal_id)
        if einmal_rows != bare_rows:
            raise RuntimeError(f"einmal's builder wrote {einmal_rows} rows, the bare statement {bare_rows}")
        return Build(subscribers, bare_rows, seed_seconds, einmal_seconds, bare_seconds)
    finally:
        await database.drop(server, name)
