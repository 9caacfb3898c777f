"""`einmal subscribers list|show|export|delete`, `einmal suppressions list|remove|review` and `einmal accounts
list` (each account's name, creation time and subscriber count).

`export` writes CSV that `subscribers import` reads back: email, name, list (its confirmed
memberships, joined with `|`), unconfirmed (its sign-ups awaiting confirmation: an import never
makes them memberships, and puts a row that has only those on no list), suppressed (the reason of
the mailbox's suppression, empty when it has none: an import suppresses it again, so an export
copied into another account mails no opt-out), then one column per attribute (empty where the
subscriber has none: an import sets no value from an empty cell). `list` and `show` give each
subscriber's state as einmal.subscriber_state derives it: confirmed, unconfirmed (only sign-ups
awaiting confirmation), unsubscribed, bounced, complained or suppressed (another reason). `delete`
is for erasure requests (GDPR art. 17: service/subscribers/erasure.py).

`suppressions remove` deletes suppressions from the table; a running node that learnt of one
keeps skipping the address until it restarts (the safe direction). `suppressions review` lists, and
with --lift deletes, the 'bounce' suppressions today's reasons would not have made
(service/inbound/review.py).
"""

import argparse
import csv
import json
import sys

from service import db
from service.accounts import account, members
from service.accounts.account import find_account
from service.cli.tables import aligned
from service.engagement import activity
from service.settings import Settings
from service.subscribers import erasure, import_command, sources
from service.subscribers.importer import SUPPRESSED, UNCONFIRMED


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await members.members(conn, account=args.account, list_name=args.list)
    table = [
        (r.email, r.name, f"suppressed ({r.suppressed})" if r.status == "suppressed" else r.status, r.lists)
        for r in rows
    ]
    for line in aligned(("email", "name", "status", "lists"), table) if rows else ():
        print(line)
    print(f"{len(rows)} subscriber{'' if len(rows) == 1 else 's'}", file=sys.stderr)
    return 0


async def accounts_list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await account.every(conn)
    table = [(r.name, r.created_at.isoformat(timespec="seconds"), r.subscribers) for r in rows]
    for line in aligned(("name", "created", "subscribers"), table) if rows else ():
        print(line)
    if not rows:
        print(
            "no accounts: `einmal subscribers import --account A --create-account FILE.csv` creates one",
            file=sys.stderr,
        )
    return 0


async def show_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await members.member(conn, account=args.account, email=args.email)
        seen = [await activity.of_subscriber(conn, subscriber_id=r.id) for r in rows]
    for r, done in zip(rows, seen, strict=True):
        print(
            f"email: {r.email}\nname: {r.name}\nstatus: {r.status}\nlists: {r.lists or '-'}\n"
            f"awaiting confirmation: {r.unconfirmed or '-'}\n"
            f"attributes: {r.attributes}\nsuppressed: {r.suppressed or 'no'}\n"
            f"created: {r.created_at.isoformat(timespec='seconds')}\n"
            f"last activity: {done.last or '-'}"
        )
        for name in ("delivered", "clicked", "bounced", "complained", "unsubscribed"):
            if (at := getattr(done, name)) is not None:
                print(f"last {name}: {at.isoformat(timespec='seconds')}")
    return 0


async def export_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await members.members(conn, account=args.account, list_name=args.list)
    attributes = [json.loads(r.attributes) for r in rows]
    columns = sorted({key for a in attributes for key in a})
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["email", "name", "list", UNCONFIRMED, SUPPRESSED, *columns])
    for r, a in zip(rows, attributes, strict=True):
        writer.writerow(
            [r.email, r.name, r.lists, r.unconfirmed, r.suppressed or "", *(a.get(key, "") for key in columns)]
        )
    return 0


async def delete_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn, conn.transaction():
        account_id = await find_account(conn, name=args.account)
        erased = await erasure.erase(conn, account_id, args.email, "cli")
    print(f"erased {erased}; its address stays suppressed")
    return 0


async def suppressions_list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await members.suppressions(conn, account=args.account)
    table = [(r.email_lower, r.reason, r.created_at.isoformat(timespec="seconds")) for r in rows]
    for line in aligned(("email", "reason", "since"), table) if rows else ():
        print(line)
    return 0


async def suppressions_remove_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        removed, kept = await members.unsuppress(conn, account=args.account, emails=args.emails)
    print(f"removed {removed}, not suppressed {kept}")
    return 0


async def suppressions_review_command(args: argparse.Namespace, settings: Settings) -> int:
    from service.inbound import review

    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        listed, lifted = await review.review(conn, account_id, settings.soft_bounce_limit, lift=args.lift)
    for r in listed:
        print(r.line())
    n = len(listed)
    which = (
        f"{n} bounce suppression{'' if n == 1 else 's'} that no bounce of {'its' if n == 1 else 'their'} "
        "mailbox would make today"
    )
    if args.lift:
        print(f"{which}; lifted {lifted}" + (f", {n - lifted} bounced again since and kept" if lifted < n else ""))
    else:
        print(f"{which}{'; lift them with --lift' if n else ''}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    subscribers = subparsers.add_parser("subscribers", help="manage subscribers").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND"
    )
    imp = subscribers.add_parser(
        "import", help="import a CSV file (header row; email, name, list, attributes) or another tool's export"
    )
    imp.add_argument(
        "--from",
        dest="source",
        choices=sources.FORMATS,
        default="csv",
        help="the file's format: einmal's CSV (the default), a listmonk subscriber export, a Mailchimp audience "
        "export (its subscribed, unsubscribed or cleaned file)",
    )
    imp.add_argument("--dry-run", action="store_true", help="say what the import would change and write nothing")
    imp.add_argument(
        "--subscription-status",
        choices=sources.STATUSES,
        help="--from listmonk: the subscription status the export was filtered by (default unconfirmed: a sign-up "
        "awaiting confirmation, never mailed)",
    )
    imp.add_argument("--account", required=True, help="the account the subscribers belong to; it must exist")
    imp.add_argument("--create-account", action="store_true", help="create the account when it does not exist")
    imp.add_argument(
        "--list",
        dest="lists",
        action="append",
        default=[],
        metavar="NAME",
        help="the list of the rows that name none (repeatable); without it a new subscriber naming no list goes "
        "on 'default' and one already present joins nothing",
    )
    imp.add_argument("file", help="UTF-8 CSV: a header row, then one subscriber a line (, ; or tab separated)")
    imp.set_defaults(func=import_command.command)
    for verb, text, command in (
        ("list", "an account's subscribers: email, name, status, lists", list_command),
        ("export", "an account's subscribers as CSV that import reads back", export_command),
    ):
        p = subscribers.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="whose subscribers")
        p.add_argument("--list", help="only the members of this list")
        p.set_defaults(func=command)
    for verb, text, command in (
        ("show", "one subscriber: lists, attributes, suppression", show_command),
        ("delete", "erase a subscriber's data (GDPR); the address stays suppressed", delete_command),
    ):
        p = subscribers.add_parser(verb, help=text)
        p.add_argument("--account", required=True, help="the subscriber's account")
        p.add_argument("email", help="the subscriber's address")
        p.set_defaults(func=command)
