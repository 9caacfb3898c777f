"""An account's webhook endpoints: add (the secret is shown once), list, remove, rotate the secret (the
previous one still signs for EINMAL_WEBHOOK_ROTATION_HOURS), the deliveries of one, and replay its parked
deliveries. The command line (service/cli/webhooks.py) and the API (service/api/webhooks.py) call these."""

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import asyncpg

from service import db
from service.errors import Invalid, NotFound
from service.webhooks import policy, signing

# what an endpoint may subscribe to (the triggers of sql/migrations/0112_webhooks.sql write them)
EVENT_TYPES = (
    "message.sent",
    "message.failed",
    "message.bounced",
    "message.complained",
    "subscriber.unsubscribed",
    "subscriber.confirmed",
    "sequence.step_sent",
    "message.clicked",
    "message.opened",
)
STATES = ("pending", "delivered", "parked")
MAX_ENDPOINTS = 20  # of one account


@dataclass(frozen=True)
class Endpoint:
    id: int
    url: str
    events: list[str]
    created_at: dt.datetime
    disabled_at: dt.datetime | None
    disabled_reason: str | None
    rotating_until: dt.datetime | None  # the previous secret signs too until then
    pending: int
    parked: int


@dataclass(frozen=True)
class Created:
    id: int
    url: str
    events: list[str]
    secret: str  # shown once
    created_at: dt.datetime


@dataclass(frozen=True)
class Rotated:
    id: int
    secret: str  # shown once
    previous_until: dt.datetime


@dataclass(frozen=True)
class Delivery:
    event_id: str
    type: str
    sequence: int
    state: str
    attempts: int
    next_attempt_at: dt.datetime
    last_status: int | None
    last_error: str | None
    delivered_at: dt.datetime | None
    created_at: dt.datetime


@dataclass(frozen=True)
class Replayed:
    id: int
    replayed: int
    not_kept_since: dt.datetime | None  # it was disabled since then: no event of that time was written for it


def event_types(given: list[str] | None) -> list[str]:
    """The event types asked for, checked; every type when none is given."""
    if not given:
        return list(EVENT_TYPES)
    unknown = [t for t in given if t not in EVENT_TYPES]
    if unknown:
        raise Invalid(f"unknown event type {unknown[0][:60]!r}; the types are {', '.join(EVENT_TYPES)}")
    return sorted(set(given), key=EVENT_TYPES.index)


async def add(
    connect: Callable[[], AbstractAsyncContextManager[asyncpg.Connection]],
    reach: policy.Reach,
    *,
    account_id: int,
    url: str,
    events: list[str] | None = None,
) -> Created:
    """A new endpoint: its URL judged by the policy (which may ask DNS) with no connection held, then a
    connection from `connect` to write it."""
    types = event_types(events)
    await policy.check_url(url, reach)
    async with connect() as conn:
        # a soft bound (two adds at once may pass it by one): it keeps a mistake from fanning out without end
        if len(await conn.fetch(*db.sql("webhook_endpoints_list", account_id=account_id))) >= MAX_ENDPOINTS:
            raise Invalid(f"an account has at most {MAX_ENDPOINTS} webhook endpoints; remove one first")
        secret = signing.new_secret()
        row = await conn.fetchrow(
            *db.sql("webhook_endpoint_insert", account_id=account_id, url=url, events=types, secret=secret)
        )
    assert row is not None  # an INSERT … RETURNING
    return Created(
        id=row["id"], url=row["url"], events=list(row["events"]), secret=secret, created_at=row["created_at"]
    )


async def listing(conn: asyncpg.Connection, *, account_id: int) -> list[Endpoint]:
    rows = await conn.fetch(*db.sql("webhook_endpoints_list", account_id=account_id))
    return [
        Endpoint(
            id=r["id"],
            url=r["url"],
            events=list(r["events"]),
            created_at=r["created_at"],
            disabled_at=r["disabled_at"],
            disabled_reason=r["disabled_reason"],
            rotating_until=r["previous_until"]
            if r["previous_until"] and r["previous_until"] > dt.datetime.now(dt.UTC)
            else None,
            pending=r["pending"],
            parked=r["parked"],
        )
        for r in rows
    ]


async def remove(conn: asyncpg.Connection, *, account_id: int, id: int) -> None:
    if await conn.fetchval(*db.sql("webhook_endpoint_delete", account_id=account_id, id=id)) is None:
        raise NotFound("no such webhook endpoint")


async def rotate(conn: asyncpg.Connection, rotation_hours: float, *, account_id: int, id: int) -> Rotated:
    """A new secret for the endpoint; the previous one still signs for `rotation_hours`
    (EINMAL_WEBHOOK_ROTATION_HOURS)."""
    secret = signing.new_secret()
    row = await conn.fetchrow(
        *db.sql(
            "webhook_endpoint_rotate",
            account_id=account_id,
            id=id,
            secret=secret,
            window_seconds=rotation_hours * 3600,
        )
    )
    if row is None:
        raise NotFound("no such webhook endpoint")
    return Rotated(id=row["id"], secret=secret, previous_until=row["previous_until"])


async def deliveries(
    conn: asyncpg.Connection, *, account_id: int, id: int, state: str | None = None, limit: int = 100
) -> list[Delivery]:
    return (await with_deliveries(conn, account_id=account_id, id=id, state=state, limit=limit))[1]


async def with_deliveries(
    conn: asyncpg.Connection, *, account_id: int, id: int, state: str | None = None, limit: int = 100
) -> tuple[Endpoint, list[Delivery]]:
    """The endpoint (as `listing` shows it) and its deliveries in `state` (any: None), newest first."""
    if state is not None and state not in STATES:
        raise Invalid(f"state must be one of {', '.join(STATES)}, not {state[:30]!r}")
    endpoint = next((e for e in await listing(conn, account_id=account_id) if e.id == id), None)
    if endpoint is None:
        raise NotFound("no such webhook endpoint")
    rows = await conn.fetch(
        *db.sql("webhook_deliveries_list", account_id=account_id, id=id, state=state, limit=max(1, min(limit, 1000)))
    )
    return endpoint, [Delivery(**dict(r)) for r in rows]


async def replay(conn: asyncpg.Connection, *, account_id: int, id: int) -> Replayed:
    row = await conn.fetchrow(*db.sql("webhook_replay", account_id=account_id, id=id))
    if row is None:
        raise NotFound("no such webhook endpoint")
    return Replayed(id=row["id"], replayed=row["replayed"], not_kept_since=row["disabled_at"])
