"""Pruner: removes the double opt-in sign-ups unconfirmed past EINMAL_OPTIN_WINDOW_HOURS
(service/subscribers/optin.py), the public clients' counts of windows long past (service/clients.py), the
Idempotency-Keys of transactional messages past EINMAL_MESSAGE_KEY_HOURS and, with EINMAL_MESSAGE_RETENTION_DAYS
set, the messages older (service/messages/messages.py)
and, with EINMAL_RETENTION_DAYS set, prunes the campaigns finished longer ago (service/campaigns/retention.py).

At start, then every EVERY seconds, on a connection of its own: the scheduler's tick never waits for a
prune. One node at a time prunes (a session advisory lock, tried, not waited for; behind a transaction
pooler none is taken, as each step of a prune is safe with two nodes at once). A campaign whose prune fails
(a DETACH that found the table's lock taken for longer than its lock timeout) is logged and left for the
next pass; the pruner does not stop for it.
"""

import logging

import anyio
import asyncpg
from anyio.abc import TaskStatus

from actors.sections import PrunerConfig
from actors.wires import Fencing
from service import clients, db
from service.accounts import doctor
from service.campaigns import retention

log = logging.getLogger("einmal.pruner")

EVERY = 3600.0  # seconds between passes


async def prune_once(config: PrunerConfig, pool: asyncpg.Pool, fencing: Fencing) -> int:
    """One pass: the campaigns it pruned (0 while another node holds the turn). Reads the fencing token (its
    connection's name)."""
    days = config.retention_days
    pruned = 0
    async with db.actor_connection(pool, "pruner", fencing.token, config.db_timeout_seconds) as conn:
        if config.locking and not await conn.fetchval(*db.sql("prune_turn_take")):
            return 0
        members, rows = await config.prune_optin(conn)
        if members:
            log.info(
                "removed %d sign-up(s) unconfirmed for %g hours, and %d confirmation row(s)",
                members,
                config.optin_window_hours,
                rows,
            )
        await clients.prune(conn)
        await doctor.prune(conn)
        if keys := await config.prune_keys(conn):
            log.info("forgot the Idempotency-Keys of %d message(s) older than %gh", keys, config.message_key_hours)
        if gone := await config.prune_messages(conn):
            log.info("deleted %d message(s) older than %g days", gone, config.message_retention_days)
        for candidate in await retention.candidates(conn, older_than_seconds=days * 86400) if days is not None else ():
            try:
                done = await retention.prune(conn, candidate=candidate)
            except asyncpg.PostgresError as exc:
                log.warning("campaign %d: prune failed, tried again in %gs: %s", candidate.id, EVERY, exc)
                continue
            if done.how.startswith("skipped"):
                log.info("campaign %d (%s): not pruned, %s", done.id, done.status, done.how)
                continue
            pruned += 1
            log.info("campaign %d (%s): pruned, %s; %d rows counted", done.id, done.status, done.how, done.rows)
        # the connection is dropped with its session, and the turn with it (db.actor_connection)
    return pruned


async def run(
    config: PrunerConfig,
    pool: asyncpg.Pool,
    fencing: Fencing,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    while True:
        await prune_once(config, pool, fencing)
        await anyio.sleep(EVERY)
