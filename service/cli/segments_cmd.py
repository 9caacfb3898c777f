"""`einmal segments create|change NAME --account A (--rule JSON | --rule-file F)`, `list`, `show NAME`,
`count NAME`, `sample NAME [--limit N]` and `delete NAME`: the options parsed, then the segment's own functions
(service/segments/segments.py) called and their results printed (docs/guide/segments.md)."""

import argparse
import json
from typing import Any

from service import db
from service.accounts.account import find_account
from service.cli.campaigns import read_body
from service.cli.tables import aligned
from service.errors import Invalid
from service.segments import segments
from service.settings import Settings
from service.text import check_account


def rule_given(args: argparse.Namespace) -> Any:
    """The rule of --rule or --rule-file as JSON; Invalid, in one line, when it is none."""
    option, text = (
        ("--rule", args.rule) if args.rule is not None else ("--rule-file", read_body(args.rule_file, "--rule-file"))
    )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Invalid(f"{option}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Invalid(f"{option}: nested too deep") from None


def _shown(segment: segments.Segment) -> str:
    return json.dumps(segment.rule, ensure_ascii=False)


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    rule = rule_given(args)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        if args.command_verb == "create":
            made = await segments.create(conn, account_id=account_id, name=args.name, rule=rule)
        else:
            made = await segments.update(conn, account_id=account_id, name=args.name, rule=rule)
    print(made.name)
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        found = await segments.listing(conn, account_id=await find_account(conn, name=args.account))
    for line in aligned(
        ("name", "updated", "rule"), [(s.name, f"{s.updated_at:%Y-%m-%d %H:%M}", _shown(s)) for s in found]
    ):
        print(line)
    return 0


async def show_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        found = await segments.get(conn, account_id=await find_account(conn, name=args.account), name=args.name)
    print(json.dumps(found.rule, ensure_ascii=False, indent=2))
    return 0


async def count_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        found = await segments.count(conn, account_id=await find_account(conn, name=args.account), name=args.name)
    print(f"{found.subscribers} subscribers, {found.suppressed} of them suppressed")
    return 0


async def sample_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await segments.sample(conn, account_id=account_id, name=args.name, limit=args.limit)
    table = [(s.email, s.name, f"{s.subscribed_at:%Y-%m-%d}", "suppressed" if s.suppressed else "") for s in found]
    for line in aligned(("email", "name", "subscribed", "suppressed"), table):
        print(line)
    return 0


async def delete_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        await segments.delete(conn, account_id=await find_account(conn, name=args.account), name=args.name)
    print(f"segment {args.name} deleted; campaigns made from it keep its rule")
    return 0


def _named(group: argparse._SubParsersAction, verb: str, said: str, func) -> argparse.ArgumentParser:
    p = group.add_parser(verb, help=said)
    p.add_argument("name", help="the segment's name")
    p.add_argument("--account", required=True, help="the account whose segment it is")
    p.set_defaults(func=func, command_verb=verb)
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "segments", help="saved rules over subscribers' attributes, lists, dates and the campaigns they got"
    ).add_subparsers(dest="segments_command", required=True, metavar="COMMAND")
    for verb, said in (("create", "a segment of a rule; prints its name"), ("change", "give a segment a new rule")):
        p = _named(group, verb, said, create_command)
        rule = p.add_mutually_exclusive_group(required=True)
        rule.add_argument("--rule", help='the rule as JSON, e.g. \'{"member": "news"}\'')
        rule.add_argument("--rule-file", help="the rule from a JSON file")
    listing = group.add_parser("list", help="the account's segments and their rules")
    listing.add_argument("--account", required=True, help="the account whose segments to list")
    listing.set_defaults(func=list_command)
    _named(group, "show", "the segment's rule, as JSON", show_command)
    _named(group, "count", "how many mailboxes a campaign to it would take now", count_command)
    sample = _named(group, "sample", "the first mailboxes a campaign to it would take, by address", sample_command)
    sample.add_argument("--limit", type=int, default=10, help=f"how many (1 to {segments.MAX_SAMPLE}, default 10)")
    _named(group, "delete", "delete the segment; campaigns made from it keep its rule", delete_command)
