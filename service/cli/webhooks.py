"""`einmal webhook add|list|deliveries|remove|rotate|replay --account NAME`: an account's outbound webhook endpoints
(service/webhooks/endpoints.py, docs/design.md#webhooks).

A signing secret is printed once, alone on stdout: `SECRET=$(einmal webhook add --account acme URL)`."""

import argparse
import sys

from service import db
from service.accounts.account import find_account
from service.cli.tables import aligned
from service.settings import Settings
from service.webhooks import endpoints, policy


async def add_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
    connect = lambda: db.connection(db.url(settings))  # noqa: E731
    made = await endpoints.add(
        connect, policy.Reach.of(settings), account_id=account_id, url=args.url, events=args.events
    )
    print(f"webhook endpoint {made.id} added for {', '.join(made.events)}; its signing secret:", file=sys.stderr)
    print(made.secret)  # alone on stdout
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        found = await endpoints.listing(conn, account_id=await find_account(conn, name=args.account))
    table = [
        (
            e.id,
            f"disabled: {e.disabled_reason}" if e.disabled_at else "active",
            e.pending,
            e.parked,
            ",".join(e.events),
            e.url,
        )
        for e in found
    ]
    for line in aligned(("id", "state", "pending", "parked", "events", "url"), table):
        print(line)
    return 0


async def deliveries_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await endpoints.deliveries(conn, account_id=account_id, id=args.id, state=args.state, limit=args.limit)
    table = [
        (
            d.event_id,
            d.type,
            d.state,
            d.attempts,
            d.last_status or "",
            d.created_at.isoformat(timespec="seconds"),
            d.next_attempt_at.isoformat(timespec="seconds") if d.state == "pending" else "",
            d.last_error or "",
        )
        for d in found
    ]
    for line in aligned(("event", "type", "state", "attempts", "status", "made", "next", "last error"), table):
        print(line)
    return 0


async def remove_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        await endpoints.remove(conn, account_id=await find_account(conn, name=args.account), id=args.id)
    print(f"removed webhook endpoint {args.id}")
    return 0


async def rotate_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        rotated = await endpoints.rotate(conn, settings.webhook_rotation_hours, account_id=account_id, id=args.id)
    until = rotated.previous_until.isoformat(timespec="seconds")
    print(
        f"webhook endpoint {rotated.id}: new signing secret; the previous one signs too until {until}", file=sys.stderr
    )
    print(rotated.secret)  # alone on stdout
    return 0


async def replay_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        replayed = await endpoints.replay(conn, account_id=await find_account(conn, name=args.account), id=args.id)
    print(f"webhook endpoint {replayed.id}: {replayed.replayed} parked deliveries pending again")
    if replayed.not_kept_since is not None:
        since = replayed.not_kept_since.isoformat(timespec="seconds")
        print(f"it was disabled since {since}: the events of that time were not kept for it and are not delivered")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    verbs = subparsers.add_parser("webhook", help="an account's outbound webhook endpoints").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND"
    )
    p = verbs.add_parser("add", help="a new endpoint; prints its signing secret, once")
    p.add_argument("--account", required=True, help="whose endpoint")
    p.add_argument(
        "--event",
        dest="events",
        action="append",
        choices=endpoints.EVENT_TYPES,
        help="an event type it receives (repeat it for several; default: every type)",
    )
    p.add_argument("url", metavar="URL", help="https://… (a host with a public address)")
    p.set_defaults(func=add_command)
    p = verbs.add_parser("list", help="an account's endpoints, their state and deliveries waiting")
    p.add_argument("--account", required=True, help="whose endpoints")
    p.set_defaults(func=list_command)
    p = verbs.add_parser("deliveries", help="an endpoint's deliveries, newest first (--state parked: those given up)")
    p.add_argument("--account", required=True, help="whose endpoint")
    p.add_argument("--state", choices=endpoints.STATES, help="only those in this state")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100, at most 1000)")
    p.add_argument("id", type=int, metavar="ID", help="the endpoint's id (`einmal webhook list`)")
    p.set_defaults(func=deliveries_command)
    for name, func, text in (
        ("remove", remove_command, "remove an endpoint, with its deliveries"),
        ("rotate", rotate_command, "a new signing secret (printed once); the previous one signs too for a while"),
        ("replay", replay_command, "an endpoint's parked deliveries pending again (and the endpoint enabled)"),
    ):
        p = verbs.add_parser(name, help=text)
        p.add_argument("--account", required=True, help="whose endpoint")
        p.add_argument("id", type=int, metavar="ID", help="the endpoint's id (`einmal webhook list`)")
        p.set_defaults(func=func)
