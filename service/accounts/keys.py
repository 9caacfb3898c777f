"""API keys (docs/design.md#api): minted, listed and revoked (`einmal account key create|list|revoke`,
/api/v1/keys), and the lookup a request's Bearer key goes through.

A key is `einmal_` and 43 URL-safe characters (32 random bytes). It is shown once; the database keeps its
SHA-256 and its first PREFIX characters, to tell keys apart in a listing."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.accounts.account import find_account
from service.errors import Conflict, Invalid, NotFound
from service.text import shown

MARK = "einmal_"
PREFIX = len(MARK) + 6
MAX_KEY = 200  # a longer Authorization value is not one of ours, and is not hashed
SCOPES = ("read", "write")
MAX_NAME = 100


@dataclass(frozen=True)
class Listed:
    """A key as a listing shows it: never the key itself."""

    id: int
    name: str
    scope: str
    prefix: str
    created_at: datetime
    used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class Key:
    id: int
    account_id: int
    scope: str

    @property
    def writes(self) -> bool:
        return self.scope == "write"


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


async def find(conn: asyncpg.Connection, key: str) -> Key | None:
    """The key's account and scope; None for a key that is not one (unknown, revoked, malformed)."""
    if not key.startswith(MARK) or len(key) > MAX_KEY or not key.isascii():
        return None
    row = await conn.fetchrow(*db.sql("key_find", digest=digest(key)))
    return Key(row["id"], row["account_id"], row["scope"]) if row else None


def check_name(name: str, field: str = "name") -> str:
    if len(name) > MAX_NAME or not name.isprintable():
        raise Invalid(f"{field}: at most {MAX_NAME} printable characters", code="name.invalid", field=field)
    return name


async def mint(conn: asyncpg.Connection, *, account_id: int, name: str, scope: str) -> tuple[Listed, str]:
    """A new key of the account: (its listing, the key), the key to be shown once and never again."""
    key = MARK + secrets.token_urlsafe(32)
    row = await conn.fetchrow(
        *db.sql(
            "key_insert", account_id=account_id, key_name=name, scope=scope, prefix=key[:PREFIX], digest=digest(key)
        )
    )
    if row is None:  # an INSERT … RETURNING returns its row
        raise RuntimeError("the new key's row was not returned")
    return Listed(**dict(row)), key


async def mint_for(conn: asyncpg.Connection, *, account: str, name: str, scope: str) -> str:
    """A new key of the account named `account` (NotFound when there is none): the key."""
    check_name(name)
    _, key = await mint(conn, account_id=await find_account(conn, name=account), name=name, scope=scope)
    return key


async def of_account(conn: asyncpg.Connection, *, account_id: int, timeout: float | None = None) -> list[Listed]:
    """The account's keys, revoked ones included."""
    rows = await conn.fetch(*db.sql("keys_of_account", account_id=account_id), timeout=timeout)
    return [Listed(**dict(r)) for r in rows]


async def of_account_named(conn: asyncpg.Connection, *, account: str) -> list[Listed]:
    """The keys of the account named `account` (NotFound when there is none), revoked ones included."""
    await find_account(conn, name=account)
    return [Listed(**dict(r)) for r in await conn.fetch(*db.sql("keys_of_account_named", account=account))]


async def revoke(conn: asyncpg.Connection, *, account: str, key_id: int) -> None:
    """Revoke the key of the account named `account`; NotFound when it has none of that id not revoked."""
    await find_account(conn, name=account)
    if await conn.fetchval(*db.sql("key_revoke", account=account, key_id=key_id)) is None:
        raise NotFound(f"account {shown(account)} has no key {key_id} that is not revoked")


async def revoke_own(
    conn: asyncpg.Connection, *, account_id: int, key_id: int, asking: int, timeout: float | None = None
) -> Listed:
    """Revoke another key of the account than the one `asking`: Conflict for that one (an application would
    lock itself out with its last key), NotFound for one the account does not have (revoked, another's)."""
    if key_id == asking:
        raise Conflict(
            "a key does not revoke itself: revoke it with another key of the account, or "
            "with `einmal account key revoke`"
        )
    row = await conn.fetchrow(*db.sql("key_revoke_of_account", account_id=account_id, key_id=key_id), timeout=timeout)
    if row is None:
        raise NotFound("no such key")
    return Listed(**dict(row))
