"""Inbound events — unsubscribes, bounces, complaints — each taking effect once.

An event carries a stable, namespaced id (`<source>:<id>`, e.g.
`esp-webhook:8f1c…`). The id is claimed in einmal.inbound_events with
INSERT … ON CONFLICT DO NOTHING RETURNING, in the same transaction as the
event's effect (a suppression for the account), so a redelivered event
changes nothing. The same id with a different payload is refused: the sender
reused an id, and applying either payload silently would hide that. Keep the
rows as long as the source may redeliver.

An `effect` (bounces) runs in that transaction after the id is claimed, writes
what it keeps (an einmal.bounces row) and says whether the address is
suppressed now (a soft bounce only past its limit).
"""

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping

import asyncpg

from service import db
from service.addresses import email_key
from service.errors import Conflict, Invalid
from service.subscribers import suppressions

KINDS = {"unsubscribe", "bounce", "complaint"}


def payload_hash(payload: Mapping) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def apply(
    conn: asyncpg.Connection,
    event_id: str,
    kind: str,
    account_id: int,
    email: str,
    payload: Mapping | None = None,
    effect: Callable[[asyncpg.Connection], Awaitable[bool]] | None = None,
) -> bool:
    """Apply the event once; True if it took effect now, False if it already had.

    An unsubscribe is a decision the subscriber makes each time the link is pressed: its id (from the
    ids in the link) guards the repeats of one press, and a press while the address is not suppressed
    (the operator lifted the suppression since) suppresses it again. A bounce's or complaint's id is
    the report's own, so a new report is a new event, and a redelivered one after a lifted suppression
    stays a repeat: the operator decided after it."""
    if ":" not in event_id or not event_id.split(":", 1)[1]:
        raise Invalid(f"inbound event id {event_id!r} must be namespaced: <source>:<id>")
    if kind not in KINDS:
        raise Invalid(f"inbound event kind must be one of {', '.join(sorted(KINDS))}, not {kind!r}")
    digest = payload_hash({"kind": kind, "account_id": account_id, "email": email_key(email), **(payload or {})})
    async with conn.transaction():
        if await conn.fetchval(*db.sql("inbound_event_claim", event_id=event_id, digest=digest)) is None:
            if await conn.fetchval(*db.sql("inbound_event_get", event_id=event_id)) != digest:
                raise Conflict(f"inbound event {event_id} was already received with a different payload")
            return kind == "unsubscribe" and await suppressions.suppress(conn, account_id, [email], kind) > 0
        if effect is None or await effect(conn):
            await suppressions.suppress(conn, account_id, [email], kind)
    return True
