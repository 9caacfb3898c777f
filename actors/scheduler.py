"""Scheduler: starts due campaigns, finishes done ones, keeps this node alive
and returns the rows of dead nodes.

Runs every EINMAL_TICK_SECONDS, and at once when a campaign notification
arrives. Starting is a compare-and-set: of several nodes exactly one moves a
campaign approved -> sending; every node then helps send it. Each tick also
pauses a sending campaign whose complaint, hard-bounce or policy-rejection
rate crossed its threshold (service/campaigns/self_pause.py); the writer brings the tick
forward when it recorded a refusal or a rejection.

Each tick, and so at start and on every new connection, it also asks the
server what replication the promise can count on (actors/failover.py).
"""

import logging
import os
import time
from contextlib import suppress

import anyio
import asyncpg
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from actors import failover
from actors.sections import SchedulerConfig
from actors.wires import Fencing, Heartbeat, Journal, Replication, Unrecorded, Wakeups
from service import db, telemetry

log = logging.getLogger("einmal.scheduler")

MIN_NUDGED_GAP = 0.05  # seconds between ticks that a nudge brings forward


class Scheduler:
    """Writes the heartbeat, and with the replication check the replication wire; reads the fencing token and
    the unrecorded answers' tokens (it heartbeats them); wakes the claimer, is woken by `wakeups.scheduler`."""

    def __init__(
        self,
        config: SchedulerConfig,
        pool: asyncpg.Pool,
        fencing: Fencing,
        unrecorded: Unrecorded,
        heartbeat: Heartbeat,
        replication: Replication,
        journal: Journal,
        wakeups: Wakeups,
    ) -> None:
        self.config, self.pool, self.fencing, self.unrecorded = config, pool, fencing, unrecorded
        self.heartbeat, self.replication, self.journal, self.wakeups = heartbeat, replication, journal, wakeups

    async def run(
        self, to_builder: MemoryObjectSendStream[int], *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with to_builder:
            await self.tick(to_builder)
            task_status.started()
            while True:
                last = anyio.current_time()
                if await self.wakeups.scheduler.wait(self.config.tick_seconds):
                    # nudges come in bursts (every node's sender, every notification): one tick per gap
                    await anyio.sleep(max(last + MIN_NUDGED_GAP - anyio.current_time(), 0))
                await self.tick(to_builder)

    async def tick(self, to_builder: MemoryObjectSendStream[int]) -> None:
        config, token = self.config, self.fencing.token
        async with db.actor_connection(self.pool, "scheduler", token, config.db_timeout_seconds) as conn:
            # a failed incarnation's token stays alive until the answers it holds are recorded
            # (docs/design.md#in-doubt-bound): after an outage longer than the node timeout, nobody may return its rows
            # before that
            for held in dict.fromkeys([token, *self.unrecorded.tokens()]):
                await conn.execute(
                    *db.sql("node_heartbeat", token=held, hostname=self.fencing.hostname, pid=os.getpid())
                )
            self.heartbeat.at = time.monotonic()
            await failover.check_replication(self.replication, self.journal, conn)
            # this node's own retired tokens are the send pipeline's to return, after it recorded
            # what they got answered (actors/node.py)
            rescued = await conn.fetchrow(*config.rescue.query([]))
            assert rescued is not None  # the query returns one row
            if rescued["nodes"] or rescued["queued"] or rescued["in_doubt"]:
                log.warning(
                    "returned rows of %d dead node(s): %d queued again, %d in doubt",
                    rescued["nodes"],
                    rescued["queued"],
                    rescued["in_doubt"],
                )
                self.wakeups.claimer.set()
            for due in await conn.fetch(*db.sql("campaign_due")):
                with telemetry.tracer().start_as_current_span("campaign.start") as span:
                    span.set_attribute("einmal.campaign_id", due["id"])
                    started = await conn.fetchrow(*db.sql("campaign_start", campaign_id=due["id"]))
                    span.set_attribute("einmal.won", started is not None)
                if started:
                    log.info("campaign %d: approved -> sending", due["id"])
            unbuilt = [r["id"] for r in await conn.fetch(*db.sql("campaign_unbuilt"))]
            sending = await conn.fetch(*db.sql("campaign_sending"))
            if sending:  # a campaign whose complaint, bounce or refusal rate crossed its threshold pauses itself
                await config.self_pause(conn)
            for campaign in sending:
                if not (campaign["finishes"] and campaign["built"]):  # a list's confirmations, a step: never done
                    continue
                if (finished := await finish(conn, campaign["id"])) is not None:
                    log.info("campaign %d: sending -> sent", campaign["id"])
                    if finished["in_doubt"]:
                        log.warning(
                            "campaign %d: %d message(s) in doubt (the relay may or may not have taken them): "
                            "decide with `einmal reconcile %d`",
                            campaign["id"],
                            finished["in_doubt"],
                            campaign["id"],
                        )
        for campaign_id in unbuilt:
            with suppress(anyio.WouldBlock):  # the builder is busy; the next tick hands it over again
                to_builder.send_nowait(campaign_id)
        if sending:
            self.wakeups.claimer.set()


async def finish(conn: asyncpg.Connection, campaign_id: int) -> asyncpg.Record | None:
    """CAS sending -> sent when nothing is left, under the campaign's lock: its row (with the rows left
    `in_doubt`), None when it did not finish."""
    async with conn.transaction():
        if await conn.fetchval(*db.sql("campaign_lock", campaign_id=campaign_id)) is None:
            return None
        return await conn.fetchrow(*db.sql("campaign_finish", campaign_id=campaign_id))
