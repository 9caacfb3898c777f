import uuid

import asyncpg
import pytest

from service import db
from service.db.migrate import migrate
from tests.conftest import applied_by, einmal, every_migration

pytestmark = pytest.mark.anyio


async def test_migrate_is_idempotent(conn: asyncpg.Connection) -> None:
    assert await migrate(conn) == []
    tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'einmal'")}
    assert {
        "accounts",
        "subscribers",
        "lists",
        "list_members",
        "campaigns",
        "sends",
        "suppressions",
        "inbound_events",
        "nodes",
        "migrations",
    } <= tables


async def test_two_concurrent_migrate_processes_both_succeed(server_url: str) -> None:
    import anyio

    from tests.conftest import _admin, with_database

    name = f"einmal_race_migrate_{uuid.uuid4().hex[:8]}"  # its own: other sessions run beside it
    await _admin(server_url, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
    dsn = with_database(server_url, name)
    try:
        results = []

        async def one() -> None:
            results.append(await anyio.to_thread.run_sync(lambda: einmal("migrate", dsn=dsn)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
        assert applied_by([r.stdout for r in results]) == every_migration(), results
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM einmal.migrations") == len(db.migrations())
        finally:
            await conn.close()
    finally:
        await _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_migrate_refuses_a_database_from_a_newer_einmal(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.migrations (version, name) VALUES (9999, 'future')")
    result = einmal("migrate", dsn=dsn)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "einmal: the database holds migrations this einmal does not know: 9999_future; upgrade einmal"
    )


def test_unreachable_database_is_one_line() -> None:
    result = einmal("migrate", dsn="postgresql://postgres@127.0.0.1:1/nowhere")
    assert result.returncode == 1
    assert result.stderr.startswith("einmal: cannot reach PostgreSQL at 127.0.0.1:1/nowhere")
    assert len(result.stderr.strip().splitlines()) == 1
