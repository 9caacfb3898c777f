"""The audit log: every change made through the console, the API or the commands that change users or
suppressions, import or erase subscribers — who did what, to what, when, in which account (einmal.audit_log,
docs/guide/console.md#the-audit-log).

A change records its line on the connection that makes it, inside its transaction when it has one, so that
the line and the change stand or fall together: `await audit.record(conn, actor=..., account_id=...,
action=..., subject=...)`. Actors are named by where the change came from: `console:<user>`, `api:key <id>`,
`cli`. Actions are `<subject>.<verb>`: `console.login`, `user.add`, `campaign.approve`."""

import csv
import io
from collections.abc import AsyncIterator
from dataclasses import astuple, dataclass, fields
from datetime import datetime
from typing import Protocol

import asyncpg

from service import db

MAX_TEXT = 500  # an actor's, action's or subject's characters kept
EXPORT_PAGE = 1000  # lines read at a time for an export


@dataclass(frozen=True)
class Line:
    id: int
    at: datetime
    actor: str
    account_id: int | None
    account: str | None  # the account's name; None: the installation's, or an account gone
    action: str
    subject: str


async def record(
    conn: asyncpg.Connection, *, actor: str, account_id: int | None, action: str, subject: str = ""
) -> int:
    """Write one line of the audit log; its id. `account_id`: the account changed, None for the installation's
    own (an operator's user)."""
    line_id: int = await conn.fetchval(
        *db.sql(
            "audit_record",
            actor=actor[:MAX_TEXT],
            account_id=account_id,
            action=action[:MAX_TEXT],
            subject=subject[:MAX_TEXT],
        )
    )
    return line_id


class Key(Protocol):
    """An API key as the log names it (service/accounts/keys.py's Key; not imported: accounts use the log)."""

    @property
    def id(self) -> int: ...

    @property
    def account_id(self) -> int: ...


async def by_key(conn: asyncpg.Connection, key: Key, action: str, subject: str) -> int:
    """The line of a change made through the API (service/api/) with `key`, in the key's account."""
    return await record(conn, actor=f"api:key {key.id}", account_id=key.account_id, action=action, subject=subject)


async def page(
    conn: asyncpg.Connection, *, account_id: int | None, before: int = 2**63 - 1, limit: int = 100
) -> list[Line]:
    """The log's lines below id `before`, newest first, at most `limit`; `account_id`: that account's only
    (None: every line)."""
    rows = await conn.fetch(*db.sql("audit_page", account_id=account_id, before=before, limit=limit))
    return [Line(**dict(r)) for r in rows]


async def csv_chunks(conn: asyncpg.Connection, *, account_id: int | None) -> AsyncIterator[str]:
    """The log (of `account_id` only, unless None) as CSV, newest first: a header, then EXPORT_PAGE lines at a
    time, so an export of any length holds one page in memory."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([f.name for f in fields(Line)])
    before = 2**63 - 1
    while True:
        lines = await page(conn, account_id=account_id, before=before, limit=EXPORT_PAGE)
        for line in lines:
            writer.writerow([_cell(v) for v in astuple(line)])
        yield out.getvalue()
        out.seek(0)
        out.truncate()
        if len(lines) < EXPORT_PAGE:
            return
        before = lines[-1].id


def _cell(value: object) -> str:
    """A CSV cell; text that a spreadsheet would run as a formula (=, +, -, @) is prefixed with '."""
    text = "" if value is None else value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
