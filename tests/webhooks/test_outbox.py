"""The outbox: each change of mail an endpoint subscribes to writes its event in the change's own
transaction, by trigger (sql/migrations/0112_webhooks.sql); a change rolled back leaves none."""

import json

import anyio
import asyncpg
import pytest

from service import db
from service.messages import messages
from service.messages.messages import Queueing
from service.settings import Settings
from service.subscribers import suppressions
from tests.support.webhooks import account_with_sends, deliveries, endpoint, events

pytestmark = pytest.mark.anyio

ADDRESSES = ["ann@example.org", "bob@example.org", "cy@example.org"]


async def settle(conn: asyncpg.Connection, campaign: int, outcomes: dict[str, str]) -> None:
    """One statement, as the sending's: rows to 'sent' and 'failed' in two CTEs of it."""
    await conn.execute(
        """WITH s AS (UPDATE einmal.sends SET status = 'sent', sent_at = now()
                      WHERE campaign_id = $1 AND email_lower = ANY ($2::text[]) RETURNING 1),
                f AS (UPDATE einmal.sends SET status = 'failed', last_reply = '550 5.1.1 no such user'
                      WHERE campaign_id = $1 AND email_lower = ANY ($3::text[]) RETURNING 1)
           SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM f)""",
        campaign,
        [a for a, o in outcomes.items() if o == "sent"],
        [a for a, o in outcomes.items() if o == "failed"],
    )


