"""`einmal reconcile ID [--resend | --mark-sent]`: a campaign's in-doubt rows, listed or decided
(service/cli/campaigns.py)."""

import argparse

from service.cli import campaigns


def register(subparsers: argparse._SubParsersAction) -> None:
    reconcile = subparsers.add_parser("reconcile", help="list or decide a campaign's in-doubt rows")
    reconcile.add_argument("id", type=int, help="the campaign's id")
    decide = reconcile.add_mutually_exclusive_group()
    decide.add_argument("--resend", action="store_true", help="queue them again (same Message-ID)")
    decide.add_argument("--mark-sent", action="store_true", help="record them as sent")
    reconcile.add_argument(
        "--id",
        dest="ids",
        type=int,
        action="append",
        metavar="N",
        help="only the in-doubt row with this id (as listed); repeatable",
    )
    reconcile.add_argument(
        "--address",
        dest="addresses",
        action="append",
        metavar="EMAIL",
        help="only the in-doubt row of this address (any spelling of it); repeatable",
    )
    reconcile.set_defaults(func=campaigns.reconcile_command)
