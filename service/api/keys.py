"""API keys (docs/design.md#api): `einmal account key create|list|revoke`, and the lookup a request's
Bearer key goes through.

A key is `einmal_` and 43 URL-safe characters (32 random bytes). It is printed once, alone on stdout;
the database keeps its SHA-256 and its first PREFIX characters, to tell keys apart in a listing."""

import argparse
import hashlib
import secrets
from dataclasses import dataclass

import asyncpg

from service import db
from service.cli.subscribers_cmd import find_account
from service.cli.tables import aligned
from service.errors import UsageError
from service.settings import Settings
from service.text import shown

MARK = "einmal_"
PREFIX = len(MARK) + 6
MAX_KEY = 200  # a longer Authorization value is not one of ours, and is not hashed
SCOPES = ("read", "write")
MAX_NAME = 100


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
    row = await conn.fetchrow(db.query("api_key_find"), digest(key))
    return Key(row["id"], row["account_id"], row["scope"]) if row else None


def check_name(name: str, option: str = "--name") -> str:
    if len(name) > MAX_NAME or not name.isprintable():
        raise UsageError(f"{option}: at most {MAX_NAME} printable characters")
    return name


async def mint(conn: asyncpg.Connection, account_id: int, name: str, scope: str) -> tuple[asyncpg.Record, str]:
    """A new key of the account: (its row, the key), the key to be shown once and never again."""
    key = MARK + secrets.token_urlsafe(32)
    return await conn.fetchrow(db.query("api_key_insert"), account_id, name, scope, key[:PREFIX], digest(key)), key


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    check_name(args.name)
    async with db.connection(db.url(settings)) as conn:
        _, key = await mint(conn, await find_account(conn, args.account), args.name, args.scope)
    print(key)  # the key alone on stdout: `KEY=$(einmal account key create …)`
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        await find_account(conn, args.account)
        rows = await conn.fetch(db.query("api_keys_list"), args.account)
    table = [
        (
            r["id"],
            r["prefix"] + "…",
            r["scope"],
            r["name"],
            *(r[c].isoformat(timespec="seconds") if r[c] else "" for c in ("created_at", "used_at", "revoked_at")),
        )
        for r in rows
    ]
    for line in aligned(("id", "prefix", "scope", "name", "created", "last used", "revoked"), table):
        print(line)
    return 0


async def revoke_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        await find_account(conn, args.account)
        if await conn.fetchval(db.query("api_key_revoke"), args.account, args.id) is None:
            raise UsageError(f"account {shown(args.account)} has no key {args.id} that is not revoked")
    print(f"revoked key {args.id}")
    return 0
