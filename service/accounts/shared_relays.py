"""The installation's relays as the operator names them (`einmal relay add|list|remove`), and which of them
an account sends through, with its weight (`einmal account relay attach|detach`). A relay's rate and quotas
are its own, shared by every account that uses it (docs/design.md#accounts).

A relay's URL is an EINMAL_SMTP_URLS entry (service/relays.py) and may hold a password: it is stored, and
shown only masked (`smtp://user:***@host:587`); no error quotes it. Relays are the operator's: the HTTP API
neither lists nor changes them, it names an account's relays and weights only."""

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg

from service import db, relays
from service.errors import ArgumentError, Conflict, NotFound

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
MAX_RATE, MAX_QUOTA = 100_000.0, 100_000_000


@dataclass(frozen=True)
class Listed:
    name: str
    url: str  # masked
    rate: float | None
    quota_hour: int | None
    quota_day: int | None
    accounts: str  # the accounts that send through it: acme=3, other=1


def checked_name(value: str) -> str:
    if not NAME.fullmatch(value):
        raise ArgumentError(
            "relay: 1 to 63 letters, digits, '.', '_' or '-', e.g. ses-eu", code="relay.invalid", field="relay"
        )
    return value


def checked_url(value: str) -> str:
    """The URL stripped, once service/relays.py reads it; ArgumentError that never quotes it."""
    try:
        relay = relays.parse_url(value)
    except ValueError as exc:
        raise ArgumentError(f"url: {exc}", code="url.invalid", field="url") from None
    if "weight=" in urlsplit(value.strip()).query:
        raise ArgumentError(
            "url: no weight= here: an account's weight is given with `account relay attach`",
            code="url.weight",
            field="url",
        )
    del relay
    return value.strip()


def masked(url: str) -> str:
    """The URL without its password: smtp://user:***@host:587."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    return parts._replace(netloc=f"{user}{':***' if colon else ''}@{host}").geturl()


def checked_rate(value: str) -> float:
    """Messages a second: 14 or 14/s."""
    try:
        rate = float(value.strip().removesuffix("/s"))
    except ValueError:
        rate = 0.0
    if not 0 < rate <= MAX_RATE:
        raise ArgumentError(
            f"rate {value[:20]!r}: messages a second, e.g. 14/s (at most {MAX_RATE:g})",
            code="rate.invalid",
            field="rate",
        )
    return rate


def checked_quota(value: int | None, field: str) -> int | None:
    if value is not None and not 0 < value <= MAX_QUOTA:
        raise ArgumentError(
            f"{field} {value}: a whole number from 1 to {MAX_QUOTA}", code=f"{field}.out_of_range", field=field
        )
    return value


async def add(
    conn: asyncpg.Connection,
    *,
    name: str,
    url: str,
    rate: float | None = None,
    quota_hour: int | None = None,
    quota_day: int | None = None,
) -> None:
    """A new relay (its parts checked before); Conflict when one of that name exists."""
    new = await conn.fetchval(
        *db.sql("relay_add", relay_name=name, url=url, rate=rate, quota_hour=quota_hour, quota_day=quota_day)
    )
    if new is None:
        raise Conflict(f"a relay named {name} exists: remove it first to give it another URL or limits")


async def every(conn: asyncpg.Connection) -> list[Listed]:
    rows = await conn.fetch(*db.sql("relays_list"))
    return [Listed(**{**dict(r), "url": masked(r["url"])}) for r in rows]


async def remove(conn: asyncpg.Connection, *, name: str) -> None:
    """NotFound without it; Conflict while an account sends through it (detach it first)."""
    found = await conn.fetchrow(*db.sql("relay_remove", relay_name=name))
    if found is None:
        raise NotFound(f"no relay named {name}")
    if found["used"]:
        raise Conflict(f"accounts send through relay {name}: detach it from them first (`einmal relay list`)")


async def attach(conn: asyncpg.Connection, *, account_id: int, name: str, weight: int) -> None:
    if not 1 <= weight <= 1000:
        raise ArgumentError(
            f"weight {weight}: a whole number from 1 to 1000", code="weight.out_of_range", field="weight"
        )
    if (
        await conn.fetchval(*db.sql("account_relay_attach", account_id=account_id, relay_name=name, weight=weight))
        is None
    ):
        raise NotFound(f"no relay named {name}")


async def detach(conn: asyncpg.Connection, *, account_id: int, name: str) -> None:
    if await conn.fetchval(*db.sql("account_relay_detach", account_id=account_id, relay_name=name)) is None:
        raise NotFound(f"the account does not send through a relay named {name}")
