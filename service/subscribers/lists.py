"""An account's lists: listed with their member counts, made, their sign-up form, their members added and
taken off (/api/v1/lists); and a list's title, what its public pages (sign-up form,
confirmation, preference page) call it (`einmal lists title`, PUT /api/v1/lists/{name}/title)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from service import db
from service.addresses import email_key
from service.db import DB_SECONDS
from service.errors import Conflict, Invalid, NotFound
from service.subscribers import optin
from service.text import one_line, unsafe_text

MAX_TITLE = 200


def title(value: str) -> str | None:
    """A list's title stripped; None for '' (cleared); Invalid unless it is one line of printable text."""
    return one_line(value, "title", MAX_TITLE) if value.strip() else None


async def set_title(conn: asyncpg.Connection, account_id: int, list_name: str, value: str | None) -> asyncpg.Record:
    """The account's list `list_name` takes the title `value` (None: none); optin.NoList when it has no such list."""
    row = await conn.fetchrow(*db.sql("list_title_set", account_id=account_id, list_name=list_name, title=value))
    if row is None:
        raise optin.NoList(f"no list named {list_name!r}")
    return row


@dataclass(frozen=True)
class MailingList:
    id: int
    name: str
    title: str | None
    members: int  # confirmed: the ones campaigns reach
    unconfirmed: int  # sign-ups awaiting confirmation
    created_at: datetime
    form_token: str | None  # while its sign-ups are open, else None


@dataclass(frozen=True)
class Form:
    name: str
    form_open: bool
    form_origins: list[str]
    form_token: str | None
    optin_from: str | None  # its own confirmations' From; None: EINMAL_OPTIN_FROM
    optin_subject: str | None  # its own confirmations' subject; None: einmal's, in the account's language
    optin_text: str | None  # its own confirmations' text; None: einmal's
    language: str | None  # its account's: of einmal's text for its confirmations

    @classmethod
    def of(cls, row: asyncpg.Record) -> "Form":
        return cls(
            row["name"],
            row["form_open"],
            list(row["form_origins"]),
            row["form_token"],
            row["optin_from"],
            row["optin_subject"],
            row["optin_text"],
            row["language"],
        )


@dataclass(frozen=True)
class Membership:
    added: bool  # False: it was on the list
    state: Literal["confirmed", "unconfirmed"]


async def lists(conn: asyncpg.Connection, *, account_id: int) -> list[MailingList]:
    """The account's lists, by name."""
    rows = await conn.fetch(*db.sql("lists_of_account", account_id=account_id), timeout=DB_SECONDS)
    return [MailingList(**dict(r)) for r in rows]


async def form(conn: asyncpg.Connection, *, account_id: int, list_name: str) -> Form:
    """Whether the account's list takes sign-ups, its form's token and origins; NotFound without the list."""
    row = await conn.fetchrow(*db.sql("list_form", account_id=account_id, list_name=list_name), timeout=DB_SECONDS)
    if row is None:
        raise NotFound("no such list")
    return Form.of(row)


async def ensure(conn: asyncpg.Connection, *, account_id: int, list_name: str) -> tuple[MailingList, bool]:
    """The account's list `list_name`, made now (True) or found (False); Invalid for a name that is not
    printable text without spaces around it."""
    if not list_name.strip() or unsafe_text(list_name) or list_name != list_name.strip():
        raise Invalid("a list's name is printable text without spaces around it")
    made = db.sql("list_ensure", account_id=account_id, list_name=list_name)
    row = await conn.fetchrow(*made, timeout=DB_SECONDS)
    if row is None:
        # it waited on another's insert of the list, then read with the snapshot of its start, which does not
        # hold that list: the statement run again, with a snapshot of its own, finds it
        row = await conn.fetchrow(*made, timeout=DB_SECONDS)
    if row is None:
        raise Conflict("the list was deleted while it was made; try again")
    [found] = [m for m in await lists(conn, account_id=account_id) if m.id == row["id"]]
    return found, row["created"]


async def add_member(conn: asyncpg.Connection, *, account_id: int, list_name: str, email: str) -> Membership:
    """Put the account's subscriber `email` (any spelling of its mailbox) on its list; NotFound without either."""
    row = await conn.fetchrow(
        *db.sql("list_member_add", account_id=account_id, list_name=list_name, email_key=email_key(email), email=email),
        timeout=DB_SECONDS,
    )
    assert row is not None  # the query returns one row
    if row["list_id"] is None:
        raise NotFound("no such list")
    if row["subscriber_id"] is None:
        raise NotFound("no such subscriber")
    return Membership(row["added"], row["state"])


async def remove_member(conn: asyncpg.Connection, *, account_id: int, list_name: str, email: str) -> None:
    """Take the account's subscriber `email` off its list; NotFound when it is not on it."""
    member = {"account_id": account_id, "list_name": list_name, "email_key": email_key(email)}
    if not await conn.fetch(*db.sql("list_member_delete", **member), timeout=DB_SECONDS):
        raise NotFound("no such membership")
