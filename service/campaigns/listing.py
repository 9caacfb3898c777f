"""The campaigns: all of them, or those in one status (`einmal campaign list`); an account's, a page at a
time (GET /api/v1/campaigns); the newest, sending first (the console's dashboard); every account's a page at a
time (the console's campaigns page); and whose a campaign is."""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.errors import NotFound


@dataclass(frozen=True)
class Listed:
    """A line of `einmal campaign list`."""

    id: int
    account: str
    name: str
    status: str
    started_at: datetime | None
    pause_reason: str | None
    unsubscribe_required: bool
    scheduled_for: datetime | None  # given with --at
    recipients: int
    in_doubt: int


@dataclass(frozen=True)
class Summary:
    """A campaign of an account, as the API lists it."""

    id: int
    name: str
    subject: str
    status: str
    scheduled_for: datetime | None  # null for a draft given no time: it starts when approved
    pause_reason: str | None
    created_at: datetime
    unsubscribe: bool
    local_time: str | None  # 'HH:MM' in each recipient's time zone; None: at once


async def every(conn: asyncpg.Connection, *, status: str | None = None) -> list[Listed]:
    """Every campaign, newest first (`status`: those in it only)."""
    return [Listed(**dict(r)) for r in await conn.fetch(*db.sql("campaign_list", status=status))]


async def of_account(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    before: int = 2**63 - 1,
    status: str | None = None,
    limit: int = 100,
    timeout: float | None = None,
) -> list[Summary]:
    """The account's campaigns with an id below `before`, newest first, at most `limit`."""
    rows = await conn.fetch(
        *db.sql("campaigns_of_account", account_id=account_id, before=before, status=status, limit=limit),
        timeout=timeout,
    )
    return [Summary(**dict(r)) for r in rows]


async def one(conn: asyncpg.Connection, *, account_id: int, campaign_id: int, timeout: float | None = None) -> Summary:
    """The account's campaign; NotFound when it has none of that id (another account's is not found either)."""
    found = await of_account(conn, account_id=account_id, before=campaign_id + 1, limit=1, timeout=timeout)
    if not found or found[0].id != campaign_id:
        raise NotFound("no such campaign")
    return found[0]


async def owned(conn: asyncpg.Connection, *, account_id: int, campaign_id: int, timeout: float | None = None) -> None:
    """NotFound unless the campaign is the account's: an account learns nothing of what is not its own."""
    owner = await conn.fetchrow(*db.sql("campaign_owner", campaign_id=campaign_id), timeout=timeout)
    if owner is None or owner["account_id"] != account_id:
        raise NotFound("no such campaign")


@dataclass(frozen=True)
class Newest:
    """A campaign on the console's dashboard."""

    id: int
    account: str
    account_id: int
    name: str
    subject: str
    status: str
    pause_reason: str | None
    created_at: datetime


async def newest(conn: asyncpg.Connection, *, account_id: int | None, limit: int = 20) -> list[Newest]:
    """The newest campaigns of the account (None: of every account), those sending or paused first."""
    rows = await conn.fetch(*db.sql("campaigns_newest", account_id=account_id, limit=limit))
    return [Newest(**dict(r)) for r in rows]


async def page(
    conn: asyncpg.Connection, *, account_id: int | None, before: int = 2**63 - 1, limit: int = 100
) -> list[Newest]:
    """The campaigns of the account (None: of every account) with an id below `before`, newest first, at most
    `limit`, with their account's name (the console's campaigns page)."""
    rows = await conn.fetch(*db.sql("campaigns_page", account_id=account_id, before=before, limit=limit))
    return [Newest(**dict(r)) for r in rows]


async def shown(conn: asyncpg.Connection, *, account_id: int | None, campaign_id: int) -> Newest:
    """The campaign with its account's name; NotFound unless it is the account's (None: any account's)."""
    found = await page(conn, account_id=account_id, before=campaign_id + 1, limit=1)
    if not found or found[0].id != campaign_id:
        raise NotFound("no such campaign")
    return found[0]
