"""`einmal migrate`: apply pending migrations, each in its own transaction.

Several nodes may start at once: each transaction takes a transaction-level
advisory lock first, so one of them applies a migration while the others wait,
then find it applied. Nothing is held between transactions, so this works
behind a transaction pooler too (docs/operations/database.md#pgbouncer).

A migration that needs what only Python computes has a step in PREPARE: it
runs first, in the migration's transaction, and leaves its results in a
temporary table the migration's SQL reads (0002: each stored address's key).
"""

import asyncpg

from service import db
from service.addresses import email_key
from service.errors import Conflict

LOCK_KEY = 0x65696E6D616C  # "einmal"

BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS einmal;
CREATE TABLE IF NOT EXISTS einmal.migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


async def _stage_address_keys(conn: asyncpg.Connection) -> None:
    """pg_temp.einmal_rekey: each stored address whose key is not what its row holds, with its key."""
    await conn.execute(*db.sql("rekey_stage_create"))
    changed: dict[str, str] = {}
    for name in ("subscribers_read_keys", "suppressions_read_keys"):
        async for row in conn.cursor(*db.sql(name), prefetch=10_000):
            key = email_key(row["address"])
            if key != row["stored"]:
                changed[row["address"]] = key
    await conn.copy_records_to_table(
        "einmal_rekey", schema_name="pg_temp", columns=["address", "key"], records=changed.items()
    )


PREPARE = {2: _stage_address_keys}


async def migrate(conn: asyncpg.Connection, before: int | None = None) -> list[str]:
    """Apply pending migrations (those numbered below `before` when given: a test or bench builds a database
    as an older einmal left it); return the names of those applied."""
    known = [m for m in db.migrations() if before is None or m[0] < before]
    applied_now = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
        await conn.execute(BOOTSTRAP)
        applied = {r["version"]: r["name"] for r in await conn.fetch("SELECT version, name FROM einmal.migrations")}
    unknown = sorted(set(applied) - {version for version, _, _ in db.migrations()})
    if unknown:
        names = ", ".join(f"{v:04d}_{applied[v]}" for v in unknown)
        raise Conflict(f"the database holds migrations this einmal does not know: {names}; upgrade einmal")
    for version, name, sql in known:
        if version in applied:
            continue
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", LOCK_KEY)
            if await conn.fetchval("SELECT true FROM einmal.migrations WHERE version = $1", version):
                continue  # another node applied it while this one waited
            if version in PREPARE:
                await PREPARE[version](conn)
            await conn.execute(sql)
            await conn.execute("INSERT INTO einmal.migrations (version, name) VALUES ($1, $2)", version, name)
        applied_now.append(f"{version:04d}_{name}")
    return applied_now
