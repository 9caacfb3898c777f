"""Leaving a list from the preference page while a campaign to it is being sent, with a real node and a
real SMTP server: the address's message is not sent when no other list of the campaign reaches it, and is
sent when one does (docs/design.md#api, "The preference page")."""

import anyio
import asyncpg
import httpx
import pytest

from tests.sending.test_pipeline_behaviour import Gated
from tests.support.pipeline import approve, counts, node_settings, recording_server, running_node, seed, wait_status
from tests.support.web import http_server, token

pytestmark = pytest.mark.anyio


async def test_a_list_left_mid_send_stops_the_messages_no_other_targeted_list_reaches(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed(
        conn,
        [],
        lists={
            "news": ["a-first@example.com", "b-claimed@example.com", "c-queued@example.com", "d-both@example.com"],
            "offers": ["d-both@example.com"],
        },
    )
    received = Gated()
    async with recording_server(received) as port, http_server(dsn) as base, httpx.AsyncClient() as client:
        async with running_node(node_settings(dsn, port, smtp_connections=1, batch_size=2)):
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await received.waiting.wait()  # a-first on the wire, the next row claimed
            rows = {
                r["email"]: r
                for r in await conn.fetch(
                    "SELECT account_id, campaign_id, subscriber_id, email, status FROM einmal.sends "
                    "WHERE campaign_id = $1",
                    campaign,
                )
            }
            assert rows["a-first@example.com"]["status"] == "sending"
            assert rows["b-claimed@example.com"]["status"] == "claimed"
            news = await conn.fetchval("SELECT id FROM einmal.lists WHERE name = 'news'")
            for email in ("b-claimed@example.com", "c-queued@example.com", "d-both@example.com"):
                row = rows[email]
                ids = (row["account_id"], row["campaign_id"], row["subscriber_id"])
                left = await client.post(f"{base}/unsubscribe?token={token(ids)}&leave={news}")
                assert left.status_code == 200 and "You left the mailing list." in left.text, email
            received.release.set()
            await wait_status(conn, campaign, "sent", timeout=60)
    assert sorted(rcpt for _, rcpt, _ in received.messages) == ["a-first@example.com", "d-both@example.com"]
    stopped = await conn.fetch(
        "SELECT email, last_reply FROM einmal.sends WHERE campaign_id = $1 AND status = 'suppressed' ORDER BY email",
        campaign,
    )
    assert [tuple(r) for r in stopped] == [
        ("b-claimed@example.com", "left the list"),
        ("c-queued@example.com", "left the list"),
    ]
    assert await counts(conn, campaign) == {"sent": 2, "suppressed": 2}
    assert await conn.fetchval("SELECT count(*) FROM einmal.suppressions") == 0  # a list left, not the account
