"""A campaign's rows decided by an operator: its failed rows queued again (`einmal campaign retry`, POST
…/retry), and its in-doubt rows — messages whose answer was lost after the final dot (docs/design.md#in-doubt-bound) —
listed and decided (`einmal reconcile`, GET …/in-doubt, POST …/reconcile). Under the campaign's lock, so that
a finish of the campaign waits for them (docs/design.md#state-machines)."""

import re
from dataclasses import dataclass
from datetime import datetime

import anyio
import asyncpg

from service import db
from service.campaigns.transitions import current_status
from service.errors import Conflict, NotFound
from service.text import shown


@dataclass(frozen=True)
class Moved:
    moved: int  # the rows moved (queued again, or marked sent)
    reopened: bool  # whether the campaign, sent, is sending again
    left: int = 0  # of the rows moved, a sequence step's settled instead: their members left the list


@dataclass(frozen=True)
class InDoubt:
    id: int
    email: str
    email_lower: str
    node: str | None  # the node whose SMTP transaction it was in
    since: datetime
    attempts: int
    last_reply: str | None


def chosen(replies: list[str], reason: str | None, pattern: re.Pattern[str] | None) -> list[str] | None:
    """The last replies whose rows go back (None: every failed row)."""
    from service.smtp import reasons

    if reason is not None:
        return [r for r in replies if reasons.of_reply(r)[1] == reason]
    if pattern is not None:
        return [r for r in replies if pattern.search(r)]
    return None


async def retry_failed(
    conn: asyncpg.Connection, *, campaign_id: int, reason: str | None = None, pattern: re.Pattern[str] | None = None
) -> Moved:
    """The campaign's failed rows back to the queue, those whose last reply has `reason` or matches `pattern`
    when given. NotFound without the campaign, Conflict when it is cancelled."""
    async with conn.transaction():
        campaign = await conn.fetchrow(*db.sql("campaign_lock_status", campaign_id=campaign_id))
        if campaign is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        if campaign["status"] == "cancelled":
            raise Conflict(f"cannot retry failed rows of campaign {campaign_id}: it is cancelled")
        replies = None
        if reason is not None or pattern is not None:
            found = [r["reply"] for r in await conn.fetch(*db.sql("sends_failed_replies", campaign_id=campaign_id))]
            # one distinct reply a failed row at worst: classified off the event loop (the API serves others)
            replies = await anyio.to_thread.run_sync(chosen, found, reason, pattern)
            if not replies:
                return Moved(0, False)
        moved = await conn.fetchval(*db.sql("sends_retry_failed", campaign_id=campaign_id, replies=replies))
        return await requeued(conn, campaign_id=campaign_id, moved=moved)


async def requeued(conn: asyncpg.Connection, *, campaign_id: int, moved: int) -> Moved:
    """After `moved` rows of the campaign went back to the queue, in the transaction that moved them: a
    sequence step's rows of members who left its list since are settled as a leave settles them (no step goes
    to a member who left, docs/design.md#sequences), a sent campaign is reopened (compare-and-set) and the nodes
    are told."""
    if not moved:
        return Moved(0, False)
    left = await conn.fetchval(*db.sql("sequence_step_rows_left", campaign_id=campaign_id))
    moved -= left
    if not moved:
        return Moved(0, False, left)
    reopened = await conn.fetchval(*db.sql("campaign_reopen", campaign_id=campaign_id)) is not None
    await conn.execute(*db.sql("campaign_notify", campaign_id=campaign_id))
    return Moved(moved, reopened, left)


async def in_doubt(
    conn: asyncpg.Connection,
    *,
    campaign_id: int,
    ids: list[int] | None = None,
    keys: list[str] | None = None,
    timeout: float | None = None,
) -> list[InDoubt]:
    """The campaign's in-doubt rows, oldest first (only those of `ids` and `keys` when either is given);
    NotFound without the campaign."""
    await current_status(conn, campaign_id=campaign_id)
    rows = await conn.fetch(*db.sql("sends_in_doubt", campaign_id=campaign_id, ids=ids, keys=keys), timeout=timeout)
    return [
        InDoubt(r["id"], r["email"], r["email_lower"], r["claimed_by"], r["updated_at"], r["attempts"], r["last_reply"])
        for r in rows
    ]


async def _check_chosen(
    conn: asyncpg.Connection, campaign_id: int, ids: list[int], keys: list[str], addresses: list[str]
) -> None:
    """Conflict naming the first id or address that is no in-doubt row of the campaign."""
    found = await conn.fetch(*db.sql("sends_in_doubt", campaign_id=campaign_id, ids=ids, keys=keys))
    for i in ids:
        if i not in {r["id"] for r in found}:
            raise Conflict(f"campaign {campaign_id} has no in-doubt row with id {i}; nothing decided")
    for key, address in zip(keys, addresses, strict=True):
        if key not in {r["email_lower"] for r in found}:
            raise Conflict(f"campaign {campaign_id} has no in-doubt row for {shown(address)}; nothing decided")


async def decide(
    conn: asyncpg.Connection,
    *,
    campaign_id: int,
    resend: bool,
    ids: list[int] | None = None,
    keys: list[str] | None = None,
    addresses: list[str] | None = None,
) -> Moved:
    """Move the in-doubt rows (only those of `ids` and `keys`, the mailbox keys of `addresses`, when either is
    given): queued again with `resend`, else marked sent. NotFound without the campaign; Conflict, nothing
    decided, for a row named that is not in doubt or a resend of a cancelled campaign."""
    async with conn.transaction():
        campaign = await conn.fetchrow(*db.sql("campaign_lock_status", campaign_id=campaign_id))
        if campaign is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        if ids is not None:
            await _check_chosen(conn, campaign_id, ids, keys or [], list(addresses or []))
        if not resend:
            marked = await conn.fetchval(
                *db.sql("sends_in_doubt_mark_sent", campaign_id=campaign_id, ids=ids, keys=keys)
            )
            return Moved(marked, False)
        if campaign["status"] == "cancelled":
            raise Conflict(f"cannot resend in-doubt rows of campaign {campaign_id}: it is cancelled")
        moved = await conn.fetchval(*db.sql("sends_in_doubt_resend", campaign_id=campaign_id, ids=ids, keys=keys))
        return await requeued(conn, campaign_id=campaign_id, moved=moved)
