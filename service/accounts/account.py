"""An account: found by its name, listed, and what its unsubscribe page shows (service/web/pages.py): the
display name of the sender (unset: the message's From name), its language unless a campaign has its own, and
an address the page offers when a genuine link no longer works; and its time zone, that of its subscribers
without a `time_zone` attribute of their own (a campaign's local send times, docs/guide/campaigns.md)."""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.addresses import normalized_address
from service.errors import Conflict, Invalid, NotFound
from service.text import check_account, one_line, shown

MAX_DISPLAY_NAME = 200


@dataclass(frozen=True)
class Page:
    """What the account's unsubscribe page shows, and its time zone."""

    name: str
    display_name: str | None
    language: str
    contact: str | None
    time_zone: str


@dataclass(frozen=True)
class Listed:
    name: str
    created_at: datetime
    subscribers: int


async def find_account(conn: asyncpg.Connection, *, name: str) -> int:
    """The id of the account named `name`; NotFound when there is none."""
    account_id: int | None = await conn.fetchval(*db.sql("account_find", account=check_account(name)))
    if account_id is None:
        raise NotFound(f"no account named {shown(name)}")
    return account_id


async def set_track_opens(conn: asyncpg.Connection, *, name: str, on: bool) -> None:
    """Whether the account's new campaigns track opens unless they say (docs/guide/click-tracking.md#opens);
    NotFound when there is no account `name`."""
    account_id = await find_account(conn, name=name)
    await conn.execute(*db.sql("account_set_track_opens", account_id=account_id, track_opens=on))


async def create(conn: asyncpg.Connection, *, name: str) -> int:
    """The id of a new account named `name`; Conflict when there is one."""
    row = await conn.fetchrow(*db.sql("account_ensure", name=check_account(name)))
    assert row is not None  # the query returns one row
    if not row["created"]:
        raise Conflict(f"account {shown(name)} exists already")
    account_id: int = row["id"]
    return account_id


async def resolve(conn: asyncpg.Connection, *, account: str, lists: list[str]) -> tuple[int, list[int]]:
    """(the account's id, its lists' ids in the order named); NotFound for an unknown account, Invalid for a
    list it does not have."""
    rows = await conn.fetch(*db.sql("account_lists_resolve", account=account, lists=lists))
    if not rows:
        raise NotFound(f"no account named {shown(account)}")
    return rows[0]["account_id"], _list_ids(account, rows, lists)


async def list_ids(
    conn: asyncpg.Connection, *, account_id: int, lists: list[str], timeout: float | None = None
) -> list[int]:
    """The ids of the account's lists in the order named; NotFound for an unknown account, Invalid for a list it
    does not have."""
    rows = await conn.fetch(*db.sql("account_lists_of", account_id=account_id, lists=lists), timeout=timeout)
    if not rows:
        raise NotFound(f"no account with id {account_id}")
    return _list_ids(rows[0]["account_name"], rows, lists)


def _list_ids(account: str, rows: list[asyncpg.Record], lists: list[str]) -> list[int]:
    found = {r["list_name"]: r["list_id"] for r in rows if r["list_id"] is not None}
    missing = [name for name in lists if name not in found]
    if missing:
        raise Invalid(f"account {shown(account)} has no list named {', '.join(map(shown, missing))}")
    return [found[name] for name in lists]


async def name_of(conn: asyncpg.Connection, *, account_id: int, timeout: float | None = None) -> str:
    name: str = await conn.fetchval(*db.sql("account_name", account_id=account_id), timeout=timeout)
    return name


async def every(conn: asyncpg.Connection) -> list[Listed]:
    """Each account's name, creation time and subscriber count, by name."""
    return [Listed(**dict(r)) for r in await conn.fetch(*db.sql("accounts_list"))]


def contact(value: str) -> str | None:
    """A contact address normalised; None for '' (cleared); Invalid when it is no address."""
    if not value.strip():
        return None
    address = one_line(value, "contact", 320)
    try:
        return normalized_address(address)
    except ValueError as exc:  # EmailNotValidError
        raise Invalid(
            f"contact {shown(value)} is not a valid address: {exc}", code="contact.not_an_address", field="contact"
        ) from None


def display_name(value: str) -> str | None:
    """A display name stripped; None for '' (cleared); Invalid unless it is one line of printable text."""
    return one_line(value, "display_name", MAX_DISPLAY_NAME) if value.strip() else None


async def page(conn: asyncpg.Connection, *, account_id: int, timeout: float | None = None) -> Page:
    row = await conn.fetchrow(*db.sql("account_page", account_id=account_id), timeout=timeout)
    if row is None:
        raise NotFound(f"no account with id {account_id}")
    return Page(**dict(row))


async def set_page(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    display_name: str | None = None,
    language: str | None = None,
    contact: str | None = None,
    time_zone: str | None = None,
    given: frozenset[str] | set[str] = frozenset(),
    timeout: float | None = None,
) -> Page:
    """Set what the account's page shows: `display_name` and `contact` when named in `given` (None clears
    them), `language` and `time_zone` when not None; checked before, but for the time zone, which PostgreSQL must
    know by that name (Invalid). NotFound without the account."""
    if time_zone is not None and not await conn.fetchval(*db.sql("zone_known", zone=time_zone), timeout=timeout):
        raise Invalid(
            f"time_zone {shown(time_zone)}: no time zone of that name, e.g. Europe/Berlin",
            code="time_zone.unknown",
            field="time_zone",
        )
    row = await conn.fetchrow(
        *db.sql(
            "account_set_page",
            account_id=account_id,
            display_name_given="display_name" in given,
            display_name=display_name,
            language=language,
            contact_given="contact" in given,
            contact=contact,
            time_zone=time_zone,
        ),
        timeout=timeout,
    )
    if row is None:
        raise NotFound(f"no account with id {account_id}")
    return Page(**dict(row))
