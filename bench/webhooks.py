"""Webhook deliveries per second of one node's delivery actor (actors/webhooks.py) at the shipped defaults
(EINMAL_WEBHOOK_IN_FLIGHT, EINMAL_WEBHOOK_ENDPOINT_IN_FLIGHT, EINMAL_WEBHOOK_TICK_SECONDS): the outbox filled
with N events (a campaign's rows moved to 'sent' by one statement, the trigger writing an event and a delivery
each) for one endpoint of an always-200 receiver on 127.0.0.1 (tests/support/webhook_receiver.py), timed from
the actor's start to the last delivery recorded as delivered. Against a reference measured in the same run: the
same events' bodies, signed the same way, posted by an httpx client to the same receiver at the concurrency the
actor has for one endpoint (the lesser of the two in-flight settings), a new connection each, as the actor
makes. The difference is the outbox: claiming with a lease, and recording each outcome.

    python -m bench.webhooks [--events 5000]
"""

import argparse
import sys
import time
from dataclasses import dataclass

import anyio
import asyncpg
import httpx

from actors.sections import webhook_config
from actors.webhooks import WebhookActor
from bench import database
from bench.report import row
from service import db
from service.settings import Settings
from service.webhooks import signing
from tests.support.webhook_receiver import Receiver

SEED_SQL = """
WITH a AS (INSERT INTO einmal.accounts (name) VALUES ('bench-webhooks') RETURNING id)
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
SELECT id, 'bench', 's', 'f@example.org', 'b', '{}', 'sending' FROM a RETURNING account_id, id
"""
SENDS_SQL = """
WITH s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower)
    SELECT $1, 'w' || g || '@example.org', 'w' || g || '@example.org' FROM generate_series(1, $3) g
    RETURNING id, email, email_lower
)
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, claimed_by)
SELECT $2::bigint, $1::bigint, s.id, s.email, s.email_lower, 'campaign:' || $2::bigint || ':' || s.id, 'sending',
       'bench'
FROM s
"""


@dataclass
class Deliveries:
    events: int
    concurrency: int
    reference_seconds: float
    actor_seconds: float

    @property
    def reference_rate(self) -> float:
        return self.events / self.reference_seconds

    @property
    def actor_rate(self) -> float:
        return self.events / self.actor_seconds

    @property
    def ratio(self) -> float:
        return self.actor_rate / self.reference_rate


async def _fill(conn: asyncpg.Connection, events: int, url: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The outbox of N message.sent events for one endpoint at `url`: (its secret, each event's id and body)."""
    seeded = await conn.fetchrow(SEED_SQL)
    assert seeded is not None
    account, campaign = seeded
    await conn.execute(SENDS_SQL, account, campaign, events)
    secret = signing.new_secret()
    await conn.execute(
        "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) VALUES ($1, $2, '{message.sent}', $3)",
        account,
        url,
        secret,
    )
    await conn.execute("UPDATE einmal.sends SET status = 'sent' WHERE campaign_id = $1", campaign)
    await conn.execute("VACUUM ANALYZE einmal.webhook_deliveries")
    await conn.execute("VACUUM ANALYZE einmal.webhook_events")
    rows = await conn.fetch("SELECT id, payload::text AS payload FROM einmal.webhook_events ORDER BY sequence")
    return secret, [(str(r["id"]), r["payload"].encode()) for r in rows]


async def _reference(url: str, secret: str, bodies: list[tuple[str, bytes]], concurrency: int) -> float:
    """Seconds for `concurrency` workers of one httpx client to post every body, signed, each answered."""
    work = iter(bodies)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def worker() -> None:
            for event_id, body in work:
                headers = signing.headers(event_id, int(time.time()), body, [secret])
                answer = await client.post(url, content=body, headers=[(k.decode(), v.decode()) for k, v in headers])
                answer.raise_for_status()

        began = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        return time.perf_counter() - began


async def _actor(dsn: str, conn: asyncpg.Connection, receiver: Receiver, events: int, timeout: float) -> float:
    """Seconds from the actor's start to every delivery recorded as delivered."""
    settings = Settings(database_url=dsn, webhook_allow_http_loopback=True)
    actor = WebhookActor(webhook_config(settings, dsn), "bench-node")
    before = len(receiver.requests)
    began = time.perf_counter()
    with anyio.fail_after(timeout):
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            while len(receiver.requests) - before < events:
                await anyio.sleep(0.01)
            while await conn.fetchval("SELECT count(*) FROM einmal.webhook_deliveries WHERE state <> 'delivered'"):
                await anyio.sleep(0.01)
            seconds = time.perf_counter() - began
            tg.cancel_scope.cancel()
    return seconds


async def measure(server: str, events: int) -> Deliveries:
    name = "einmal_bench_webhooks"
    dsn = await database.fresh(server, name)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            await db.init(conn)
            async with Receiver() as receiver:
                secret, bodies = await _fill(conn, events, receiver.url())
                shipped = Settings(database_url=dsn)
                concurrency = min(shipped.webhook_in_flight, shipped.webhook_endpoint_in_flight)
                reference = await _reference(receiver.url(), secret, bodies, concurrency)
                actor = await _actor(dsn, conn, receiver, events, timeout=max(60.0, events / 20))
        finally:
            await conn.close()
    finally:
        await database.drop(server, name)
    return Deliveries(events, concurrency, reference, actor)


def report(result: Deliveries, say=print) -> None:
    say(
        row(
            f"webhooks, httpx at {result.concurrency} in flight, {result.events:,}",
            f"{result.reference_rate:,.0f}/s ({result.reference_seconds:.2f} s)",
            "(the reference)",
            None,
        )
    )
    say(
        row(
            "webhook deliveries, 1 node's actor, defaults",
            f"{result.actor_rate:,.0f}/s = {result.ratio:.2f} × httpx",
            "(no target)",
            None,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5_000, help="events in the outbox (default 5000)")
    args = parser.parse_args(argv)
    if not 100 <= args.events <= 1_000_000:
        parser.exit(2, "python -m bench.webhooks: --events from 100 to 1000000\n")
    server, _ = database.server_url()
    report(anyio.run(measure, server, args.events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
