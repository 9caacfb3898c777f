"""Retention: a finished campaign's send rows go, what they came to stays (docs/design.md#retention).

A prune of campaign c, in two steps, each safe to repeat and to run on two nodes at once:
1. under the campaign's row lock: it is sent or cancelled with no row open, its counts are kept
   (einmal.campaign_counts, written when it finished; counted here only when they cannot stand) and it is
   marked pruned (compare-and-set), from when its status, list line and metrics read those counts;
2. its rows go: its partition einmal.sends_c<c> is detached CONCURRENTLY (no claim or update waits) and
   dropped, whatever its size; rows written before 0053 live in einmal.sends_legacy and are deleted in
   batches, one short transaction each.
The bounces and complaints, suppressions and inbound event ids stay; unsubscribe links read none of this.
"""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.errors import UsageError

LEGACY_BATCH = 5_000
LOCK_TIMEOUT = "5s"  # a DETACH waiting longer than this for the parent's lock gives up; the next prune goes on

# DDL naming a campaign's partition cannot be a prepared query file: the name is built here, from an integer.
DETACH = "ALTER TABLE einmal.sends DETACH PARTITION einmal.sends_c{id} CONCURRENTLY"
FINALIZE = "ALTER TABLE einmal.sends DETACH PARTITION einmal.sends_c{id} FINALIZE"
DROP = "DROP TABLE IF EXISTS einmal.sends_c{id}"


@dataclass(frozen=True)
class Candidate:
    id: int
    status: str
    finished_at: datetime
    marked: bool  # marked pruned by a prune cut short: only its rows are left to remove


@dataclass(frozen=True)
class Pruned:
    id: int
    status: str
    rows: int  # what the campaign's kept counts hold
    how: str  # 'partition dropped', 'rows deleted from sends_legacy', or 'skipped: why'


async def candidates(
    conn: asyncpg.Connection, older_than_seconds: float, campaign_id: int | None = None
) -> list[Candidate]:
    rows = await conn.fetch(db.query("prune_candidates"), older_than_seconds, campaign_id)
    return [Candidate(r["id"], r["status"], r["finished_at"], r["marked"]) for r in rows]


async def check_campaign(conn: asyncpg.Connection, campaign_id: int) -> None:
    """UsageError unless `campaign_id` names a finished campaign (an operator's --campaign)."""
    campaign = await conn.fetchrow(db.query("campaign_get"), campaign_id)
    if campaign is None:
        raise UsageError(f"no campaign with id {campaign_id}")
    if campaign["status"] not in ("sent", "cancelled"):
        raise UsageError(f"campaign {campaign_id} is {campaign['status']}: only a sent or cancelled campaign is pruned")


async def _mark(conn: asyncpg.Connection, campaign_id: int) -> tuple[str | None, int]:
    """Step 1: (why not, None when marked or already marked; the rows its counts hold)."""
    async with conn.transaction():
        row = await conn.fetchrow(db.query("prune_lock"), campaign_id)
        if row is None or row["status"] not in ("sent", "cancelled"):
            return f"it is {row['status'] if row else 'gone'}", 0
        if row["pruned_at"] is None:
            if row["open"]:
                return "rows of it are still queued or on the wire", 0
            if not row["counted"]:
                await conn.execute(db.query("campaign_counts_clear"), campaign_id)
                await conn.fetchval(db.query("campaign_counts_write"), campaign_id)
        marked = await conn.fetchrow(db.query("campaign_pruned"), campaign_id)
        return None, marked["n"]


async def _remove(conn: asyncpg.Connection, campaign_id: int) -> str:
    """Step 2, outside any transaction block: the campaign's partition detached and dropped, or its rows in
    sends_legacy deleted in batches. Another node's prune of the same campaign may be a step ahead: a
    statement that fails is tried again from the partition's state as it is then."""
    state = await conn.fetchval(db.query("prune_partition"), campaign_id)
    if state == "legacy":
        while await conn.fetchval(db.query("prune_legacy_batch"), campaign_id, LEGACY_BATCH):
            pass
        return "rows deleted from sends_legacy"
    await conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
    try:
        for attempt in range(3):
            try:
                if state == "attached":
                    await conn.execute(DETACH.format(id=int(campaign_id)))
                elif state == "pending":
                    await conn.execute(FINALIZE.format(id=int(campaign_id)))
                await conn.execute(DROP.format(id=int(campaign_id)))
                break
            except asyncpg.PostgresError:
                if attempt == 2:
                    raise
                state = await conn.fetchval(db.query("prune_partition"), campaign_id)
    finally:
        await conn.execute("RESET lock_timeout")
    return "partition dropped"


async def prune(conn: asyncpg.Connection, candidate: Candidate) -> Pruned:
    """Prune one campaign (both steps); a campaign found still open is skipped, with why."""
    why, rows = await _mark(conn, candidate.id)
    if why is not None:
        return Pruned(candidate.id, candidate.status, 0, f"skipped: {why}")
    return Pruned(candidate.id, candidate.status, rows, await _remove(conn, candidate.id))
