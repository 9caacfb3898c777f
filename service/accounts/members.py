"""An account's subscribers, suppressions and lists as the command line lists them (`einmal subscribers
list|show|export`, `einmal suppressions list|remove`, `einmal lists list`): each subscriber's state as
einmal.subscriber_state derives it, its confirmed lists and its sign-ups awaiting confirmation (joined with
`|`), the reason of its mailbox's suppression; each list's member counts and whether it takes sign-ups."""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.accounts.account import find_account, resolve
from service.addresses import email_key
from service.errors import NotFound
from service.subscribers.suppressions import Suppression, audited
from service.text import check_account, shown


@dataclass(frozen=True)
class Member:
    id: int
    email: str
    name: str
    status: str  # confirmed, unconfirmed, unsubscribed, bounced, complained or suppressed
    attributes: str  # JSON
    created_at: datetime
    suppressed: str | None  # the reason of the mailbox's suppression
    lists: str  # its confirmed lists, joined with |
    unconfirmed: str  # its lists awaiting confirmation, joined with |


@dataclass(frozen=True)
class AccountList:
    """A list as `einmal lists list` shows it, of any account."""

    id: int
    account: str
    name: str
    members: int
    unconfirmed: int
    form_open: bool
    form_token: str | None


async def members(conn: asyncpg.Connection, *, account: str, list_name: str | None = None) -> list[Member]:
    """The account's subscribers (`list_name`: that list's only); NotFound for an unknown account, Invalid
    for a list it does not have (campaign create's check)."""
    if list_name is None:
        await find_account(conn, name=account)
    else:
        await resolve(conn, account=check_account(account), lists=[list_name])
    rows = await conn.fetch(*db.sql("subscribers_list", account=account, list=list_name))
    return [Member(**dict(r)) for r in rows]


async def member(conn: asyncpg.Connection, *, account: str, email: str) -> list[Member]:
    """The account's subscriber whose mailbox `email` names (its exact spelling first); NotFound for none."""
    account_id = await find_account(conn, name=account)
    rows = await conn.fetch(*db.sql("subscriber_find", account_id=account_id, key=email_key(email), spelling=email))
    if not rows:
        raise NotFound(f"account {shown(account)} has no subscriber {shown(email)}")
    fields = Member.__dataclass_fields__
    return [Member(**{k: v for k, v in dict(r).items() if k in fields}) for r in rows]


async def suppressions(conn: asyncpg.Connection, *, account: str) -> list[Suppression]:
    """The account's suppressions, oldest first; NotFound for an unknown account."""
    await find_account(conn, name=account)
    return [Suppression(**dict(r)) for r in await conn.fetch(*db.sql("suppressions_list", account=account))]


async def unsuppress(conn: asyncpg.Connection, *, account: str, emails: list[str]) -> tuple[int, int]:
    """Delete the account's suppressions of the mailboxes `emails` name, with the audit log's line when any
    was: (removed, not suppressed)."""
    async with conn.transaction():
        account_id = await find_account(conn, name=account)
        keys = {email_key(email) for email in emails}
        removed = await conn.fetch(*db.sql("suppression_delete", account_id=account_id, keys=list(keys)))
        if removed:
            await audited(conn, "cli", account_id, "suppression.remove", emails, len(removed))
    return len(removed), len(keys) - len(removed)


async def all_lists(conn: asyncpg.Connection, *, account: str | None) -> list[AccountList]:
    """Every account's lists (`account`: that account's only; NotFound when there is none of that name)."""
    if account is not None:
        await find_account(conn, name=account)
    return [AccountList(**dict(r)) for r in await conn.fetch(*db.sql("lists_all", account_name=account))]
