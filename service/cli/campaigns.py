"""`einmal campaign create|approve|pause|resume|cancel|status|retry` and `einmal reconcile`: the options
parsed, then the campaign's own functions (service/campaigns/) called and their results printed."""

import argparse
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from service import db
from service.accounts import doctor
from service.accounts.account import find_account
from service.addresses import email_key
from service.campaigns import approval, drafts, rows, status, transitions
from service.campaigns.fields import (
    MAX_CAMPAIGN_NAME,
    MAX_SUBJECT,
    check_templates,
    from_address,
    list_names,
    local_time,
)
from service.campaigns.status import STATUSES
from service.cli import campaign_stats, campaign_status, campaign_view
from service.cli.flags import FLAGS
from service.cli.tables import aligned
from service.errors import ArgumentError, Invalid
from service.mail import headers
from service.mail.mailing import Mailing
from service.settings import Settings
from service.smtp.reasons import REASONS
from service.subscribers import texts
from service.text import body_text, check_account, one_line, shown

# --- create -------------------------------------------------------------------------------------

# `2027-01-01 09:00` (a date, spaces, a time with perhaps an offset), then perhaps a zone
_DATE_AND_TIME = re.compile(
    r"^(\d{4}-\d{2}-\d{2}) +(\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"(?: +|$)"
)


def _split_at(value: str) -> tuple[str, str]:
    """--at as (ISO-8601 text, zone or ""): `2027-01-01 09:00 Europe/Berlin` gives ("2027-01-01T09:00",
    "Europe/Berlin")."""
    text = value.strip()
    if apart := _DATE_AND_TIME.match(text):  # the date, a space, the time
        text = f"{apart[1]}T{apart[2]} {text[apart.end() :]}".strip()
    iso, _, zone = text.partition(" ")
    return iso, zone.strip()


def at_without_zone(value: str | None, at: datetime | None) -> str | None:
    """The note `campaign create` prints when --at named neither an offset nor a zone: which zone it took."""
    if at is None or value is None:
        return None
    iso, zone = _split_at(value)
    if zone or datetime.fromisoformat(iso).tzinfo is not None:
        return None
    return f"note: --at {shown(value)} names no offset or time zone: taken as UTC, {at.isoformat()}"


