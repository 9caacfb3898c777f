"""The HTTP API guide's example (docs/guide/http-api.md), run as it is written there: its curl commands against a
real node."""

import asyncpg
import pytest

from tests.support import doc_examples
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


def guide_example() -> str:
    return doc_examples.example("guide/http-api.md", "sh")


async def test_the_guide_example_runs_as_written(conn: asyncpg.Connection, dsn: str, smtp_server) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    async with http_server(dsn, smtp_host=smtp_server.host, smtp_port=smtp_server.port) as base:
        code, out, err = await doc_examples.run(guide_example(), dsn, base)
    assert code == 0, err
    put, listing, deleted, member, changed, preview, test, key = out.splitlines()
    assert '"email":"ada@example.org"' in put and '"attributes":{"plan":"pro"}' in put
    assert '"subscribers":[{' in listing and '"next":null' in listing
    assert deleted == "204"
    assert '"added":true' in member
    assert '"subject":"Spring is here, {{ name }}"' in changed and '"status":"draft"' in changed
    assert '"subject":"Spring is here, Bob"' in preview and '"text":"Hi Bob' in preview
    assert '"to":"qa@example.org"' in test and '"reply":"250' in test
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == ("qa@example.org",) and b"Subject: [TEST] Spring is here, Bob" in received.data
    assert '"name":"reports","scope":"read"' in key and '"key":"einmal_' in key
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "erased"
