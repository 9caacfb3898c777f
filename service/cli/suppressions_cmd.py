"""`einmal suppress` and `einmal suppressions list|remove|review`: the addresses an account never mails."""

import argparse

from service.cli import subscribers_cmd
from service.subscribers import suppressions


def register(subparsers: argparse._SubParsersAction) -> None:
    suppress = subparsers.add_parser("suppress", help="suppress addresses for an account")
    suppress.add_argument("--account", required=True, help="the account the addresses are suppressed for")
    suppress.add_argument("--reason", default="manual", help="recorded with each suppression (default: manual)")
    suppress.add_argument("emails", nargs="+", metavar="EMAIL", help="the addresses")
    suppress.set_defaults(func=suppressions.suppress_command)

    verbs = subparsers.add_parser("suppressions", help="list or remove suppressions").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND"
    )
    p = verbs.add_parser("list", help="an account's suppressed addresses, reasons and times")
    p.add_argument("--account", required=True, help="whose suppressions")
    p.set_defaults(func=subscribers_cmd.suppressions_list_command)
    p = verbs.add_parser("remove", help="mail these addresses again (running nodes: after a restart)")
    p.add_argument("--account", required=True, help="whose suppressions")
    p.add_argument("emails", nargs="+", metavar="EMAIL", help="the addresses")
    p.set_defaults(func=subscribers_cmd.suppressions_remove_command)
    p = verbs.add_parser("review", help="bounce suppressions that today's reasons would not make; --lift deletes them")
    p.add_argument("--account", required=True, help="whose suppressions")
    p.add_argument("--lift", action="store_true", help="delete the ones listed (without it: only list them)")
    p.set_defaults(func=subscribers_cmd.suppressions_review_command)
