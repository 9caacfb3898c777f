"""The double opt-in guide's example (docs/guide/double-opt-in.md), run as it is written there: its curl commands
against a real node."""

import asyncpg
import pytest

from tests.support import doc_examples
from tests.support.optin import SECRET, SETTINGS, confirmation_rows, memberships
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_the_guide_double_opt_in_example_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    async with http_server(dsn, SECRET, **SETTINGS) as base:
        code, out, err = await doc_examples.run(doc_examples.example("guide/double-opt-in.md", "bash"), dsn, base)
    assert code == 0, err
    made, opened, first, again = out.splitlines()
    assert '"name":"news"' in made and '"form_url":null' in made, "a list's sign-ups are closed until opened"
    assert '"open":true' in opened and "/forms/" in opened
    assert first.startswith('{"status":"pending"') and again == "202"
    list_id = await conn.fetchval("SELECT id FROM einmal.lists")
    assert await memberships(conn, list_id) == {"grace@example.org": "unconfirmed"}
    assert [r["email"] for r in await confirmation_rows(conn)] == ["grace@example.org"]
