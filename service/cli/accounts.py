"""`einmal accounts set ACCOUNT`: what the account's unsubscribe page shows (service/web/pages.py).

--display-name names the sender on the page (unset: the message's From name), --language is the
page's language unless a campaign has its own, --contact an address the page offers when a genuine
link no longer works. An empty value clears a setting. The setting itself is service/accounts/account.py's.
"""

import argparse

from service import db
from service.accounts import account
from service.errors import Invalid
from service.settings import Settings
from service.subscribers import texts
from service.subscribers.importer import check_account, shown


async def set_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    given = {"display_name": args.display_name, "language": args.language, "contact": args.contact}
    if all(value is None for value in given.values()):
        raise Invalid("nothing to set: give --display-name, --language or --contact")
    named = account.display_name(args.display_name) if args.display_name is not None else None
    language = texts.checked(args.language) if args.language is not None else None
    address = account.contact(args.contact) if args.contact is not None else None
    async with db.connection(db.url(settings)) as conn:
        page = await account.set_page(
            conn,
            account=args.account,
            display_name=named,
            language=language,
            contact=address,
            given={name for name, value in given.items() if value is not None},
        )
    name = repr(page.display_name) if page.display_name else "-"
    print(
        f"account {shown(args.account)}: display name {name}, language {page.language}, contact {page.contact or '-'}"
    )
    return 0
