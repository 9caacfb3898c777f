"""The search of an account's subscribers by an attribute (service/subscribers/subscriber.py with_attribute),
against a plain reading of the table: the same subscribers, page after page, whether the account's first
subscribers by id hold a page of them (a common value) or the index of attributes is asked (a rare one, or an
account whose subscribers lie beyond the first ones); another account's never; the erased never. And what
history.of_subscriber tells of a subscriber: its send rows, bounces and clicks, newest campaign first."""

import json

import asyncpg
import pytest

from service.subscribers import history, subscriber
from tests.support.console import accounts, sending_campaign

pytestmark = pytest.mark.anyio


async def expected(conn: asyncpg.Connection, account_id: int, key: str, value: str) -> list[int]:
    rows = await conn.fetch(
        "SELECT id FROM einmal.subscribers WHERE account_id = $1 AND attributes ->> $2 = $3 AND status <> 'erased' "
        "ORDER BY id",
        account_id,
        key,
        value,
    )
    return [r["id"] for r in rows]


async def paged(conn: asyncpg.Connection, account_id: int, key: str, value: str, limit: int) -> list[int]:
    found, after = [], 0
    while True:
        page = await subscriber.with_attribute(
            conn, account_id=account_id, attribute=key, value=value, after_id=after, limit=limit
        )
        found += [s.id for s in page]
        if len(page) < limit:
            return found
        after = page[-1].id


@pytest.mark.parametrize("window", [5000, 7])
async def test_an_attributes_search_finds_what_a_reading_of_every_row_finds(
    conn: asyncpg.Connection, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscriber, "ATTRIBUTE_WINDOW", window)  # 7: the index of attributes answers most
    ids = await accounts(conn, "acme", "other")
    for account in ("other", "acme", "other"):  # acme's subscribers between other's
        await conn.execute(
            "INSERT INTO einmal.subscribers (account_id, email, email_lower, attributes) "
            "SELECT $1, 'p' || i || '-' || $2 || '@example.org', 'p' || i || '-' || $2 || '@example.org', "
            "       jsonb_build_object('plan', CASE WHEN i % 2 = 0 THEN 'pro' ELSE 'free' END, "
            "                          'city', CASE WHEN i % 17 = 0 THEN 'Köln' ELSE 'Bonn' END) "
            "FROM generate_series(1, 60) AS i",
            ids[account],
            f"{account}{await conn.fetchval('SELECT count(*) FROM einmal.subscribers')}",
        )
    gone = await conn.fetchval(
        "SELECT min(id) FROM einmal.subscribers WHERE account_id = $1 AND attributes ->> 'city' = 'Köln'",
        ids["acme"],
    )
    await conn.execute("UPDATE einmal.subscribers SET status = 'erased' WHERE id = $1", gone)
    for account in ("acme", "other"):
        for key, value, limit in (("plan", "pro", 7), ("plan", "free", 50), ("city", "Köln", 2), ("city", "x", 5)):
            want = await expected(conn, ids[account], key, value)
            assert await paged(conn, ids[account], key, value, limit) == want, (account, key, value)
    assert gone not in await paged(conn, ids["acme"], "city", "Köln", 10)
    first = await subscriber.with_attribute(
        conn, account_id=ids["acme"], attribute="plan", value="pro", after_id=0, limit=1
    )
    assert json.loads(json.dumps(first[0].attributes))["plan"] == "pro" and first[0].status == "confirmed"


async def test_a_subscribers_history_is_its_send_rows_with_their_bounces_and_clicks(conn: asyncpg.Connection) -> None:
    ids = await accounts(conn, "acme")
    older = await sending_campaign(conn, "acme", "Spring", rows=4)
    newer = await sending_campaign(conn, "acme", "Summer", rows=4)
    ann = await conn.fetchval("SELECT id FROM einmal.subscribers WHERE email = 'Spring-4@example.org'")
    await conn.execute(  # Summer's fourth message went to Spring's fourth subscriber
        "UPDATE einmal.sends SET subscriber_id = $1, job_id = 'campaign:' || campaign_id || ':' || $1::bigint "
        "WHERE campaign_id = $2 AND email = 'Summer-4@example.org'",
        ann,
        newer,
    )
    send = await conn.fetchval("SELECT id FROM einmal.sends WHERE campaign_id = $1 AND subscriber_id = $2", older, ann)
    await conn.execute("INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ('test:e1', 'h')")
    await conn.execute(
        "INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status) "
        "VALUES ('test:e1', $1, $2, 'hard', '5.1.1')",
        ids["acme"],
        send,
    )
    await conn.execute(
        "INSERT INTO einmal.clicks (id, account_id, campaign_id, subscriber_id, link, url, at, tag, reasons) VALUES "
        "('c1', $1, $2, $3, 1, 'https://example.org', now(), 'human', '{}'), "
        "('c2', $1, $2, $3, 1, 'https://example.org', now(), 'machine', '{prefetch}')",
        ids["acme"],
        older,
        ann,
    )
    found = await history.of_subscriber(conn, account_id=ids["acme"], subscriber_id=ann)
    assert [(h.campaign_id, h.status, h.bounces, h.clicks) for h in found] == [
        (newer, "sent", [], 0),
        (older, "sent", ["hard"], 1),
    ]
    assert await history.of_subscriber(conn, account_id=ids["acme"], subscriber_id=ann, campaigns=1) == found[:1]
    assert await history.of_subscriber(conn, account_id=ids["acme"] + 1, subscriber_id=ann) == []
