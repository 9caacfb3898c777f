"""Suppressions: the addresses an account must never mail again.

`einmal suppress --account A EMAIL... [--reason R]` adds them; it is
idempotent (`suppressed N, already suppressed M`, counted over the distinct
mailboxes given). A suppression is stored under the address's mailbox key
(service/addresses.py), the key `subscribers.email_lower` holds, so it
stops every spelling of the mailbox: `bob@xn--bcher-kva.example`, as a
bounce feed reports it, stops `Bob@bücher.example`. Every new row NOTIFYs
`einmal_suppression` with `<account_id>:<email_lower>` (a trigger in the
schema), which running nodes use to drop the address from work in flight.

An unknown account is an error, not created: suppressing for an account
that does not exist is most likely a typo. An invalid address or reason
stops the command before anything is written.
"""

import argparse
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import audit, db
from service.addresses import address_problem, email_key
from service.db import DB_SECONDS
from service.errors import Invalid, NotFound
from service.settings import Settings
from service.text import MAX_REASON, check_account, shown, unsafe_text


@dataclass(frozen=True)
class Suppression:
    email_lower: str  # the mailbox key it is stored under
    reason: str
    created_at: datetime


async def suppress(conn: asyncpg.Connection, account_id: int, emails: list[str], reason: str) -> int:
    """Suppress `emails` for the account; return how many were not suppressed before.

    Addresses are taken as given (no syntax check: a bounce may name anything);
    spellings of one mailbox count once."""
    added, _ = await _insert(conn, account_id, emails, reason)
    return added


async def _insert(conn: asyncpg.Connection, account_id: int, emails: list[str], reason: str) -> tuple[int, int]:
    if not emails:
        return 0, 0
    keys = [email_key(email) for email in emails]
    row = await conn.fetchrow(*db.sql("suppression_insert", account_id=account_id, email_keys=keys, reason=reason))
    assert row is not None  # the query returns one row
    return row["added"], row["given"]


async def page(conn: asyncpg.Connection, *, account_id: int, after: str, limit: int) -> list[Suppression]:
    """The account's suppressions by mailbox key, the first `limit` after the key `after`."""
    rows = await conn.fetch(
        *db.sql("suppressions_of_account", account_id=account_id, after_key=after, limit=limit), timeout=DB_SECONDS
    )
    return [Suppression(**dict(r)) for r in rows]


async def add(
    conn: asyncpg.Connection, *, account_id: int, email: str, reason: str, actor: str
) -> tuple[Suppression, bool]:
    """Suppress the mailbox of `email` for the account, with the audit log's line of `actor`: its suppression,
    and True when it is new (False: the one it had stays as it was, and nothing is recorded). Invalid for an
    address or a reason that cannot be taken."""
    [checked] = check([email], reason)
    async with conn.transaction():
        added = await suppress(conn, account_id, [checked], reason)
        if added:
            await audited(conn, actor, account_id, "suppression.add", [checked], 1)
    found = await get(conn, account_id=account_id, email=checked)
    assert found is not None  # suppressed just now, or before
    return found, bool(added)


async def get(conn: asyncpg.Connection, *, account_id: int, email: str) -> Suppression | None:
    """The account's suppression of the mailbox of `email`, or None."""
    row = await conn.fetchrow(
        *db.sql("suppression_get", account_id=account_id, email_key=email_key(email)), timeout=DB_SECONDS
    )
    return None if row is None else Suppression(**dict(row))


async def remove(conn: asyncpg.Connection, *, account_id: int, email: str, actor: str) -> None:
    """Mail the mailbox of `email` again, with the audit log's line of `actor`; NotFound when the account had
    not suppressed it."""
    async with conn.transaction():
        removed = await conn.fetch(
            *db.sql("suppression_delete", account_id=account_id, keys=[email_key(email)]), timeout=DB_SECONDS
        )
        if not removed:
            raise NotFound("no such suppression")
        await audited(conn, actor, account_id, "suppression.remove", [email], 1)


async def audited(
    conn: asyncpg.Connection, actor: str, account_id: int, action: str, emails: list[str], changed: int
) -> None:
    """The audit log's one line of a call by `actor` that added or removed the suppressions of `changed` of the
    mailboxes `emails` name: the mailbox when it named one, else how many of how many and their keys (cut at
    audit.MAX_TEXT)."""
    keys = sorted({email_key(email) for email in emails})
    subject = keys[0] if len(keys) == 1 else f"{changed} of {len(keys)} mailboxes: {', '.join(keys)}"
    await audit.record(conn, actor=actor, account_id=account_id, action=action, subject=subject)


async def suppressed(conn: asyncpg.Connection, *, account_id: int, email: str) -> bool:
    """Whether the account has suppressed the mailbox of `email`."""
    return await conn.fetchval(*db.sql("suppression_exists", account_id=account_id, email_key=email_key(email)))


def check(emails: list[str], reason: str) -> list[str]:
    problem = unsafe_text(reason)
    if not reason.strip() or problem or len(reason) > MAX_REASON:
        raise Invalid(f"invalid reason {shown(reason)}: 1 to {MAX_REASON} printable characters")
    checked = []
    for given in emails:
        email = given.strip(" ")
        problem = unsafe_text(email) or ("empty address" if not email else None) or address_problem(email)
        if problem:
            raise Invalid(f"invalid address {shown(given)}: {problem}")
        checked.append(email)
    return checked


async def suppress_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    emails = check(args.emails, args.reason)
    async with db.connection(db.url(settings)) as conn, conn.transaction():
        account_id = await conn.fetchval(*db.sql("account_find", account=args.account))
        if account_id is None:
            raise NotFound(f"no account named {shown(args.account)}")
        added, given = await _insert(conn, account_id, emails, args.reason)
        if added:
            await audited(conn, "cli", account_id, "suppression.add", emails, added)
    print(f"suppressed {added}, already suppressed {given - added}")
    return 0