def scheduled_for(value: str | None, now: datetime | None = None) -> datetime | None:
    """--at as an aware datetime (None: when approved). An ISO-8601 time, with an offset, an IANA
    zone after a space (`2026-12-01T09:00 Europe/Berlin`) or neither (UTC); the date and the time may
    be apart (`2027-01-01 09:00`); `now`; never the past. ArgumentError (exit 2) for anything else."""
    if value is None or value.strip().lower() == "now":
        return None
    text, zone = _split_at(value)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentError(
            f"--at {shown(value)} is not an ISO-8601 time, e.g. 2030-01-31T09:00:00+01:00 "
            "or 2030-01-31T09:00 Europe/Berlin"
        ) from None
    if zone:
        if at.tzinfo is not None:
            raise ArgumentError(f"--at {shown(value)}: give an offset or a time zone, not both")
        try:
            at = at.replace(tzinfo=ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            raise ArgumentError(f"--at {shown(value)}: unknown time zone {shown(zone)}, e.g. Europe/Berlin") from None
    try:
        at = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # before year 1 or after 9999 in UTC
        raise ArgumentError(f"--at {shown(value)} is out of range") from None
    if at < (now or datetime.now(UTC)):
        raise ArgumentError(
            f"--at {shown(value)} is in the past ({at.isoformat(timespec='seconds')}); --at now sends when approved"
        )
    return at


def read_body(path: str, option: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArgumentError(f"{option} {path}: no such file") from None
    except UnicodeDecodeError:
        raise Invalid(f"{option} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ArgumentError(f"{option} {path}: {exc.strerror}") from None


async def create_command(args: argparse.Namespace, settings: Settings) -> int:
    check_account(args.account)
    name = one_line(args.name, "--name", MAX_CAMPAIGN_NAME)
    subject = one_line(args.subject, "--subject", MAX_SUBJECT)
    sender = from_address(args.from_address)
    at = scheduled_for(args.at)
    if note := at_without_zone(args.at, at):
        print(f"einmal: {note}", file=sys.stderr)
    if args.text is not None:
        text = body_text(args.text, "--text")
    else:
        text = body_text(read_body(args.text_file, "--text-file"), f"--text-file {args.text_file}")
    if not text.strip():
        raise Invalid("the text body must not be empty")
    if args.html is not None:
        html: str | None = body_text(args.html, "--html")
    else:
        html = read_body(args.html_file, "--html-file") if args.html_file else None
        if html is not None:
            html = body_text(html, f"--html-file {args.html_file}")
    check_templates(subject, text, html)
    reply_to = from_address(args.reply_to, "reply_to") if args.reply_to is not None else None
    list_id = None
    if args.list_id is not None:
        phrase, identifier = headers.list_id(args.list_id)
        list_id = f"{phrase} <{identifier}>" if phrase else identifier
    extra = headers.customs(args.headers)
    lists = list_names(args.lists) if args.lists or args.segment is None else []  # a segment alone: any list
    language = texts.checked(args.language) if args.language is not None else None
    at_local = local_time(args.local_time, "--local-time") if args.local_time is not None else None
    async with db.connection(db.url(settings)) as conn:
        created = await drafts.create(
            conn,
            mailing=Mailing.of(settings),
            account_id=await find_account(conn, name=args.account),
            lists=lists,
            segment=args.segment,
            name=name,
            subject=subject,
            from_address=sender,
            text=text,
            html=html,
            at=at,
            reply_to=reply_to,
            list_id=list_id,
            headers=extra,
            language=language,
            unsubscribe_required=not args.no_unsubscribe,
            track_clicks=args.track_clicks,
            local_time=at_local,
            track_opens=args.track_opens,
        )
    for warning in created.trial.warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    if not lists and args.segment is not None:
        print(
            f"einmal: no --list given: the campaign goes to those of segment {shown(args.segment)} on any list",
            file=sys.stderr,
        )
    elif not args.lists:  # the default list is no one's choice: say it, so that it is not a surprise
        print(f"einmal: no --list given: the campaign goes to the list {shown(lists[0])}", file=sys.stderr)
    print(created.id)
    return 0


# --- transitions --------------------------------------------------------------------------------


async def transition_command(args: argparse.Namespace, settings: Settings) -> int:
    warnings: tuple[str, ...] = ()
    schedule, report = None, None
    checkup = doctor.Checkup.of(settings)
    if args.verb == "approve":  # the doctor first, with no connection held while it waits on DNS
        report = await approval.asked(lambda: db.connection(db.url(settings)), checkup, campaign_id=args.id)
    async with db.connection(db.url(settings)) as conn:
        if args.verb == "approve":
            approved = await approval.approve(
                conn,
                mailing=checkup.mailing,
                campaign_id=args.id,
                force=args.force,
                forcing=FLAGS["force"],
                report=report,
            )
            warnings = approved.warnings
            snap = await status.snapshot(conn, campaign_id=args.id, node_timeout=settings.node_timeout_seconds)
            schedule = _starts(snap)
        else:
            await transitions.transition(conn, verb=args.verb, campaign_id=args.id)
    for warning in warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    print(f"campaign {args.id} {transitions.TRANSITIONS[args.verb][1]}" + (f"; {schedule}" if schedule else ""))
    return 0


def _starts(snap: status.Snapshot) -> str | None:
    """What `approve` adds: `scheduled for … (in 1 h 20 min)`, `starts now` (at a running node's next tick), or
    that it would start now but no node is running."""
    if snap.scheduled_for is not None and snap.now is not None and snap.scheduled_for <= snap.now:
        return "starts now" if snap.nodes != 0 else "due now, but no node is running: start one with `einmal run`"
    return snap.schedule


async def status_command(args: argparse.Namespace, settings: Settings) -> int:
    return await campaign_status.command(args, settings)


# --- retry --------------------------------------------------------------------------------------


async def retry_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        done = await rows.retry_failed(conn, campaign_id=args.id, reason=args.reason, pattern=args.reply)
    print(f"{done.moved} failed row{'' if done.moved == 1 else 's'} of campaign {args.id} queued again")
    if done.left:
        print(f"{done.left} of a member who left the sequence's list: settled as suppressed, not sent")
    if done.reopened:
        print(f"campaign {args.id} is sending again")
    return 0


# --- reconcile ----------------------------------------------------------------------------------


def chosen_rows(args: argparse.Namespace) -> tuple[list[int] | None, list[str] | None]:
    """--id and --address as the (send row ids, mailbox keys) to decide; (None, None): every in-doubt row."""
    ids, addresses = getattr(args, "ids", None) or [], getattr(args, "addresses", None) or []
    if not ids and not addresses:
        return None, None
    return ids, [email_key(address) for address in addresses]


def _in_doubt_table(campaign_id: int, found: list[rows.InDoubt]) -> None:
    table = [
        (r.id, r.email, r.node or "-", r.since.isoformat(timespec="seconds"), " ".join((r.last_reply or "-").split()))
        for r in found
    ]
    for line in aligned(("id", "email", "node", "in doubt since", "last reply"), table) if found else ():
        print(line)
    hint = "; decide with --resend or --mark-sent (all, or some with --id and --address)" if found else ""
    print(f"{len(found)} in-doubt row{'' if len(found) == 1 else 's'} in campaign {campaign_id}{hint}")


async def reconcile_command(args: argparse.Namespace, settings: Settings) -> int:
    ids, keys = chosen_rows(args)
    async with db.connection(db.url(settings)) as conn:
        if not (args.resend or args.mark_sent):
            _in_doubt_table(args.id, await rows.in_doubt(conn, campaign_id=args.id, ids=ids, keys=keys))
            return 0
        done = await rows.decide(
            conn, campaign_id=args.id, resend=args.resend, ids=ids, keys=keys, addresses=args.addresses or []
        )
    counted = f"{done.moved} in-doubt row{'' if done.moved == 1 else 's'}"
    print(f"{counted} of campaign {args.id} {'queued again' if args.resend else 'marked sent'}")
    if done.left:
        print(f"{done.left} of a member who left the sequence's list: settled as suppressed, not sent")
    if done.reopened:
        print(f"campaign {args.id} is sending again")
    return 0


def reply_pattern(value: str) -> re.Pattern:
    """`campaign retry --reply`: a regular expression searched in a row's last reply, ignoring case (a plain
    substring such as 5.7.26 matches itself); a bad one is a one-line usage error (exit 2)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    try:
        return re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a regular expression: {exc}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    campaign = subparsers.add_parser("campaign", help="manage campaigns").add_subparsers(
        dest="subcommand", metavar="SUBCOMMAND"
    )
    create = campaign.add_parser("create", help="create a draft; prints its id")
    create.add_argument("--account", required=True, help="the account whose lists it goes to")
    create.add_argument("--name", required=True, help="a name for operators (campaign.name in templates)")
    create.add_argument("--subject", required=True, help="the subject line: a Jinja2 template")
    create.add_argument("--from", dest="from_address", required=True, help="the sender, 'Name <address>' or an address")
    body = create.add_mutually_exclusive_group(required=True)
    body.add_argument("--text-file", help="the text body from a UTF-8 file: a Jinja2 template")
    body.add_argument("--text", help="the text body itself: a Jinja2 template")
    html = create.add_mutually_exclusive_group()
    html.add_argument("--html-file", help="an HTML body from a UTF-8 file (autoescaped Jinja2 template)")
    html.add_argument("--html", help="the HTML body itself, e.g. '<p>Hello {{ name }}</p>' (autoescaped Jinja2)")
    create.add_argument(
        "--list",
        dest="lists",
        action="append",
        default=[],
        help="a list to send to; repeat for several (default: default)",
    )
    create.add_argument(
        "--segment",
        help="only those of its lists' subscribers the account's segment takes (no --list: from any of the "
        "account's lists); the campaign keeps the segment's rule as it is now",
    )
    create.add_argument(
        "--at",
        help="when to start: ISO-8601 with an offset or an IANA zone after a space "
        "('2026-12-01T09:00 Europe/Berlin'; neither: UTC), or 'now' (the default)",
    )
    create.add_argument("--reply-to", help="Reply-To address")
    create.add_argument("--list-id", help="List-Id: 'Name <id.example.org>' or 'id.example.org'")
    create.add_argument(
        "--header", dest="headers", action="append", default=[], help="an extra header 'X-Name: value' (repeatable)"
    )
    create.add_argument(
        "--language",
        help="the language of its unsubscribe page (default: the account's now, kept when the account's changes)",
    )
    create.add_argument(
        "--no-unsubscribe",
        action="store_true",
        help="it may go out without a one-click unsubscribe where EINMAL_UNSUBSCRIBE_URL and "
        "_SECRET are not set (Gmail and Yahoo require one of bulk mail); default: refused",
    )
    create.add_argument(
        "--track-clicks",
        action="store_true",
        help="lead its links through EINMAL_CLICK_URL, which records each click, a person's or a machine's "
        "(docs/guide/click-tracking.md); default: links untouched",
    )
    create.add_argument(
        "--local-time",
        metavar="HH:MM",
        help="send each message at this time in its recipient's time zone (the subscriber's time_zone "
        "attribute, else the account's), the first such moment from the start; default: at once",
    )
    create.add_argument(
        "--track-opens",
        action=argparse.BooleanOptionalAction,
        help="put a pixel from EINMAL_CLICK_URL in its HTML body, which records each open, a person's or a "
        "machine's (docs/guide/click-tracking.md); default: the account's (off unless it was turned on)",
    )
    create.set_defaults(func=create_command)
    for verb in ("approve", "pause", "resume", "cancel"):
        p = campaign.add_parser(verb, help=f"{verb} a campaign")
        p.add_argument("id", type=int, help="the campaign's id")
        if verb == "approve":
            p.add_argument(
                "--force",
                action="store_true",
                help="approve even if its trial render fails for every subscriber tried, or `einmal doctor` finds "
                "a check of its From domain failing",
            )
        p.set_defaults(func=transition_command, verb=verb)
    status = campaign.add_parser("status", help="counts per state, the pause reason, the top failure replies")
    status.add_argument("id", type=int, help="the campaign's id")
    status.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    status.add_argument("--follow", action="store_true", help="show a progress bar until the campaign ends")
    status.set_defaults(func=status_command)
    stats = campaign.add_parser(
        "stats", help="its engagement: delivered, bounced, complained, unsubscribed; clicks per link; opens"
    )
    stats.add_argument("id", type=int, help="the campaign's id")
    stats.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    stats.set_defaults(func=campaign_stats.command)
    retry = campaign.add_parser("retry", help="put failed rows back in the queue (same Message-ID)")
    retry.add_argument("id", type=int, help="the campaign's id")
    retry.add_argument(
        "--failed",
        action="store_true",
        required=True,
        help="the failed rows (never accepted by the server); a campaign that was sent sends again",
    )
    which = retry.add_mutually_exclusive_group()
    which.add_argument(
        "--reason", choices=REASONS, help="only rows whose last reply has this reason (docs/guide/bounces.md)"
    )
    which.add_argument(
        "--reply",
        metavar="PATTERN",
        type=reply_pattern,
        help="only rows whose last reply matches this regular expression, ignoring case",
    )
    retry.set_defaults(func=retry_command)
    listing = campaign.add_parser("list", help="campaigns, newest first")
    listing.add_argument("--status", choices=STATUSES, help="only campaigns in this status")
    listing.set_defaults(func=campaign_view.list_command)
    preview = campaign.add_parser("preview", help="the exact message one subscriber would get")
    preview.add_argument("id", type=int, help="the campaign's id")
    preview.add_argument("--subscriber", metavar="EMAIL", help="whose message (default: the first on its lists)")
    preview.add_argument("--out", metavar="FILE.eml", help="write the message's bytes there instead of stdout")
    preview.add_argument(
        "--raw", action="store_true", help="print the message as it goes on the wire (quoted-printable), not decoded"
    )
    preview.set_defaults(func=campaign_view.preview_command)
    test = campaign.add_parser("test", help="send one message through the relay, outside the campaign")
    test.add_argument("id", type=int, help="the campaign's id")
    test.add_argument("--to", required=True, metavar="ADDR", help="the mailbox that gets the test message")
    test.add_argument("--subscriber", metavar="EMAIL", help="whose message (default: the first on its lists)")
    test.add_argument(
        "--name",
        metavar="TEXT",
        help="the recipient's name in its To ('': none; default: the account's subscriber of --to, else the name "
        "of the subscriber whose message it is)",
    )
    test.add_argument(
        "--subject-prefix", default="[TEST] ", metavar="TEXT", help="put before the subject (default: '[TEST] ')"
    )
    test.set_defaults(func=campaign_view.test_command)
