"""The README's HTTP API example, run as it is written there: its curl commands against a real node."""

import asyncpg
import pytest

from tests.support import readme
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


def readme_example() -> str:
    return readme.example("## HTTP API", "sh")


async def test_the_readme_example_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    async with http_server(dsn) as base:
        code, out, err = await readme.run(readme_example(), dsn, base)
    assert code == 0, err
    put, listing, deleted = out.splitlines()
    assert '"email":"ada@example.org"' in put and '"attributes":{"plan":"pro"}' in put
    assert '"subscribers":[{' in listing and '"next":null' in listing
    assert deleted == "204"
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "erased"
