"""Recipient builder: turns a campaign's lists into its rows in einmal.sends.

Idempotent and resumable: the build runs in chunks of distinct addresses in
ascending `email_lower` order, each chunk one INSERT … SELECT DISTINCT ON …
ON CONFLICT DO NOTHING in its own transaction, so a chunk holds every copy
of its addresses and a crashed build resumes after the highest address
already present. Several nodes may build the same campaign at once; the
unique constraints make the outcome the same.
"""

import logging

import anyio
import asyncpg
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from actors.wires import Fencing, Wakeups
from service import db, telemetry

log = logging.getLogger("einmal.builder")

CHUNK = 5_000
FIRST_CHUNK = 500


class Builder:
    """Reads the fencing token (its connection's name); wakes the claimer (rows added) and the scheduler (a build
    done)."""

    def __init__(self, pool: asyncpg.Pool, fencing: Fencing, wakeups: Wakeups, db_timeout_seconds: float) -> None:
        self.pool, self.fencing, self.wakeups, self.db_timeout_seconds = pool, fencing, wakeups, db_timeout_seconds

    async def run(
        self, campaigns: MemoryObjectReceiveStream[int], *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with campaigns:
            task_status.started()
            async for campaign_id in campaigns:
                await self.build(campaign_id)

    async def build(self, campaign_id: int, chunk: int = CHUNK) -> int:
        """Build the campaign's recipients; return how many rows this call added."""
        added: int = 0
        with telemetry.tracer().start_as_current_span("campaign.build") as span:
            span.set_attribute("einmal.campaign_id", campaign_id)
            async with db.actor_connection(self.pool, "builder", self.fencing.token, self.db_timeout_seconds) as conn:
                after = await conn.fetchval(*db.sql("recipients_build_resume", campaign_id=campaign_id))
                size = min(FIRST_CHUNK, chunk)  # a small first chunk: sending starts sooner
                analysed = 0  # rows added when the statistics were last made (docs/design.md#recipient-build)
                while True:
                    row = await conn.fetchrow(
                        *db.sql("recipients_build_chunk", campaign_id=campaign_id, after=after, size=size)
                    )
                    assert row is not None  # the query returns one row
                    size = chunk
                    added += row["inserted"]
                    if added and not analysed:  # the first rows: plans made from here on see them
                        await conn.execute(*db.sql("sends_analyze", campaign_id=campaign_id))
                        analysed = added
                    if row["inserted"]:
                        self.wakeups.claimer.set()
                    if row["upper"] is None:
                        break
                    after = row["upper"]
                if added > analysed:
                    await conn.execute(*db.sql("sends_analyze", campaign_id=campaign_id))
                if await conn.fetchrow(*db.sql("recipients_build_done", campaign_id=campaign_id)):
                    log.info("campaign %d: recipients built (%d rows added here)", campaign_id, added)
                    self.wakeups.scheduler.set()
            span.set_attribute("einmal.rows_added", added)
        return added
