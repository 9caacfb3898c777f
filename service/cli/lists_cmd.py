"""`einmal lists [--account A]`, `einmal lists set LIST --account A --title TEXT` and
`einmal lists form open|close LIST --account A [--origin URL]… [--from ADDRESS] [--subject S]
[--text-file F | --text T]`.

`lists` prints each list a line, tab-separated: id, account, name, confirmed members, unconfirmed sign-ups,
and its sign-up form's address while it is open, else `closed`. `set --title` gives a list the title its
public pages show (the form, the confirmation page, the preference page): without one they say "the mailing
list", never the name, which is the operator's key; an empty title clears it.

A list takes sign-ups (its public form and `POST /api/v1/subscribe`) only once its account opens them: `form
open` prints the form's address, a random token's that stays the same when it is closed and opened again;
`--origin` (repeatable) replaces the origins besides the serving site's own whose pages may post it, and
without it they stay. `--from` gives the list its own confirmations' From, of one of its account's From
domains (an installation of several clients: EINMAL_OPTIN_FROM is only the default of the lists given none; ''
clears it); without it the list's stays. `--subject` and `--text-file` (or `--text`) give it its own
confirmation subject and text, templates as a campaign's, the text showing {{ confirm_url }}
(service/subscribers/optin_wording.py; '' clears them: einmal's own in the account's language); without them the
list's stay; `form open` says which it has. `form close` refuses sign-ups from then on; the sign-ups made stay,
and their links still confirm.
"""

import argparse
import sys

from service import db
from service.accounts.account import find_account
from service.accounts.members import all_lists
from service.cli.campaigns import read_body
from service.cli.tables import aligned
from service.mail.mailing import Mailing
from service.settings import Settings
from service.subscribers import optin, optin_wording, texts
from service.subscribers.lists import set_title, title
from service.text import check_account, shown


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    mailing = Mailing.of(settings)
    async with db.connection(db.url(settings)) as conn:
        rows = await all_lists(conn, account=args.account)
    table = [
        (
            r.id,
            r.account,
            r.name,
            r.members,
            r.unconfirmed,
            optin.form_url(mailing, r.form_token) if r.form_open else "closed",
        )
        for r in rows
    ]
    for line in aligned(("id", "account", "name", "members", "unconfirmed", "form"), table) if rows else ():
        print(line)
    print(f"{len(rows)} list{'' if len(rows) == 1 else 's'}", file=sys.stderr)
    return 0


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    named = title(args.title)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=check_account(args.account))
        try:
            await set_title(conn, account_id, args.list, named)
        except optin.NoList:
            raise optin.NoList(f"account {shown(args.account)} has no list named {shown(args.list)}") from None
    print(f"list {shown(args.list)}: title {shown(named) if named else '-'}")
    return 0


async def form_command(args: argparse.Namespace, settings: Settings) -> int:
    mailing = Mailing.of(settings)
    opening = args.verb == "open"
    allowed = optin.origins(args.origins) if args.origins else None
    given = getattr(args, "from_address", None)
    own = None if given is None else optin.checked_from(mailing, given) if given.strip() else ""
    subject, text = await _wording(args)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=check_account(args.account))
        try:
            row = await optin.set_form(conn, account_id, args.list, opening, allowed, mailing, own, subject, text)
        except optin.NoList:
            raise optin.NoList(f"account {shown(args.account)} has no list named {shown(args.list)}") from None
    origins = ", ".join(row["form_origins"]) or "this site only"
    if opening:
        print(optin.form_url(mailing, row["form_token"]))
        sender = row["optin_from"] or settings.optin_from
        default = texts.confirmation(row["language"])
        subject_said = (
            shown(row["optin_subject"], 100) if row["optin_subject"] else f"{shown(default.subject, 100)} (einmal's)"
        )
        text_said = (
            f"its own text ({len(row['optin_text']):,} characters)"
            if row["optin_text"]
            else f"einmal's text ({default.language})"
        )
        print(
            f"list {shown(args.list)}: sign-ups open; the form may be posted from {origins}; confirmations from "
            f"{shown(sender) if sender else '-'}, subject {subject_said}, {text_said}",
            file=sys.stderr,
        )
        if not settings.confirm_url:
            print(
                "einmal: warning: double opt-in is not set up here (EINMAL_CONFIRM_URL, EINMAL_OPTIN_FROM): the "
                "form answers 404 until it is",
                file=sys.stderr,
            )
    else:
        print(f"list {shown(args.list)}: sign-ups closed", file=sys.stderr)
    return 0


async def _wording(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The list's own confirmation subject and text given (None: not given), checked (optin_wording.py)."""
    subject, text, text_file = (getattr(args, name, None) for name in ("subject", "text", "text_file"))
    option = "--text"
    if text_file is not None:
        text, option = read_body(text_file, "--text-file"), f"--text-file {text_file}"
    return await optin_wording.checked(subject, text, ("--subject", option))


def register(subparsers: argparse._SubParsersAction) -> None:
    lists = subparsers.add_parser("lists", help="lists: members, titles, sign-up forms (open, close)")
    lists.add_argument("--account", help="only this account's lists")
    lists.set_defaults(func=list_command)
    verbs = lists.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    p = verbs.add_parser("set", help="what the list's public pages call it")
    p.add_argument("list", help="the list's name")
    p.add_argument("--account", required=True, help="the list's account")
    p.add_argument(
        "--title",
        required=True,
        help="the title its sign-up form, confirmation page and preference page "
        "show, e.g. 'Weekly news' ('': none, they say 'the mailing list')",
    )
    p.set_defaults(func=set_command)
    form = verbs.add_parser("form", help="open or close a list's sign-ups: its public form and POST /api/v1/subscribe")
    form = form.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (("open", "take sign-ups; prints the form's address"), ("close", "take no more sign-ups")):
        p = form.add_parser(verb, help=text)
        p.add_argument("list", help="the list's name")
        p.add_argument("--account", required=True, help="the list's account")
        if verb == "open":
            p.add_argument(
                "--origin",
                dest="origins",
                action="append",
                default=[],
                metavar="URL",
                help="a site besides this one whose pages may post the form, e.g. https://shop.example.org "
                "(repeatable; replaces the list's; none given: they stay)",
            )
            p.add_argument(
                "--from",
                dest="from_address",
                metavar="ADDRESS",
                help="the From of the list's confirmation messages, of one of the account's From domains, e.g. "
                "'Weekly <news@mail.example.org>' (kept; '': none, EINMAL_OPTIN_FROM again)",
            )
            p.add_argument(
                "--subject",
                metavar="S",
                help="the subject of the list's confirmation messages, a template, e.g. 'Confirm your "
                f"subscription to {{{{ campaign.name }}}}' (one line, at most {optin_wording.MAX_SUBJECT} "
                "characters; kept; '': einmal's again)",
            )
            words = p.add_mutually_exclusive_group()
            words.add_argument(
                "--text-file",
                metavar="F",
                help=f"the text of the list's confirmation messages from a UTF-8 file, a template of at most "
                f"{optin_wording.MAX_TEXT:,} characters that shows the link, {{{{ confirm_url }}}} (kept)",
            )
            words.add_argument("--text", metavar="T", help="the text itself ('': einmal's again)")
        p.set_defaults(func=form_command, origins=[])
