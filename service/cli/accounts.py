"""`einmal accounts set ACCOUNT`: what the account's unsubscribe page shows (service/web/pages.py).

--display-name names the sender on the page (unset: the message's From name), --language is the
page's language unless a campaign has its own, --contact an address the page offers when a genuine
link no longer works. An empty value clears a setting.
"""

import argparse

from service import db
from service.addresses import normalized_address
from service.cli.campaigns import one_line
from service.errors import UsageError
from service.settings import Settings
from service.text import check_account, shown
from service.web import texts

MAX_DISPLAY_NAME = 200


def contact(value: str, option: str = "--contact") -> str | None:
    """--contact as a normalised address; None for '' (cleared); UsageError when it is no address."""
    if not value.strip():
        return None
    address = one_line(value, option, 320)
    try:
        return normalized_address(address)
    except ValueError as exc:  # EmailNotValidError
        raise UsageError(f"{option} {shown(value)} is not a valid address: {exc}") from None


def display_name(value: str, option: str = "--display-name") -> str | None:
    """--display-name stripped; None for '' (cleared); UsageError unless it is one line of printable text."""
    return one_line(value, option, MAX_DISPLAY_NAME) if value.strip() else None


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    given = {"display_name": args.display_name, "language": args.language, "contact": args.contact}
    if all(value is None for value in given.values()):
        raise UsageError("nothing to set: give --display-name, --language or --contact")
    named = display_name(args.display_name) if args.display_name is not None else None
    language = texts.checked(args.language) if args.language is not None else None
    address = contact(args.contact) if args.contact is not None else None
    async with db.connection(db.url(settings)) as conn:
        row = await conn.fetchrow(
            db.query("account_set_page"),
            args.account,
            args.display_name is not None,
            named,
            language,
            args.contact is not None,
            address,
        )
    if row is None:
        raise UsageError(f"no account named {shown(args.account)}")
    name = repr(row["display_name"]) if row["display_name"] else "-"
    print(
        f"account {shown(args.account)}: display name {name}, language {row['language']}, "
        f"contact {row['contact'] or '-'}"
    )
    return 0
