"""`einmal lists [--account A]`, `einmal lists set LIST --account A --title TEXT` and
`einmal lists form open|close LIST --account A [--origin URL]…`.

`lists` prints each list a line, tab-separated: id, account, name, confirmed members, unconfirmed sign-ups,
and its sign-up form's address while it is open, else `closed`. `set --title` gives a list the title its
public pages show (the form, the confirmation page, the preference page): without one they say "the mailing
list", never the name, which is the operator's key; an empty title clears it.

A list takes sign-ups (its public form and `POST /api/v1/subscribe`) only once its account opens them: `form
open` prints the form's address, a random token's that stays the same when it is closed and opened again;
`--origin` (repeatable) replaces the origins besides the serving site's own whose pages may post it, and
without it they stay. `form close` refuses sign-ups from then on; the sign-ups made stay, and their links
still confirm.
"""

import argparse
import sys

import asyncpg

from service import db
from service.cli.campaigns import one_line
from service.cli.subscribers_cmd import find_account
from service.cli.tables import aligned
from service.settings import Settings
from service.subscribers import optin
from service.subscribers.importer import check_account, shown


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        if args.account is not None:
            await find_account(conn, args.account)
        rows = await conn.fetch(*db.sql("lists_all", account_name=args.account))
    table = [
        (
            r["id"],
            r["account"],
            r["name"],
            r["members"],
            r["unconfirmed"],
            optin.form_url(settings, r["form_token"]) if r["form_open"] else "closed",
        )
        for r in rows
    ]
    for line in aligned(("id", "account", "name", "members", "unconfirmed", "form"), table) if rows else ():
        print(line)
    print(f"{len(rows)} list{'' if len(rows) == 1 else 's'}", file=sys.stderr)
    return 0


MAX_TITLE = 200


def title(value: str, option: str = "--title") -> str | None:
    """A list's title stripped; None for '' (cleared); UsageError unless it is one line of printable text."""
    return one_line(value, option, MAX_TITLE) if value.strip() else None


async def set_title(conn: asyncpg.Connection, account_id: int, list_name: str, value: str | None) -> asyncpg.Record:
    """The account's list `list_name` takes the title `value` (None: none); optin.NoList when it has no such list."""
    row = await conn.fetchrow(*db.sql("list_title_set", account_id=account_id, list_name=list_name, title=value))
    if row is None:
        raise optin.NoList(f"no list named {list_name!r}")
    return row


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    named = title(args.title)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, check_account(args.account))
        try:
            await set_title(conn, account_id, args.list, named)
        except optin.NoList:
            raise optin.NoList(f"account {shown(args.account)} has no list named {shown(args.list)}") from None
    print(f"list {shown(args.list)}: title {shown(named) if named else '-'}")
    return 0


async def form_command(args: argparse.Namespace, settings: Settings) -> int:
    opening = args.verb == "open"
    allowed = optin.origins(args.origins) if args.origins else None
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, check_account(args.account))
        try:
            row = await optin.set_form(conn, account_id, args.list, opening, allowed)
        except optin.NoList:
            raise optin.NoList(f"account {shown(args.account)} has no list named {shown(args.list)}") from None
    origins = ", ".join(row["form_origins"]) or "this site only"
    if opening:
        print(optin.form_url(settings, row["form_token"]))
        print(f"list {shown(args.list)}: sign-ups open; the form may be posted from {origins}", file=sys.stderr)
        if not settings.confirm_url:
            print(
                "einmal: warning: double opt-in is not set up here (EINMAL_CONFIRM_URL, EINMAL_OPTIN_FROM): the "
                "form answers 404 until it is",
                file=sys.stderr,
            )
    else:
        print(f"list {shown(args.list)}: sign-ups closed", file=sys.stderr)
    return 0
