"""`einmal migrate`: apply pending migrations, each in its own transaction.

Several nodes may start at once: a session-level advisory lock lets one of
them apply what is pending while the others wait, then find nothing to do.

A migration that needs what only Python computes has a step in PREPARE: it
runs first, in the migration's transaction, and leaves its results in a
temporary table the migration's SQL reads (0002: each stored address's key).
"""

import asyncpg

from service import db
from service.addresses import email_key
from service.errors import UsageError

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
    await conn.execute(db.query("rekey_stage_create"))
    changed: dict[str, str] = {}
    for name in ("subscribers_read_keys", "suppressions_read_keys"):
        async for row in conn.cursor(db.query(name), prefetch=10_000):
            key = email_key(row["address"])
            if key != row["stored"]:
                changed[row["address"]] = key
    await conn.copy_records_to_table("einmal_rekey", schema_name="pg_temp", columns=["address", "key"],
                                     records=changed.items())


PREPARE = {2: _stage_address_keys}


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; return the names of those applied."""
    known = db.migrations()
    applied_now = []
    await conn.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
    try:
        await conn.execute(BOOTSTRAP)
        applied = {r["version"]: r["name"] for r in await conn.fetch("SELECT version, name FROM einmal.migrations")}
        unknown = sorted(set(applied) - {version for version, _, _ in known})
        if unknown:
            names = ", ".join(f"{v:04d}_{applied[v]}" for v in unknown)
            raise UsageError(f"the database holds migrations this einmal does not know: {names}; upgrade einmal")
        for version, name, sql in known:
            if version in applied:
                continue
            async with conn.transaction():
                if version in PREPARE:
                    await PREPARE[version](conn)
                await conn.execute(sql)
                await conn.execute("INSERT INTO einmal.migrations (version, name) VALUES ($1, $2)", version, name)
            applied_now.append(f"{version:04d}_{name}")
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
    return applied_now
