"""The bench's PostgreSQL: the configured server or the embedded one, a fresh database
per run, seed data, and the count of statements a run cost.

Statements are counted on the server, for the bench database only:
- with pg_stat_statements when the server preloads it (`shared_preload_libraries`):
  the sum of `calls` (top-level statements, utility ones such as BEGIN included);
- otherwise with `pg_stat_database.xact_commit + xact_rollback`: transactions. In
  autocommit one statement is one transaction; a simple-query string of several
  statements (asyncpg's reset when a connection goes back to its pool:
  `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) counts once,
  so this reads low rather than high.
The counters are read when no client of the bench database is left (a backend
flushes its statistics when it exits). The bench's own statements are subtracted.
"""

import os
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from service.db import embedded
from service.db.migrate import migrate

SQL = Path(__file__).resolve().parent / "sql"


def sql(name: str) -> str:
    return (SQL / f"{name}.sql").read_text()


def server_url() -> tuple[str, str]:
    """(URL, description) of the server: EINMAL_DATABASE_URL, DATABASE_URL, else the embedded one."""
    for var in ("EINMAL_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(var):
            return os.environ[var], var
    return embedded.url(), "embedded"


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def admin(server: str) -> asyncpg.Connection:
    return await asyncpg.connect(with_database(server, "postgres"))


async def fresh(server: str, name: str) -> str:
    """A new, migrated database; its URL."""
    conn = await admin(server)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    dsn = with_database(server, name)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return dsn


async def drop(server: str, name: str) -> None:
    conn = await admin(server)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def version(server: str) -> str:
    conn = await admin(server)
    try:
        return await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()


class Statements:
    """Statements run in one database between `start()` and `stop()`."""

    OWN = "/* bench:own */"  # marks the bench's own statements for pg_stat_statements

    def __init__(self, server: str, name: str) -> None:
        self.server, self.name = server, name
        self.method = "xact_commit"
        self.own = 0  # the bench's own statements in the database while counting
        self.top: list[tuple[int, str]] = []  # the most frequent statements (pg_stat_statements only)

    async def _idle(self, conn: asyncpg.Connection, timeout: float = 15) -> None:
        """Wait until no client is connected to the database: their statistics are flushed."""
        deadline = time.monotonic() + timeout
        while await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", self.name
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"clients of {self.name} did not disconnect")
            await _sleep(0.05)

    async def _read(self) -> int:
        conn = await admin(self.server)
        try:
            await self._idle(conn)
            if self.method == "pg_stat_statements":
                db = await asyncpg.connect(with_database(self.server, self.name))
                try:
                    rows = await db.fetch(f"""{self.OWN}
                        SELECT calls, query FROM pg_stat_statements
                        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                          AND query NOT LIKE '%bench:own%' ORDER BY calls DESC""")
                    self.top = [(r["calls"], _label(r["query"])) for r in rows[:8]]
                    return sum(r["calls"] for r in rows)
                finally:
                    await db.close()
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            return await conn.fetchval(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", self.name
            )
        finally:
            await conn.close()

    async def start(self) -> None:
        conn = await admin(self.server)
        try:
            preload = await conn.fetchval("SHOW shared_preload_libraries")
        finally:
            await conn.close()
        if "pg_stat_statements" in preload:
            db = await asyncpg.connect(with_database(self.server, self.name))
            try:
                await db.execute(f"{self.OWN} CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                await db.execute(
                    f"{self.OWN} SELECT pg_stat_statements_reset(0, "
                    "(SELECT oid FROM pg_database WHERE datname = current_database()), 0)"
                )
                self.method = "pg_stat_statements"
            except asyncpg.PostgresError:
                pass  # not allowed here: count transactions
            finally:
                await db.close()
        self.before = await self._read()

    async def stop(self) -> int:
        own = 0 if self.method == "pg_stat_statements" else self.own
        return await self._read() - self.before - own


def _label(text: str) -> str:
    """The name of the einmal query (sql/queries/<name>.sql) the statement starts like, else the
    statement itself (pg_stat_statements shows constants as $n, so texts match only in part)."""
    from service import db

    def shared(a: str, b: str) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    flat = " ".join(text.split())
    best, name = max((shared(flat, " ".join(query.text.split())), name) for name, query in db.QUERIES.items())
    return f"sql/queries/{name}.sql" if best >= 40 else flat


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)
