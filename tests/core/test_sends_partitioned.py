"""einmal.sends partitioned by campaign on a real PostgreSQL: the migration of a table of today's shape keeps
every row, id, status and constraint and reads no row under its exclusive lock; the rows from before it are
pruned in batches; over 20 campaigns with retention the table's size stays flat. The long measurement (a
million rows, a prune's time against its campaign's size) is `make retention` (tests/support/retention.py)."""

import uuid

import asyncpg
import pytest

from service import db
from service.campaigns import retention
from service.db.migrate import migrate
from tests.conftest import _admin, with_database
from tests.support.retention import FIRST, seed_old_shape, timed_prune

pytestmark = pytest.mark.anyio

ROWS = "SELECT id, campaign_id, subscriber_id, email_lower, job_id, status, attempts FROM einmal.sends ORDER BY id"


@pytest.fixture
async def old_conn(server_url: str):
    """A database as einmal left it before 0050."""
    name = f"einmal_t_old_sends_{uuid.uuid4().hex[:8]}"  # its own: other sessions and workers run beside it
    await _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}")
    conn = await asyncpg.connect(with_database(server_url, name))
    await migrate(conn, before=FIRST)
    yield conn
    await conn.close()
    await _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_the_migration_keeps_every_row_id_status_and_constraint(old_conn: asyncpg.Connection) -> None:
    conn = old_conn
    await seed_old_shape(conn, campaigns=3, rows=4_000)
    before = await conn.fetch(ROWS)
    bounces = await conn.fetch(
        "SELECT b.id, b.send_id, s.campaign_id FROM einmal.bounces b "
        "JOIN einmal.sends s ON s.id = b.send_id ORDER BY b.id"
    )
    said = []
    conn.add_log_listener(lambda _conn, message: said.append(message.message))
    await conn.execute("SET client_min_messages = debug1")
    assert await migrate(conn) == [f"{v:04d}_{n}" for v, n, _ in db.migrations() if v >= FIRST]
    await conn.execute("RESET client_min_messages")
    # under 0053's exclusive lock the attach read no row: the validated CHECK proved the bound
    assert 'partition constraint for table "sends_legacy" is implied by existing constraints' in said, said
    assert await conn.fetch(ROWS) == before
    assert len(before) == 12_000 and len(bounces) > 0
    assert await conn.fetch("SELECT id, send_id, campaign_id FROM einmal.bounces ORDER BY id") == bounces
    tree = await conn.fetch(
        "SELECT relid::text, isleaf FROM pg_partition_tree('einmal.sends') ORDER BY level, relid::text"
    )
    # and the transactional messages' one partition (0114_messages.sql)
    assert [tuple(r) for r in tree] == [
        ("einmal.sends", False),
        ("einmal.sends_legacy", True),
        ("einmal.sends_messages", True),
    ]
    assert (
        await conn.fetchval(
            "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = 'einmal.sends_legacy'::regclass"
        )
        == "FOR VALUES FROM (MINVALUE) TO ('4')"
    )
    # the legacy table's indexes and foreign keys were attached to the parent's, not built again
    parent = {
        r["conname"]: r["contype"]
        for r in await conn.fetch(
            "SELECT conname, contype::text FROM pg_constraint WHERE conrelid = 'einmal.sends'::regclass"
        )
    }
    assert {
        "sends_one_per_subscriber",
        "sends_one_per_address",
        "sends_job_id_derived",
        "sends_status_check",
        "sends_claimed_has_owner",
        "sends_campaign_id_fkey",
        "sends_account_id_fkey",
        "sends_subscriber_id_fkey",
    } <= set(parent)
    attached = await conn.fetchval(
        "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE c.relkind = 'i' AND c.relname LIKE 'sends_legacy_%'"
    )
    assert attached == 5  # one per subscriber, one per address, claimable, held, in doubt
    row = before[0]
    with pytest.raises(asyncpg.UniqueViolationError):
        await conn.execute(
            "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, "
            "job_id) SELECT campaign_id, account_id, subscriber_id, email, email_lower || 'x', job_id "
            "FROM einmal.sends WHERE id = $1",
            row["id"],
        )
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute("UPDATE einmal.sends SET status = 'lost' WHERE id = $1", row["id"])
    # a new campaign has a partition of its own, and its ids follow the old ones
    account = await conn.fetchval("SELECT id FROM einmal.accounts")
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids) "
        "VALUES ($1, 'new', 's', 'news@example.org', 'b', '{}') RETURNING id",
        account,
    )
    new_id = await conn.fetchval(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id) "
        "SELECT $1, account_id, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id "
        "FROM einmal.subscribers ORDER BY id LIMIT 1 RETURNING id",
        campaign,
    )
    assert new_id > before[-1]["id"]
    assert (
        await conn.fetchval("SELECT tableoid::regclass::text FROM einmal.sends WHERE id = $1", new_id)
        == f"einmal.sends_c{campaign}"
    )


async def test_a_campaign_from_before_the_migration_is_pruned_in_batches(
    old_conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = old_conn
    await seed_old_shape(conn, campaigns=2, rows=1_200)
    await migrate(conn)
    monkeypatch.setattr(retention, "LEGACY_BATCH", 500)
    first, second = (r["id"] for r in await conn.fetch("SELECT id FROM einmal.campaigns ORDER BY id"))
    [candidate] = await retention.candidates(conn, older_than_seconds=30 * 86400, campaign_id=first)
    done = await retention.prune(conn, candidate=candidate)
    assert (done.how, done.rows) == ("rows deleted from sends_legacy", 1_200)
    left = dict(await conn.fetch("SELECT campaign_id, count(*) FROM einmal.sends GROUP BY 1"))
    assert left == {second: 1_200}
    counts = dict(await conn.fetch("SELECT status, n FROM einmal.campaign_counts WHERE campaign_id = $1", first))
    assert counts == {"sent": 600, "failed": 200, "suppressed": 200, "in_doubt": 200}
    assert await retention.candidates(conn, older_than_seconds=0, campaign_id=first) == []


async def test_the_size_of_sends_stays_flat_over_20_campaigns_with_retention(conn: asyncpg.Connection) -> None:
    sizes = []
    for _ in range(20):
        await timed_prune(conn, 2_000)  # a campaign of 2,000 rows sent, then pruned
        sizes.append(
            await conn.fetchval("SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('einmal.sends')")
        )
    print(f"einmal.sends after each of 20 campaigns of 2,000 rows, pruned: {sizes} bytes")
    assert max(sizes) == min(sizes), sizes
    assert await conn.fetchval("SELECT sum(n) FROM einmal.campaign_counts") == 40_000
