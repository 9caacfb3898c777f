"""A node with EINMAL_RETENTION_DAYS prunes the campaigns it finished (actors/pruner.py): their partitions go,
einmal.sends comes back to the same size after each, their counts stay; without the setting nothing is pruned."""

import anyio
import asyncpg
import pytest

from actors import pruner
from service import db
from tests.support.pipeline import Received, approve, node_settings, recording_server, running_node, seed

pytestmark = pytest.mark.anyio

SIZE = "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree('einmal.sends')"


async def campaign_like(conn: asyncpg.Connection, first: int) -> int:
    """Another draft campaign to the lists of campaign `first`."""
    return await conn.fetchval(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
        SELECT account_id, name, subject, from_address, body_text, list_ids FROM einmal.campaigns WHERE id = $1
        RETURNING id""",
        first,
    )


async def gone(conn: asyncpg.Connection, campaign: int, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while await conn.fetchval(
            "SELECT to_regclass('einmal.sends_c' || $1::bigint) IS NOT NULL "
            "OR (SELECT pruned_at IS NULL FROM einmal.campaigns WHERE id = $1)",
            campaign,
        ):
            await anyio.sleep(0.1)


async def test_a_node_with_retention_prunes_each_campaign_it_finished(
    conn: asyncpg.Connection, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pruner, "EVERY", 0.3)
    first = await seed(conn, [f"user{i}@example.com" for i in range(30)])
    baseline = await conn.fetchval(SIZE) - await conn.fetchval(
        "SELECT pg_total_relation_size($1::regclass)", f"einmal.sends_c{first}"
    )
    received = Received()
    sizes = []
    async with recording_server(received) as port, running_node(node_settings(dsn, port, retention_days=0)):
        for i in range(3):
            campaign = first if i == 0 else await campaign_like(conn, first)
            await approve(conn, campaign)
            await gone(conn, campaign)
            sizes.append(await conn.fetchval(SIZE))
            status = await conn.fetch(*db.sql("campaign_status", campaign_id=campaign, node_timeout=30.0))
            assert {r["send_status"]: r["n"] for r in status} == {"sent": 30}
            assert status[0]["status"] == "sent"
    print(f"einmal.sends after each pruned campaign: {sizes} bytes (without any campaign: {baseline})")
    assert sizes == [baseline] * 3
    assert len(received.ids()) == 90 and len(set(received.ids())) == 90


async def test_without_the_setting_a_node_prunes_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed(conn, ["a@example.com"])
    await conn.execute(
        "UPDATE einmal.campaigns SET status = 'sent', sent_at = now() - interval '400 days' WHERE id = $1", campaign
    )
    async with recording_server(Received()) as port, running_node(node_settings(dsn, port)):
        await anyio.sleep(2)
    assert await conn.fetchval("SELECT pruned_at FROM einmal.campaigns WHERE id = $1", campaign) is None
    assert await conn.fetchval("SELECT to_regclass('einmal.sends_c' || $1::bigint)::text", campaign) is not None
