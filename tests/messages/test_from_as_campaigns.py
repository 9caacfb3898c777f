"""A message's From is taken as a campaign's is (service/campaigns/fields.py from_address): a quoted local part,
which campaign create refuses, is refused by message send and message template add too, on the command line and
the API alike."""

import asyncpg
import httpx
import pytest

from tests.cli.test_campaign_commands import seed_account
from tests.conftest import einmal
from tests.support.web import http_server
from tests.web.test_api import auth

pytestmark = pytest.mark.anyio

QUOTED = 'Shop <"john.smith"@example.org>'


async def test_a_quoted_local_part_is_refused_as_a_from_everywhere(conn: asyncpg.Connection, dsn: str) -> None:
    await seed_account(conn)
    campaign = einmal(
        "campaign", "create", "--account", "acme", "--name", "N", "--subject", "S", "--from", QUOTED,
        "--text", "Hi {{ unsubscribe_url }}", dsn=dsn,
    )  # fmt: skip
    assert campaign.returncode != 0 and "is not a valid address" in campaign.stderr
    sent = einmal(
        "message", "send", "--account", "acme", "--to", "ann@example.org", "--subject", "S", "--text", "T",
        "--from", QUOTED, dsn=dsn,
    )  # fmt: skip
    assert sent.returncode != 0 and "is not a valid address" in sent.stderr, sent.stderr
    assert "Traceback" not in sent.stderr and sent.stderr.count("\n") == 1
    added = einmal(
        "message", "template", "add", "--account", "acme", "receipt", "--subject", "S", "--text", "T",
        "--from", QUOTED, dsn=dsn,
    )  # fmt: skip
    assert added.returncode != 0 and "is not a valid address" in added.stderr, added.stderr
    key = einmal("account", "key", "create", "--account", "acme", dsn=dsn).stdout.strip()
    async with http_server(dsn) as base, httpx.AsyncClient(base_url=f"{base}/api/v1", headers=auth(key)) as api:
        one = await api.post("/messages", json={"to": "ann@example.org", "subject": "S", "text": "T", "from": QUOTED})
        assert one.status_code == 422 and "is not a valid address" in one.json()["error"], one.text
        batch = await api.post(
            "/messages/batch",
            json={"messages": [{"to": "ann@example.org", "subject": "S", "text": "T", "from": QUOTED}]},
        )
        assert "is not a valid address" in batch.text, batch.text
    assert await conn.fetchval("SELECT count(*) FROM einmal.messages") == 0
    good = einmal(
        "message", "send", "--account", "acme", "--to", "ann@example.org", "--subject", "S", "--text", "T",
        "--from", "Acme <Shop@Example.org>", dsn=dsn,
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
