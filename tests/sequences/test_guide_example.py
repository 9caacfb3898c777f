"""The sequences guide's example (docs/guide/sequences.md), run as it is written there: its commands against a
real database and its curl against a real HTTP surface."""

import asyncpg
import pytest

from tests.conftest import UNSUBSCRIBE
from tests.support import doc_examples
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_the_guide_sequence_example_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await conn.execute("INSERT INTO einmal.lists (account_id, name) VALUES ($1, 'news')", account)
    block = doc_examples.example("guide/sequences.md", "bash")
    async with http_server(dsn) as base:
        code, out, err = await doc_examples.run(
            "\n".join(f"export {k}={v}" for k, v in UNSUBSCRIBE.items()) + "\n" + block, dsn, base
        )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("step 1 of sequence") and lines[1].startswith("step 2 of sequence")
    assert lines[2].startswith("sequence 1 'welcome' on list 'news': running, 0 members")
    assert lines[-1].startswith('{"sequence":{"id":1,"name":"welcome"')
    steps = await conn.fetch(
        "SELECT step_position, step_delay_seconds, step_window_from, step_window_to, step_window_zone, status "
        "FROM einmal.campaigns WHERE kind = 'step' ORDER BY step_position"
    )
    assert [tuple(r) for r in steps] == [
        (1, 0, None, None, None, "sending"),
        (2, 3 * 86400, 9, 17, "Europe/Berlin", "sending"),
    ]
