"""The messages guide's example (docs/guide/messages.md), run as it is written there: its curl commands against
a real node, and the message they make sent once by a node."""

import anyio
import asyncpg
import pytest

from tests.messages.support import message_rows
from tests.support import doc_examples
from tests.support.pipeline import node_settings, running_node
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


async def test_the_guide_example_runs_as_written(conn: asyncpg.Connection, dsn: str, smtp_server) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    async with http_server(dsn) as base:
        code, out, err = await doc_examples.run(doc_examples.example("guide/messages.md", "sh"), dsn, base)
    assert code == 0, err
    template, message_id, again, shown = out.splitlines()
    assert '"name":"receipt"' in template and '"from":"Acme Shop <shop@example.org>"' in template
    assert int(message_id) >= 2**52
    assert f'"id":{message_id},"status":"queued","created":' in again  # the same message
    assert f'"id":{message_id},"state":"queued"' in shown and '"data":{"order":"A-17"}' in shown
    async with running_node(node_settings(dsn, smtp_server.port)):
        with anyio.fail_after(30):
            while [r["status"] for r in await message_rows(conn)] != ["sent"]:
                await anyio.sleep(0.05)
    [received] = smtp_server.messages
    assert received.rcpt_tos == ("ada@example.org",) and b"Subject: Your order A-17" in received.data
