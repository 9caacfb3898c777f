"""The webhooks guide's examples (docs/guide/webhooks.md), run as they are written there: its curl commands
against a real node's API, then its Python receiver on a real delivery."""

import json

import asyncpg
import pytest

from service.subscribers import suppressions
from tests.support import doc_examples
from tests.support.web import http_server
from tests.support.webhook_receiver import Receiver
from tests.support.webhooks import running_actor

pytestmark = pytest.mark.anyio


async def test_the_guide_examples_run_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    # the example's receiver is on loopback: the guide names the setting its node needs for that
    assert "EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK=true" in (doc_examples.ROOT / "docs/guide/webhooks.md").read_text()
    async with Receiver() as receiver:
        async with http_server(dsn, webhook_allow_http_loopback=True) as base:
            block = f"HOOK_URL={receiver.url()}\n" + doc_examples.example("guide/webhooks.md", "sh")
            code, out, err = await doc_examples.run(block, dsn, base)
        assert code == 0, err
        created, listed, parked, replayed = out.splitlines()
        secret = json.loads(created)["secret"]
        assert secret.startswith("whsec_") and json.loads(created)["url"] == receiver.url()
        assert [e["url"] for e in json.loads(listed)] == [receiver.url()] and secret not in listed
        assert json.loads(parked) == [] and json.loads(replayed) == {"id": 1, "replayed": 0, "not_kept_since": None}
        # the receiver of the guide, on what the endpoint now gets
        await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
        async with running_actor(dsn):
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 10)
    namespace: dict = {}
    exec(doc_examples.example("guide/webhooks.md", "python"), namespace)
    [request] = receiver.requests
    event = namespace["receive"](request.body, request.headers, secret)
    assert event["type"] == "subscriber.unsubscribed" and event["data"]["email"] == "ann@example.org"
    assert namespace["receive"](request.body + b" ", request.headers, secret) is None
