"""`einmal prune`: the send rows of campaigns finished long ago go; their counts stay
(service/campaigns/retention.py)."""

import argparse

from service import db
from service.campaigns import retention
from service.errors import Invalid
from service.settings import Settings


async def prune_command(args: argparse.Namespace, settings: Settings) -> int:
    days = args.older_than if args.older_than is not None else settings.retention_days
    if days is None and args.campaign is None:
        raise Invalid("prune: give --older-than DAYS or --campaign ID (or set EINMAL_RETENTION_DAYS)")
    async with db.connection(db.url(settings)) as conn:
        if args.campaign is not None:
            await retention.check_campaign(conn, campaign_id=args.campaign)
        found = await retention.candidates(conn, older_than_seconds=(days or 0) * 86400, campaign_id=args.campaign)
        pruned = 0
        for campaign in found:
            finished = campaign.finished_at.strftime("%Y-%m-%d %H:%M")
            if args.dry_run:
                print(f"campaign {campaign.id} ({campaign.status} {finished}): would be pruned")
                continue
            done = await retention.prune(conn, candidate=campaign)
            pruned += not done.how.startswith("skipped")
            print(f"campaign {done.id} ({done.status} {finished}): {done.how}; {done.rows} rows counted")
    if args.dry_run:
        print(f"{len(found)} campaign{'' if len(found) == 1 else 's'} would be pruned (dry run: nothing removed)")
    else:
        print(f"{pruned} campaign{'' if pruned == 1 else 's'} pruned")
    return 0


def days(value: str) -> float:
    """`prune --older-than`: a number of days, 0 or more (fractions too)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more days (got {value})")
    return number


def register(subparsers: argparse._SubParsersAction) -> None:
    prune = subparsers.add_parser(
        "prune", help="remove the send rows of campaigns finished long ago; their counts, bounces and suppressions stay"
    )
    prune.add_argument(
        "--older-than",
        type=days,
        metavar="DAYS",
        help="campaigns sent or cancelled more than DAYS days ago (default: EINMAL_RETENTION_DAYS)",
    )
    prune.add_argument("--campaign", type=int, metavar="ID", help="only this campaign (finished: any age)")
    prune.add_argument("--dry-run", action="store_true", help="list what would be pruned, remove nothing")
    prune.set_defaults(func=prune_command)
