"""Webhook delivery: posts the events of the outbox (einmal.webhook_deliveries, written by the triggers of
sql/migrations/0112_webhooks.sql) to their endpoints, signed, tried again on the schedule, parked after the
last attempt (docs/design.md#webhooks).

The table is the truth: a NOTIFY on einmal_webhook (a new event, a replay) wakes the actor, and so does its
tick (EINMAL_WEBHOOK_TICK_SECONDS), for retries come due and for what a lost notification carried. Each pass
claims, with a lease, due deliveries up to the free places of EINMAL_WEBHOOK_IN_FLIGHT, and for no endpoint
more than EINMAL_WEBHOOK_ENDPOINT_IN_FLIGHT in flight anywhere in the cluster: an endpoint that hangs holds
that many places for at most EINMAL_WEBHOOK_TIMEOUT_SECONDS, never another endpoint's delivery. A node that
dies with a delivery leased leaves it to whoever claims after the lease ends; one that stops gives its leases
back: a delivery may arrive twice (with its id, the same each time), never not at all.

Its connections are its own: a pool of two for claims and outcomes (never the sending's), and one for
LISTEN (to EINMAL_LISTEN_DATABASE_URL when set).
"""

import logging
import uuid

import anyio
import asyncpg
import httpcore
from anyio.abc import TaskStatus

from actors.sections import WebhookConfig
from actors.wires import Nudge
from service import db
from service.webhooks import delivery, schedule

log = logging.getLogger("einmal.webhooks")

PRUNE_EVERY = 600.0  # seconds between prunes of delivered events
PRUNE_BATCH = 5000


async def claim(conn: asyncpg.Connection, config: WebhookConfig, *, token: str, limit: int) -> list[asyncpg.Record]:
    """Lease for `token` up to `limit` due deliveries, within the endpoints' and the accounts' shares of the
    whole cluster: the claims of all nodes take turns (webhook_claim_lock.sql), each counting the leases of
    those before it."""
    async with conn.transaction():
        await conn.execute(*db.sql("webhook_claim_lock"))
        return await conn.fetch(
            *db.sql(
                "webhook_claim",
                token=token,
                limit=limit,
                per_endpoint=config.endpoint_in_flight,
                per_account=config.account_in_flight,
                slots=config.in_flight,
                lease_seconds=config.lease_seconds,
            )
        )


class WebhookActor:
    """Shares nothing with the other actors but the node's name: its connections, its wake-ups are its own."""

    def __init__(self, config: WebhookConfig, node_id: str) -> None:
        self.config, self.node_id = config, node_id
        self.nudge = Nudge()
        self.token = f"{node_id}:webhooks:{uuid.uuid4().hex[:8]}"
        self.in_flight = 0

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listen = await db.connect(
            self.config.listen_url,
            command_timeout=self.config.db_timeout_seconds,
            name=f"einmal webhooks {self.node_id}",
        )
        lost = anyio.Event()
        listen.add_termination_listener(lambda _c: lost.set())
        try:
            pool = await db.create_pool(
                self.config.dsn, size=2, name="einmal webhooks", command_timeout=self.config.db_timeout_seconds
            )
        except BaseException:
            listen.terminate()
            raise
        http = self.config.client()
        try:
            await listen.add_listener("einmal_webhook", lambda *_: self.nudge.set())
            async with anyio.create_task_group() as tg:
                task_status.started()
                pruned_at = -PRUNE_EVERY
                while True:
                    if lost.is_set():
                        raise ConnectionError("the webhook actor's LISTEN connection was lost")
                    if anyio.current_time() - pruned_at >= PRUNE_EVERY:
                        pruned_at = anyio.current_time()
                        await self._prune(pool)
                    claimed = await self._claim(pool, tg, http)
                    if not claimed:
                        await self.nudge.wait(self.config.tick_seconds)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await http.aclose()
                try:  # what was in flight is due again at once, not when its lease would end
                    async with db.acquire(pool, timeout=1) as conn:
                        await conn.execute(*db.sql("webhook_release", token=self.token))
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.info("webhook leases not given back (they end by themselves): %s", exc)
                await pool.close()
                try:
                    await listen.close()
                except (OSError, asyncpg.InterfaceError, asyncpg.PostgresError):
                    listen.terminate()

    async def _claim(self, pool: asyncpg.Pool, tg: anyio.abc.TaskGroup, http: httpcore.AsyncConnectionPool) -> int:
        free = self.config.in_flight - self.in_flight
        if free <= 0:
            return 0
        async with db.acquire(pool) as conn:
            rows = await claim(conn, self.config, token=self.token, limit=free)
        for row in rows:
            self.in_flight += 1
            tg.start_soon(self._deliver, pool, http, row)
        return len(rows)

    async def _deliver(self, pool: asyncpg.Pool, http: httpcore.AsyncConnectionPool, row: asyncpg.Record) -> None:
        try:
            secrets = [row["secret"]] + ([row["previous_secret"]] if row["previous_secret"] else [])
            outcome = await self.config.post(
                http,
                url=row["url"],
                event_id=row["event_id"],
                body=row["body"].encode(),
                secrets=secrets,
            )
            await self._record(pool, row, outcome)
        finally:
            self.in_flight -= 1
            self.nudge.set()  # a place is free, and this endpoint may have more due

    async def _record(self, pool: asyncpg.Pool, row: asyncpg.Record, outcome: delivery.Outcome) -> None:
        event_id, endpoint_id = row["event_id"], row["endpoint_id"]
        failures = row["attempts"] + 1
        status: int | None = None
        asked: float | None = None
        if isinstance(outcome, delivery.Answered):
            status = outcome.status
            if 200 <= status < 300:
                await self._write(pool, row, "delivered", 0.0, status, None)
                return
            if status == 410:
                async with db.acquire(pool) as conn:
                    parked = await conn.fetch(
                        *db.sql(
                            "webhook_endpoint_gone",
                            endpoint_id=endpoint_id,
                            reason=f"410 Gone from {row['url'][:200]}",
                        )
                    )
                log.warning(
                    "webhook endpoint %d answered 410 Gone: disabled, %d deliveries parked", endpoint_id, len(parked)
                )
                return
            error = f"HTTP {status}" + (f": {outcome.excerpt}" if outcome.excerpt else "")
            asked = schedule.retry_after(outcome.retry_after)
        else:
            error = outcome.error
        wait = schedule.next_delay(failures, self.config.delays, asked)
        if wait is None:
            log.warning(
                "webhook %s to endpoint %d parked after %d attempts: %s", event_id, endpoint_id, failures, error
            )
            await self._write(pool, row, "parked", 0.0, status, error)
        else:
            await self._write(pool, row, "pending", wait, status, error)

    async def _write(
        self, pool: asyncpg.Pool, row: asyncpg.Record, state: str, delay: float, status: int | None, error: str | None
    ) -> None:
        async with db.acquire(pool) as conn:
            await conn.fetchval(
                *db.sql(
                    "webhook_delivery_record",
                    event_id=row["event_id"],
                    endpoint_id=row["endpoint_id"],
                    token=self.token,
                    state=state,
                    delay_seconds=delay,
                    status=status,
                    error=error[:500] if error else None,
                )
            )

    async def _prune(self, pool: asyncpg.Pool) -> None:
        async with db.acquire(pool) as conn:
            gone = await conn.fetchval(
                *db.sql(
                    "webhook_events_prune",
                    older_than_seconds=self.config.retention_days * 86400,
                    limit=PRUNE_BATCH,
                )
            )
        if gone:
            log.info("pruned %d delivered webhook events", gone)
