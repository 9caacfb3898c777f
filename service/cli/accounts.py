"""`einmal accounts create --account A`: an account, made before its first import, so that its From domains,
senders and keys can be set up first. `einmal accounts set --account A`: what the account's unsubscribe page
shows (service/web/pages.py); the name may also come first, without --account, as before.

--display-name names the sender on the page (unset: the message's From name), --language is the
page's language unless a campaign has its own, --contact an address the page offers when a genuine
link no longer works, --time-zone the zone of its subscribers without a valid `time_zone` attribute (a
campaign's --local-time). An empty value clears a setting. The setting itself is service/accounts/account.py's.

--track-opens on|off: whether its new campaigns track opens unless they say (docs/guide/click-tracking.md#opens).

--rate, --quota-hour, --quota-day and --messages-queued are the account's own sending budget
(service/accounts/budget.py): `default` gives one back to the installation's EINMAL_ACCOUNT_ setting, 0 is none.
"""

import argparse

from service import db
from service.accounts import account, budget
from service.cli import keys, subscribers_cmd
from service.errors import ArgumentError, Invalid
from service.settings import Settings
from service.subscribers import texts
from service.text import check_account, one_line, shown


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    name = check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        await account.create(conn, name=name)
    print(f"account {shown(name)} created")
    return 0


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.named and args.account and args.named != args.account:
        raise ArgumentError(f"two accounts named: {shown(args.named)} and --account {shown(args.account)}")
    args.account = args.account or args.named
    if not args.account:
        raise ArgumentError("give the account: --account NAME")
    check_account(args.account)
    given = {"display_name": args.display_name, "language": args.language, "contact": args.contact}
    given["time_zone"] = args.time_zone
    limits = {"rate": args.rate, "quota_hour": args.quota_hour, "quota_day": args.quota_day}
    limits["messages_queued"] = args.messages_queued
    if all(value is None for value in [*given.values(), *limits.values(), args.track_opens]):
        raise Invalid(
            "nothing to set: give --display-name, --language, --contact, --time-zone, --track-opens, --rate,"
            " --quota-hour, --quota-day or --messages-queued"
        )
    if args.track_opens is not None:
        async with db.connection(db.url(settings)) as conn:
            await account.set_track_opens(conn, name=args.account, on=args.track_opens == "on")
        print(f"account {shown(args.account)}: new campaigns track opens: {args.track_opens}")
        if all(value is None for value in [*given.values(), *limits.values()]):
            return 0
    numbers = {
        name: budget.number(value, "--" + name.replace("_", "-"), whole=name != "rate")
        for name, value in limits.items()
        if value is not None
    }
    if all(value is None for value in given.values()):
        async with db.connection(db.url(settings)) as conn:
            alone = await budget.set_budget(conn, account=args.account, given=numbers)
        print(f"account {shown(args.account)}: {budget.shown_budget(alone)}")
        return 0
    named = account.display_name(args.display_name) if args.display_name is not None else None
    language = texts.checked(args.language) if args.language is not None else None
    address = account.contact(args.contact) if args.contact is not None else None
    zone = one_line(args.time_zone, "--time-zone", 64) if args.time_zone is not None else None
    async with db.connection(db.url(settings)) as conn:
        page = await account.set_page(
            conn,
            account_id=await account.find_account(conn, name=args.account),
            display_name=named,
            language=language,
            contact=address,
            time_zone=zone,
            given={name for name, value in given.items() if value is not None},
        )
        own = await budget.set_budget(conn, account=args.account, given=numbers) if numbers else None
    name = repr(page.display_name) if page.display_name else "-"
    print(
        f"account {shown(args.account)}: display name {name}, language {page.language}, contact {page.contact or '-'}"
        f", time zone {page.time_zone}" + (f"; {budget.shown_budget(own)}" if own else "")
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    accounts = subparsers.add_parser("accounts", aliases=["account"], help="an account's settings and API keys")
    accounts = accounts.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    p = accounts.add_parser("create", help="a new account, before its first import (then its From domains, keys)")
    p.add_argument("--account", required=True, help="the new account's name")
    p.set_defaults(func=create_command)
    p = accounts.add_parser(
        "set", help="what its unsubscribe page shows: display name, language, contact; its own sending budget"
    )
    p.add_argument("--account", help="the account's name")
    p.add_argument("named", nargs="?", metavar="ACCOUNT", help="the account's name, as before --account")
    p.add_argument("--display-name", help="the sender's name on the page ('' clears it: the message's From name)")
    p.add_argument("--language", help="the page's language, e.g. en or de (a campaign's own comes first)")
    p.add_argument("--contact", help="an address shown when a link does not work ('' clears it)")
    p.add_argument(
        "--time-zone",
        help="its subscribers' time zone unless their time_zone attribute names one, e.g. Europe/Berlin "
        "(a campaign's --local-time; default: UTC)",
    )
    p.add_argument(
        "--track-opens",
        choices=("on", "off"),
        help="whether its new campaigns track opens unless they say (--track-opens, --no-track-opens)",
    )
    p.add_argument("--rate", help="its messages a second, all nodes together (default: EINMAL_ACCOUNT_RATE_LIMIT)")
    p.add_argument("--quota-hour", help="its messages in any hour (default: EINMAL_ACCOUNT_QUOTA_HOUR)")
    p.add_argument("--quota-day", help="its messages in any 24 hours (default: EINMAL_ACCOUNT_QUOTA_DAY)")
    p.add_argument(
        "--messages-queued", help="its messages queued, not yet sent (default: EINMAL_ACCOUNT_MESSAGES_QUEUED)"
    )
    p.set_defaults(func=set_command)
    accounts.add_parser("list", help="every account: name, when created, how many subscribers").set_defaults(
        func=subscribers_cmd.accounts_list_command
    )
    key = accounts.add_parser("key", help="keys for /api/v1 (docs/guide/http-api.md)").add_subparsers(
        dest="verb", metavar="VERB", required=True
    )
    p = key.add_parser("create", help="a new key; printed once, alone on stdout")
    p.add_argument("--account", required=True, help="the account the key acts for, and only it")
    p.add_argument("--scope", choices=("read", "write"), default="write", help="read: GET only (default write)")
    p.add_argument("--name", default="", help="what the key is for, shown by `key list`")
    p.set_defaults(func=keys.create_command)
    p = key.add_parser("list", help="an account's keys: prefix, scope, name, created, last used, revoked")
    p.add_argument("--account", required=True, help="whose keys")
    p.set_defaults(func=keys.list_command)
    p = key.add_parser("revoke", help="refuse a key from now on")
    p.add_argument("--account", required=True, help="whose key")
    p.add_argument("id", type=int, help="the key's id (`key list`)")
    p.set_defaults(func=keys.revoke_command)
