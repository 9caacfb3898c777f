"""Sequencer: the sweep that moves each member of a sequence on to its next step (docs/design.md#sequences).

The table is the truth: einmal.sequence_members holds every member's next look (due_at). The sweep holds a running
sequence's steps FOR SHARE (sql/queries/sequence_steps_share.sql), takes at most EINMAL_SEQUENCE_BATCH of its
members that are due, FOR UPDATE SKIP LOCKED (sequence_sweep_lock.sql), and in the same transaction queues each
one's next step and advances it (sequence_sweep.sql, one statement), so that a node killed at any moment leaves
both or neither, and several nodes sweep side by side without meeting. A full batch is followed by another at
once; otherwise the sweep waits for EINMAL_SEQUENCE_TICK_SECONDS or a join's `NOTIFY einmal_sequence`, whichever
comes first (a hint: a lost notification costs a tick, never a member).
"""

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.lowlevel
import asyncpg
from anyio.abc import TaskStatus

from actors.sections import SequencerConfig
from actors.wires import Fencing, Nudge
from service import db
from service.segments import compiled

log = logging.getLogger("einmal.sequencer")


@dataclass(frozen=True)
class Swept:
    looked: int  # members looked at
    queued: int  # send rows queued
    full: bool  # a sequence filled its batch: more may be due


async def sweep_one(
    conn: asyncpg.Connection,
    *,
    sequence_id: int,
    batch: int,
    wait_seconds: float,
    account_id: int = 0,
    rule: Any = None,
) -> tuple[int, int]:
    """One batch of one sequence, one transaction: its steps held FOR SHARE (a delete of one waits, and then
    cancels the rows queued here), the members locked, then read and moved with a snapshot taken after the
    locks (a member another sweep moved meanwhile is read as it now is, with the row that sweep queued). `rule`:
    the segment rule that narrows the sequence (None: none), over account `account_id`'s subscribers.
    (members locked, rows queued)."""
    async with conn.transaction():
        await conn.execute(*db.sql("sequence_steps_share", sequence_id=sequence_id))
        locked = await conn.fetch(*db.sql("sequence_sweep_lock", sequence_id=sequence_id, limit=batch))
        if not locked:
            return 0, 0
        row = await conn.fetchrow(
            *compiled.bound(
                "sequence_sweep",
                rule,
                owner=account_id,
                now=datetime.now(UTC),
                sequence_id=sequence_id,
                subscriber_ids=[r["subscriber_id"] for r in locked],
                wait_seconds=wait_seconds,
            )
        )
    assert row is not None  # an aggregate: always one row
    return len(locked), row["queued"]


async def sweep(conn: asyncpg.Connection, *, batch: int, wait_seconds: float) -> Swept:
    """One pass: one batch of each running sequence with a member due."""
    looked = queued = 0
    full = False
    for due in await conn.fetch(*db.sql("sequence_due")):
        rule = json.loads(due["segment_rule"]) if due["segment_rule"] is not None else None
        locked, added = await sweep_one(
            conn,
            sequence_id=due["id"],
            batch=batch,
            wait_seconds=wait_seconds,
            account_id=due["account_id"],
            rule=rule,
        )
        looked, queued = looked + locked, queued + added
        full = full or locked >= batch
    return Swept(looked, queued, full)


async def run(
    config: SequencerConfig,
    pool: asyncpg.Pool,
    fencing: Fencing,
    stopping: anyio.Event,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Reads the fencing token (its connection's name) and `stopping`."""
    woken = Nudge()
    async with db.actor_connection(pool, "sequencer", fencing.token, config.db_timeout_seconds) as conn:

        def wake(*_: object) -> None:
            woken.set()

        listening = db.holds_a_session(conn)  # behind a transaction pooler a LISTEN would not last: the tick alone
        if listening:
            await conn.add_listener("einmal_sequence", wake)
        task_status.started()
        try:
            while not stopping.is_set():
                swept = await sweep(conn, batch=config.batch, wait_seconds=config.wait_seconds)
                if swept.queued:
                    log.debug("queued %d step(s) of %d member(s) looked at", swept.queued, swept.looked)
                if swept.full:
                    await anyio.lowlevel.checkpoint()  # more are due: at once, letting the other tasks run
                    continue
                await woken.wait(config.tick_seconds)
        finally:
            if listening and not conn.is_closed():
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await conn.remove_listener("einmal_sequence", wake)
