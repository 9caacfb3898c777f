"""`einmal sequence create|list|status|pause|resume` and `einmal sequence step add|change|delete`: the options
parsed, then the sequence's own functions (service/sequences/) called and their results printed
(docs/design.md#sequences)."""

import argparse
import json
import re
import sys
from dataclasses import asdict

from service import db
from service.accounts.account import find_account
from service.campaigns.fields import MAX_SUBJECT, from_address
from service.cli import campaign_stats
from service.cli.campaigns import read_body
from service.cli.tables import aligned
from service.engagement import counts
from service.errors import Invalid
from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from service.settings import Settings
from service.text import body_text, check_account, one_line, shown

_DELAY = re.compile(r"^(\d{1,10})([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_WINDOW = re.compile(r"^(\d{1,2})-(\d{1,2})$")


def delay_seconds(value: str) -> int:
    """`90`, `90s`, `15m`, `2h`, `3d` as seconds."""
    found = _DELAY.match(value.strip())
    if found is None:
        raise Invalid(f"--delay {shown(value)}: a number of seconds, or of minutes, hours, days: 90s, 15m, 2h, 3d")
    return steps.delay(int(found[1]) * _UNITS[found[2]])


def send_window(value: str, zone: str) -> steps.Window:
    found = _WINDOW.match(value.strip())
    if found is None:
        raise Invalid(f"--window {shown(value)}: two hours, e.g. 9-17 (17-9 wraps past midnight)")
    return steps.window(int(found[1]), int(found[2]), zone)


def _text(args: argparse.Namespace) -> str | None:
    if args.text is not None:
        return body_text(args.text, "--text")
    if args.text_file is not None:
        return body_text(read_body(args.text_file, "--text-file"), f"--text-file {args.text_file}")
    return None


def _html(args: argparse.Namespace) -> str | None:
    return (
        body_text(read_body(args.html_file, "--html-file"), f"--html-file {args.html_file}") if args.html_file else None
    )


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        made = await sequences.create(
            conn,
            account_id=account_id,
            name=args.name,
            list_name=args.list,
            existing=args.existing,
            segment=args.segment,
        )
    print(made.id)
    return 0


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        found = await sequences.listing(conn, account_id=await find_account(conn, name=args.account))
    table = [(s.id, s.name, s.list, s.status, s.steps, s.members) for s in found]
    for line in aligned(("id", "name", "list", "status", "steps", "members"), table):
        print(line)
    return 0


async def status_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await sequences.status(conn, account_id=account_id, sequence_id=args.id)
    if args.json:
        print(json.dumps(asdict(found), default=str, sort_keys=True))
        return 0
    head = found.sequence
    narrowed = f" narrowed by segment {shown(head.segment)}" if head.segment else ""
    print(
        f"sequence {head.id} {shown(head.name)} on list {shown(head.list)}{narrowed}: {head.status}, "
        f"{head.members} members"
    )
    table = [
        (
            s.position,
            s.campaign_id,
            "deleted" if s.status == "cancelled" else s.status,
            s.delay_seconds,
            s.window or "",
            s.waiting,
            s.counts["queued"] + s.counts["claimed"] + s.counts["sending"],
            s.counts["sent"],
            s.counts["failed"],
            s.counts["suppressed"],
            s.counts["in_doubt"],
        )
        for s in found.steps
    ]
    header = (
        "step",
        "campaign",
        "status",
        "delay s",
        "window",
        "waiting",
        "queued",
        "sent",
        "failed",
        "suppressed",
        "in doubt",
    )
    for line in aligned(header, table):
        print(line)
    print(f"{found.finished} past the last step, {found.left} left the list")
    for s in found.steps:
        if n := s.counts["in_doubt"]:  # their members wait: the next step goes once the row is settled
            waits = "its member waits" if n == 1 else "their members wait"
            print(
                f"step {s.position}: {n} message{'' if n == 1 else 's'} in doubt, {waits}: decide with "
                f"`einmal reconcile {s.campaign_id}`"
            )
    return 0


async def move_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        move = sequences.pause if args.verb == "pause" else sequences.resume
        await move(conn, account_id=account_id, sequence_id=args.id)
    print(f"sequence {args.id} {'paused' if args.verb == 'pause' else 'resumed'}")
    return 0


async def step_add_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    text = _text(args)
    if text is None or not text.strip():
        raise Invalid("the text body must not be empty: --text or --text-file")
    window = send_window(args.window, args.zone) if args.window else None
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        made = await steps.add(
            conn,
            mailing=Mailing.of(settings),
            account_id=account_id,
            sequence_id=args.id,
            subject=one_line(args.subject, "--subject", MAX_SUBJECT),
            from_address=from_address(args.from_address),
            text=text,
            html=_html(args),
            delay_seconds=delay_seconds(args.delay),
            send_window=window,
            at=args.position,
            track_clicks=args.track_clicks,
        )
    print(f"step {made.position} of sequence {made.sequence_id} (campaign {made.campaign_id})")
    for warning in made.warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    return 0


async def step_change_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    changes: dict[str, object] = {}
    if args.subject is not None:
        changes["subject"] = one_line(args.subject, "--subject", MAX_SUBJECT)
    if args.from_address is not None:
        changes["from_address"] = from_address(args.from_address)
    if (text := _text(args)) is not None:
        changes["text"] = text
    if args.html_file is not None:
        changes["html"] = _html(args)
    if args.delay is not None:
        changes["delay_seconds"] = delay_seconds(args.delay)
    if args.window is not None:
        changes["window"] = None if args.window == "any" else send_window(args.window, args.zone)
    if not changes:
        raise Invalid(
            "nothing to change: give --subject, --from, --text, --text-file, --html-file, --delay or --window"
        )
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        made = await steps.change(
            conn,
            mailing=Mailing.of(settings),
            account_id=account_id,
            sequence_id=args.id,
            at=args.position,
            changes=changes,
        )
    print(f"step {made.position} of sequence {made.sequence_id} changed")
    for warning in made.warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    return 0


async def step_delete_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        made = await steps.delete(conn, account_id=account_id, sequence_id=args.id, at=args.position)
    print(f"step {made.position} of sequence {made.sequence_id} deleted; its messages not yet sent are cancelled")
    return 0


def _step_options(p: argparse.ArgumentParser, *, adding: bool) -> None:
    p.add_argument("--subject", required=adding, help="the subject line: a Jinja2 template")
    p.add_argument("--from", dest="from_address", required=adding, help="the sender, 'Name <address>' or an address")
    body = p.add_mutually_exclusive_group(required=adding)
    body.add_argument("--text-file", help="the text body from a UTF-8 file: a Jinja2 template")
    body.add_argument("--text", help="the text body itself: a Jinja2 template")
    p.add_argument("--html-file", help="an HTML body from a UTF-8 file (autoescaped Jinja2 template)")
    p.add_argument(
        "--delay",
        default="0" if adding else None,
        help="after the member's previous step was sent (the first: after the confirmed join): seconds, or 15m, "
        "2h, 3d (default: 0, at once)",
    )
    p.add_argument(
        "--window",
        help="the hours its messages may go out, e.g. 9-17 (17-9 wraps past midnight)"
        + ("" if adding else "; 'any': no window"),
    )
    p.add_argument(
        "--zone",
        default="UTC",
        help="the window's time zone, e.g. Europe/Berlin, or 'local': each member's own (its time_zone "
        "attribute, else the account's) (default: UTC)",
    )


async def stats_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    async with db.connection(db.url(settings)) as conn:
        account_id = await find_account(conn, name=args.account)
        found = await counts.of_sequence(conn, account_id=account_id, name=args.name)
    if args.json:
        print(json.dumps(asdict(found)))
        return 0
    print(f"sequence {found.sequence_id} {shown(found.name)}")
    for step in found.steps:
        deleted = " (deleted)" if step.deleted else ""
        print()
        print(f"step {step.position}{deleted}, campaign {step.campaign_id}, {shown(step.subject)}")
        print(campaign_stats.figures(step))
        campaign_stats.print_clicks(step.clicks if step.clicks and step.clicks.tracked else None)
        campaign_stats.print_opens(step.opens if step.opens and step.opens.tracked else None)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    sequence = subparsers.add_parser(
        "sequence", help="mail that follows each member of a list from its join"
    ).add_subparsers(dest="sequence_command", required=True, metavar="COMMAND")

    create = sequence.add_parser("create", help="a sequence on a list; prints its id")
    create.add_argument("name", help="a name for operators, unique in the account")
    create.add_argument("--account", required=True, help="the account whose list it follows")
    create.add_argument("--list", required=True, help="the list whose members it follows")
    create.add_argument(
        "--existing",
        action="store_true",
        help="the list's confirmed members now follow it too, as if they joined now (default: only new joins)",
    )
    create.add_argument(
        "--segment",
        help="one of the account's segments: each step goes to the members its rule takes when the step falls due",
    )
    create.set_defaults(func=create_command)

    listing = sequence.add_parser("list", help="the account's sequences")
    listing.add_argument("--account", required=True, help="the account whose sequences to list")
    listing.set_defaults(func=list_command)

    status = sequence.add_parser("status", help="each step's messages by state and the members waiting for it")
    status.add_argument("id", type=int, help="the sequence's id")
    status.add_argument("--account", required=True, help="the account whose sequence it is")
    status.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    status.set_defaults(func=status_command)

    stats = sequence.add_parser(
        "stats", help="each step's engagement: delivered, bounced, complained, unsubscribed, clicks per link"
    )
    stats.add_argument("name", help="the sequence's name")
    stats.add_argument("--account", required=True, help="the account whose sequence it is")
    stats.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    stats.set_defaults(func=stats_command)

    for verb, said in (("pause", "hold every step"), ("resume", "send every step again")):
        p = sequence.add_parser(verb, help=said)
        p.add_argument("id", type=int, help="the sequence's id")
        p.add_argument("--account", required=True, help="the account whose sequence it is")
        p.set_defaults(func=move_command, verb=verb)

    step = sequence.add_parser("step", help="add, change or delete a step").add_subparsers(
        dest="step_command", required=True, metavar="COMMAND"
    )
    add = step.add_parser("add", help="add a step; prints its position")
    add.add_argument("id", type=int, help="the sequence's id")
    add.add_argument("--account", required=True, help="the account whose sequence it is")
    add.add_argument("--position", type=int, help="where (default: after the last; positions are never reused)")
    _step_options(add, adding=True)
    add.add_argument(
        "--track-clicks", action="store_true", help="its links rewritten to tracked ones (needs EINMAL_CLICK_URL)"
    )
    add.set_defaults(func=step_add_command)

    change = step.add_parser("change", help="change a step: its messages not yet sent take the change")
    change.add_argument("id", type=int, help="the sequence's id")
    change.add_argument("position", type=int, help="the step's position")
    change.add_argument("--account", required=True, help="the account whose sequence it is")
    _step_options(change, adding=False)
    change.set_defaults(func=step_change_command)

    delete = step.add_parser("delete", help="delete a step: its messages not yet sent are cancelled")
    delete.add_argument("id", type=int, help="the sequence's id")
    delete.add_argument("position", type=int, help="the step's position")
    delete.add_argument("--account", required=True, help="the account whose sequence it is")
    delete.set_defaults(func=step_delete_command)