async def test_sent_and_failed_rows_write_one_event_each_with_a_delivery_per_endpoint(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    one, _ = await endpoint(conn, account, "https://a.example.org/h")
    two, _ = await endpoint(conn, account, "https://b.example.org/h", events=["message.failed"])
    await settle(conn, campaign, {"ann@example.org": "sent", "bob@example.org": "failed"})
    found = await events(conn)
    assert sorted((e["type"], json.loads(e["payload"])["email"]) for e in found) == [
        ("message.failed", "bob@example.org"),
        ("message.sent", "ann@example.org"),
    ]
    failed = next(e for e in found if e["type"] == "message.failed")
    # the account sends through the installation's relays: the reply's codes (service/accounts/replies.py)
    assert json.loads(failed["payload"])["reply"] == "550 5.1.1"
    assert all(e["id"].startswith("evt_") for e in found)
    fanned = sorted((d["event_id"] == failed["id"], d["endpoint_id"], d["state"]) for d in await deliveries(conn))
    assert fanned == [(False, one, "pending"), (True, one, "pending"), (True, two, "pending")]
    # the same status again (a repeated write) is no change: no event
    await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE email_lower = 'ann@example.org'")
    assert len(await events(conn)) == 2


async def test_a_change_rolled_back_leaves_no_event(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    with pytest.raises(RuntimeError):
        async with conn.transaction():
            await settle(conn, campaign, {"ann@example.org": "sent"})
            await suppressions.suppress(conn, account, ["bob@example.org"], "unsubscribe")
            assert len(await events(conn)) == 2  # written, in the transaction
            raise RuntimeError("the change fails")
    assert await events(conn) == [] and await deliveries(conn) == []


async def test_no_endpoint_no_event(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    other, _ = await account_with_sends(conn, "other", ["dan@example.org"])
    await endpoint(conn, other, "https://o.example.org/h")  # another account's
    disabled, _ = await endpoint(conn, account, "https://a.example.org/h")
    await conn.execute(
        "UPDATE einmal.webhook_endpoints SET disabled_at = now(), disabled_reason = 'test' WHERE id = $1", disabled
    )
    await endpoint(conn, account, "https://b.example.org/h", events=["subscriber.confirmed"])  # not subscribed
    await settle(conn, campaign, {"ann@example.org": "sent", "bob@example.org": "failed"})
    assert await events(conn) == []


async def test_confirmation_campaigns_write_no_message_events(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    await conn.execute("UPDATE einmal.campaigns SET kind = 'confirmation' WHERE id = $1", campaign)
    await settle(conn, campaign, {"ann@example.org": "sent"})
    assert await events(conn) == []


async def test_bounce_complaint_unsubscribe_and_confirmation_events(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    await settle(conn, campaign, {a: "sent" for a in ADDRESSES})
    ann, bob = [
        await conn.fetchval("SELECT id FROM einmal.sends WHERE email_lower = $1", a)
        for a in ("ann@example.org", "bob@example.org")
    ]
    for event_id, send_id, kind, reason in [("x:1", ann, "hard", "no_mailbox"), ("x:2", bob, "complaint", "complaint")]:
        await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'h')", event_id)
        await conn.execute(
            "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason, counts) "
            "VALUES ($1, $2, $3, $4, '5.1.1', $5, false)",
            event_id,
            account,
            send_id,
            kind,
            reason,
        )
    await suppressions.suppress(conn, account, ["cy@example.org"], "unsubscribe")
    await suppressions.suppress(conn, account, ["dee@example.org"], "manual")  # no event: not an unsubscribe
    await conn.execute("UPDATE einmal.list_members SET state = 'unconfirmed'")  # no event: not a confirmation
    await conn.execute(
        "UPDATE einmal.list_members m SET state = 'confirmed', confirmed_at = now() FROM einmal.subscribers s "
        "WHERE s.id = m.subscriber_id AND s.email_lower = 'ann@example.org'"
    )
    found = [(e["type"], json.loads(e["payload"])) for e in await events(conn)][3:]
    assert [(t, p["email"]) for t, p in found] == [
        ("message.bounced", "ann@example.org"),
        ("message.complained", "bob@example.org"),
        ("subscriber.unsubscribed", "cy@example.org"),
        ("subscriber.confirmed", "ann@example.org"),
    ]
    assert found[0][1]["reason"] == "no_mailbox" and found[0][1]["campaign_id"] == campaign
    assert found[3][1]["list"] == "l"


async def test_each_address_has_its_own_order(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    await settle(conn, campaign, {"ann@example.org": "sent", "bob@example.org": "sent"})
    await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
    numbered = [(json.loads(e["payload"])["email"], e["sequence"]) for e in await events(conn)]
    assert sorted(numbered) == [("ann@example.org", 1), ("ann@example.org", 2), ("bob@example.org", 1)]


async def test_an_endpoint_removed_while_events_are_written_for_it_takes_their_deliveries(conn, dsn: str) -> None:
    """The sending's statement holds the endpoints it fans out to (FOR KEY SHARE, sql/migrations/0155): a removal
    meanwhile waits for its commit, and then its deliveries go with the endpoint; none is left for an endpoint
    that is gone, and many addresses in one statement are numbered each in its own order."""
    addresses = [f"u{i}@example.org" for i in range(50)]
    account, campaign = await account_with_sends(conn, "acme", addresses)
    endpoint_id, _ = await endpoint(conn, account, "https://a.example.org/h")
    removed = anyio.Event()

    async def remove() -> None:
        other = await asyncpg.connect(dsn)
        try:
            await other.execute("DELETE FROM einmal.webhook_endpoints WHERE id = $1", endpoint_id)
            removed.set()
        finally:
            await other.close()

    async with anyio.create_task_group() as tg:
        async with conn.transaction():
            await settle(conn, campaign, dict.fromkeys(addresses, "sent"))
            assert len(await deliveries(conn)) == len(addresses)
            tg.start_soon(remove)
            await anyio.sleep(0.5)
            assert not removed.is_set(), "the removal did not wait for the events' commit"
    assert removed.is_set()
    assert await deliveries(conn) == []
    assert sorted((json.loads(e["payload"])["email"], e["sequence"]) for e in await events(conn)) == sorted(
        (a, 1) for a in addresses
    )


async def test_the_sendings_own_statement_writes_the_events(conn) -> None:
    """send_advance.sql, the statement the recorder runs for each group, unchanged."""
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    rows = await conn.fetch("SELECT id, email_lower FROM einmal.sends ORDER BY id")
    await conn.fetch(
        *db.sql(
            "send_advance",
            ids=[r["id"] for r in rows],
            statuses=["sent", "failed", "queued"],
            replies=["250 ok", "550 5.1.1 unknown", "451 later"],
            attempts=[1, 1, 1],
            retry_afters=[0.0, 0.0, 10.0],
            bounces=[False, True, False],
            throttled=[False, False, False],
            campaign_ids=[campaign] * 3,
            token="t",
            start_ids=[],
            start_campaign_ids=[],
            pause_seconds=1.0,
            pause_max_seconds=2.0,
        )
    )
    assert sorted(e["type"] for e in await events(conn)) == ["message.failed", "message.sent"]


async def test_an_erasure_leaves_no_event_with_the_address(conn) -> None:
    from service.subscribers import erasure

    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    ann = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'ann@example.org'")
    await endpoint(conn, account, "https://a.example.org/h")
    await settle(conn, campaign, {"ann@example.org": "sent", "bob@example.org": "sent"})
    await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
    async with conn.transaction():
        await erasure.erase(conn, account, "ann@example.org")
    payloads = [json.loads(e["payload"]) for e in await events(conn)]
    assert "ann@example.org" not in json.dumps(payloads)
    placeholder = f"erased-{ann}@erased.invalid"
    assert sorted(p["email"] for p in payloads) == ["bob@example.org", placeholder, placeholder]
    assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_sequences") == 1  # bob's


async def test_a_transactional_message_writes_its_events_with_its_id(conn, dsn: str) -> None:
    """A message (migration 0114) is a campaign of its own: its rows write message.sent / message.failed as a
    campaign's do, naming the message."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    await endpoint(conn, account, "https://a.example.org/h")
    settings = Settings(database_url=dsn)
    made = [
        await messages.send(
            conn,
            queueing=Queueing.of(settings),
            account_id=account,
            to=to,
            subject="Your receipt",
            body_text="Thanks\n",
            from_address="Acme <shop@example.com>",
        )
        for to in ("ann@example.org", "bob@example.org")
    ]
    await conn.execute("UPDATE einmal.sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1", made[0].id)
    await conn.execute("UPDATE einmal.sends SET status = 'failed' WHERE campaign_id = $1", made[1].id)
    found = sorted((e["type"], json.loads(e["payload"])["message_id"]) for e in await events(conn))
    assert found == [("message.failed", made[1].id), ("message.sent", made[0].id)]


async def test_a_sequence_steps_rows_write_step_sent_and_failed_with_the_step(conn) -> None:
    account, campaign = await account_with_sends(conn, "acme", ADDRESSES)
    await endpoint(conn, account, "https://a.example.org/h")
    list_id = await conn.fetchval("SELECT list_ids[1] FROM einmal.campaigns WHERE id = $1", campaign)
    sequence = await conn.fetchval(
        "INSERT INTO einmal.sequences (account_id, list_id, name) VALUES ($1, $2, 'welcome') RETURNING id",
        account,
        list_id,
    )
    await conn.execute(
        "UPDATE einmal.campaigns SET kind = 'step', sequence_id = $2, step_position = 2, step_delay_seconds = 0 "
        "WHERE id = $1",
        campaign,
        sequence,
    )
    await settle(conn, campaign, {"ann@example.org": "sent", "bob@example.org": "failed"})
    found = sorted(
        (e["type"], p["email"], p["sequence_id"], p["position"])
        for e in await events(conn)
        for p in [json.loads(e["payload"])]
    )
    assert found == [
        ("message.failed", "bob@example.org", sequence, 2),
        ("sequence.step_sent", "ann@example.org", sequence, 2),
    ]
