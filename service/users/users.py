"""The console's users (`einmal console user add|list|remove|password`): an operator sees every account, a
member one account. A name is an email address or a plain name, unique whatever its case. Each change is a
line of the audit log, written in the change's transaction."""

import re
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import audit, db
from service.accounts.account import find_account
from service.errors import Conflict, Invalid, NotFound
from service.text import shown
from service.users import passwords
from service.users.sessions import Limits

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")
ROLES = ("operator", "member")


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    account_id: int | None


@dataclass(frozen=True)
class Listed:
    id: int
    name: str
    role: str
    account: str | None
    created_at: datetime
    password_changed_at: datetime
    sessions: int  # open now


def checked_name(name: str) -> str:
    """`name` when it can name a console user; Invalid when not."""
    if NAME.fullmatch(name) is None:
        raise Invalid(f"invalid user name {shown(name)}: 1 to 200 letters, digits and . _ @ + -, an email or a name")
    return name


def key(name: str) -> str:
    return name.lower()


async def add(conn: asyncpg.Connection, *, name: str, account: str | None, password: str, actor: str) -> int:
    """A new user: an operator (`account` None) or a member of `account`; its id. Conflict when the name is
    taken, NotFound for no such account, Invalid for a bad name or password."""
    checked_name(name)
    password_hash = await passwords.hashed(password)  # no connection work while it hashes
    async with conn.transaction():
        account_id = await find_account(conn, name=account) if account is not None else None
        user_id = await conn.fetchval(
            *db.sql(
                "console_user_add",
                name=name,
                name_key=key(name),
                role="operator" if account is None else "member",
                account_id=account_id,
                password_hash=password_hash,
            )
        )
        if user_id is None:
            raise Conflict(f"a console user named {shown(name)} exists")
        await audit.record(conn, actor=actor, account_id=account_id, action="user.add", subject=f"user {name}")
    return int(user_id)


async def listed(conn: asyncpg.Connection, *, limits: Limits) -> list[Listed]:
    rows = await conn.fetch(*db.sql("console_user_list", idle=limits.idle, lifetime=limits.lifetime))
    return [Listed(**dict(r)) for r in rows]


async def remove(conn: asyncpg.Connection, *, name: str, actor: str) -> None:
    """Remove the user and end its sessions; NotFound when there is none."""
    async with conn.transaction():
        row = await conn.fetchrow(*db.sql("console_user_remove", name_key=key(name)))
        if row is None:
            raise NotFound(f"no console user named {shown(name)}")
        await audit.record(
            conn, actor=actor, account_id=row["account_id"], action="user.remove", subject=f"user {name}"
        )


async def change_password(conn: asyncpg.Connection, *, name: str, password: str, actor: str) -> None:
    """A new password for the user, whose sessions end; NotFound when there is none."""
    password_hash = await passwords.hashed(password)
    async with conn.transaction():
        row = await conn.fetchrow(*db.sql("console_user_password", name_key=key(name), password_hash=password_hash))
        if row is None:
            raise NotFound(f"no console user named {shown(name)}")
        await audit.record(
            conn, actor=actor, account_id=row["account_id"], action="user.password", subject=f"user {row['name']}"
        )


@dataclass(frozen=True)
class Stored:
    """A user as found for a sign-in: itself and its password's hash."""

    user: User
    password_hash: str


async def find(conn: asyncpg.Connection, *, name: str) -> Stored | None:
    """The user of that name (any case) with its hash, for a sign-in; None when there is none."""
    row = await conn.fetchrow(*db.sql("console_user_find", name_key=key(name))) if NAME.fullmatch(name) else None
    if row is None:
        return None
    return Stored(User(row["id"], row["name"], row["role"], row["account_id"]), row["password_hash"])


async def verified(stored: Stored | None, password: str) -> tuple[User | None, str | None]:
    """(the user, when `password` is its password; a new hash of it when the stored one was made with weaker
    parameters than today's, to keep with `rehash`). No connection is needed while argon2 runs: a sign-in
    holds none of the pool's meanwhile. An unknown user takes as long as a wrong password."""
    ok, stale = await passwords.verified(stored.password_hash if stored else None, password)
    if not ok or stored is None:
        return None, None
    return stored.user, await passwords.hashed(password, check=False) if stale else None


async def rehash(conn: asyncpg.Connection, *, user_id: int, password_hash: str) -> None:
    await conn.execute(*db.sql("console_user_rehash", user_id=user_id, password_hash=password_hash))


async def sign_in(conn: asyncpg.Connection, *, name: str, password: str) -> User | None:
    """find, verified and rehash on one connection: the user whose name and password these are, else None."""
    user, rehashed = await verified(await find(conn, name=name), password)
    if user is not None and rehashed is not None:
        await rehash(conn, user_id=user.id, password_hash=rehashed)
    return user
