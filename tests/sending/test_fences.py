"""The fences of a claimed row (docs/design.md#state-machines, P3): a claim skips a row another transaction holds
instead of waiting for it, only the token that claimed a row can give it back, and a claimed row starts
only while its campaign is sending: a pause or a cancel stops what a node has claimed but not sent."""

import anyio
import asyncpg
import pytest

from service import db
from service.campaigns import transitions
from tests.sending.test_budget import CLAIM, sending_campaign
from tests.sending.test_pipeline_behaviour import Gated
from tests.support.claims import claim_args
from tests.support.pipeline import approve, counts, node_settings, recording_server, running_node, seed

pytestmark = pytest.mark.anyio

NO_LIMITS = (0.0, 0, 0, 3600.0, 86400.0)


async def test_a_claim_skips_a_row_an_erasure_holds_instead_of_waiting_for_it(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await sending_campaign(conn, 6)
    held = await conn.fetchrow(
        "SELECT id, subscriber_id FROM einmal.sends WHERE campaign_id = $1 ORDER BY id LIMIT 1", campaign
    )
    erasing, claiming = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        # a waiting claim fails here instead of hanging the test; a claim that skips never waits at all
        await claiming.execute("SET lock_timeout = '3s'")
        async with erasing.transaction():  # `subscribers delete` locks the subscriber's rows first
            assert await erasing.fetch(*db.sql("subscriber_sends_lock", subscriber_id=held["subscriber_id"])) != []
            rows = await claiming.fetch(*db.sql("send_claim_batch", **claim_args(campaign, "node-a/1")))
            assert sorted(r["id"] for r in rows) == sorted(
                await conn.fetchval(
                    "SELECT array_agg(id) FROM einmal.sends WHERE campaign_id = $1 AND id <> $2", campaign, held["id"]
                )
            ), "every row but the held one, claimed at once"
    finally:
        await erasing.close()
        await claiming.close()
    states = dict(
        await conn.fetch("SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign)
    )
    assert states == {"claimed": 5, "queued": 1}
    assert await conn.fetchval("SELECT status FROM einmal.sends WHERE id = $1", held["id"]) == "queued"


async def test_only_the_token_that_claimed_a_row_can_release_it(conn: asyncpg.Connection) -> None:
    campaign = await sending_campaign(conn, 8)
    mine = [r["id"] for r in await conn.fetch(CLAIM, campaign, "node-a/1", 4, *NO_LIMITS)]
    theirs = [r["id"] for r in await conn.fetch(CLAIM, campaign, "node-b/1", 4, *NO_LIMITS)]
    assert len(mine) == len(theirs) == 4
    # node b gives back what it holds, and names node a's rows too (a stale list, a bug): only its own go
    await conn.execute(*db.sql("send_release", ids=mine + theirs, token="node-b/1", campaign_ids=[campaign] * 8))
    rows = await conn.fetch("SELECT id, status, claimed_by FROM einmal.sends WHERE campaign_id = $1", campaign)
    assert {r["id"]: (r["status"], r["claimed_by"]) for r in rows} == {
        **{i: ("claimed", "node-a/1") for i in mine},
        **{i: ("queued", None) for i in theirs},
    }
    # nor does a retired incarnation of node a release what its new one holds
    await conn.execute(*db.sql("send_release", ids=mine, token="node-a/0", campaign_ids=[campaign] * 4))
    assert (
        await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE claimed_by = 'node-a/1' AND status = 'claimed'")
        == 4
    )
    await conn.execute(*db.sql("send_release", ids=mine, token="node-a/1", campaign_ids=[campaign] * 4))
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE status = 'queued'") == 8


@pytest.mark.parametrize(("verb", "settled"), [("pause", "queued"), ("cancel", "failed")])
async def test_a_paused_or_cancelled_campaign_starts_none_of_the_rows_a_node_has_claimed(
    conn: asyncpg.Connection, dsn: str, verb: str, settled: str
) -> None:
    campaign = await seed(conn, [f"p{i}@example.com" for i in range(10)])
    received = Gated()
    async with recording_server(received) as port:
        async with running_node(node_settings(dsn, port, smtp_connections=1, batch_size=10)):
            await approve(conn, campaign)
            with anyio.fail_after(30):
                await received.waiting.wait()  # one message on the wire, the rest of the batch claimed
            await transitions.transition(conn, verb=verb, campaign_id=campaign)
            assert await counts(conn, campaign) == {"sending": 1, "claimed": 9}
            received.release.set()
            with anyio.fail_after(30):  # the node settles its rows at its next group statements
                while {"claimed", "sending"} & set(await counts(conn, campaign)):
                    await anyio.sleep(0.05)
    assert await counts(conn, campaign) == {"sent": 1, settled: 9}
    assert len(received.messages) == 1, "only the message already on the wire went out"
    if verb == "cancel":
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND last_reply = 'campaign cancelled'",
                campaign,
            )
            == 9
        )
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND claimed_by IS NOT NULL AND status <> 'sent'",
            campaign,
        )
        == 0
    )
