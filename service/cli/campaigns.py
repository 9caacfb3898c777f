"""`einmal campaign create|approve|pause|resume|cancel|status|retry` and `einmal reconcile`.

The transitions themselves are service/transitions.py's.
"""

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from email.utils import parseaddr
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import asyncpg
from email_validator import EmailNotValidError

from service import db
from service.addresses import email_key, normalized_address
from service.cli import campaign_status, campaign_view
from service.cli.tables import aligned
from service.errors import ArgumentError, UsageError
from service.inbound.reasons import REASONS
from service.mail import headers, unsubscribe
from service.settings import Settings
from service.text import MAX_LIST, check_account, shown, unsafe_text
from service.transitions import TRANSITIONS, current_status, transition
from service.web import texts

DEFAULT_LIST = "default"

# --- create -------------------------------------------------------------------------------------

MAX_CAMPAIGN_NAME, MAX_SUBJECT, MAX_FROM = 200, 998, 500


def one_line(value: str, option: str, limit: int = 998) -> str:
    """``value`` stripped; UsageError unless it is 1 to ``limit`` printable characters of UTF-8."""
    problem = unsafe_text(value)
    if problem == "line break inside a field" or "\0" in value:
        raise UsageError(f"{option} must not contain line breaks")
    if problem:
        raise UsageError(f"{option}: {problem.replace(' in a field', '')}: must be printable text")
    if not value.strip():
        raise UsageError(f"{option} must not be empty")
    if len(value.strip()) > limit:
        raise UsageError(f"{option} is longer than {limit} characters")
    return value.strip()


def body_text(value: str, option: str) -> str:
    """A body: any text PostgreSQL can store (UTF-8, no NUL)."""
    if "\0" in value:
        raise UsageError(f"{option}: contains a NUL character")
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise UsageError(f"{option}: not valid UTF-8")
    return value


_NAMED = re.compile(r"^(?P<name>[^<>]*)<(?P<addr>[^<>]*)>$")


def from_address(value: str, option: str = "--from") -> str:
    """A bare address or `Display Name <address>`; returned with the address normalised."""
    value = one_line(value, option, MAX_FROM)
    named = _NAMED.match(value)
    name, addr = (named["name"].strip(), named["addr"].strip()) if named else ("", value)
    try:  # the import's rules: syntax, not reachability (the relay decides); .test and the like pass
        normalized = normalized_address(addr)
    except EmailNotValidError as exc:
        raise UsageError(f"{option} {shown(value)} is not a valid address: {exc}") from None
    result = f"{name} <{normalized}>" if name else normalized
    if parseaddr(result)[1] != normalized:  # the display name would be misread in a header
        raise UsageError(f"{option} {shown(value)}: quote the display name, e.g. '\"{name}\" <{addr}>'")
    return result


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
        raise UsageError(f"{option} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ArgumentError(f"{option} {path}: {exc.strerror}") from None


def check_templates(subject: str | None, text: str | None, html: str | None) -> None:
    """Compile each template given (None: not given) in the sandbox; UsageError for one that does not."""
    from service.mail.render import check_template  # written alongside; imported when first needed

    if subject is not None:
        check_template(subject, "subject")
    if text is not None:
        check_template(text, "text body")
    if html is not None:
        check_template(html, "html body", html=True)


async def resolve(conn: asyncpg.Connection, account: str, lists: list[str]) -> tuple[int, list[int]]:
    rows = await conn.fetch(db.query("campaign_create_resolve"), account, lists)
    if not rows:
        raise UsageError(f"no account named {shown(account)}")
    found = {r["list_name"]: r["list_id"] for r in rows if r["list_id"] is not None}
    missing = [name for name in lists if name not in found]
    if missing:
        raise UsageError(f"account {shown(account)} has no list named {', '.join(map(shown, missing))}")
    return rows[0]["account_id"], [found[name] for name in lists]


def list_names(given: list[str]) -> list[str]:
    """The --list names, each given once; UsageError for one no import could have created."""
    for name in given:
        if not name.strip() or unsafe_text(name) or len(name) > MAX_LIST:
            raise UsageError(f"--list {shown(name)}: 1 to {MAX_LIST} printable characters")
    return list(dict.fromkeys(given or [DEFAULT_LIST]))


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
        raise UsageError("the text body must not be empty")
    html = read_body(args.html_file, "--html-file") if args.html_file else None
    if html is not None:
        html = body_text(html, f"--html-file {args.html_file}")
    check_templates(subject, text, html)
    reply_to = from_address(args.reply_to, "--reply-to") if args.reply_to is not None else None
    list_id = None
    if args.list_id is not None:
        phrase, identifier = headers.list_id(args.list_id)
        list_id = f"{phrase} <{identifier}>" if phrase else identifier
    extra = json.dumps(headers.customs(args.headers))
    lists = list_names(args.lists)
    language = texts.checked(args.language) if args.language is not None else None
    required = not args.no_unsubscribe
    if reason := unsubscribe.without_one_click({"unsubscribe_required": required}, settings):
        raise UsageError(f"not created: {reason}")
    async with db.connection(db.url(settings)) as conn:
        account_id, list_ids = await resolve(conn, args.account, lists)
        campaign_id = await conn.fetchval(
            db.query("campaign_create"),
            account_id,
            name,
            subject,
            sender,
            text,
            html,
            list_ids,
            at,
            reply_to,
            list_id,
            extra,
            language,
            required,
        )
        found = await _trial(conn, settings, campaign_id)
    for warning in found.warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    print(campaign_id)
    return 0


# --- transitions --------------------------------------------------------------------------------


async def _trial(
    conn: asyncpg.Connection, settings: Settings, campaign_id: int, limiter: anyio.CapacityLimiter | None = None
):
    from service.cli import campaign_view  # imports the renderer: only when needed

    return await campaign_view.trial(conn, settings, campaign_id, limiter)


async def approve(
    conn: asyncpg.Connection,
    settings: Settings,
    campaign_id: int,
    force: bool,
    explicitly: str = "--no-unsubscribe",
    forcing: str = "--force",
    limiter: anyio.CapacityLimiter | None = None,
):
    """Approve a draft after its checks (the CLI's and the API's): UsageError when this process would send it
    without the one-click unsubscribe it requires, or when the trial render fails for every subscriber tried
    and not ``force``; returns the trial (its warnings). A campaign that is no draft is left to the
    transition to refuse."""
    from service.cli import campaign_view

    found = campaign_view.Trial()
    if await current_status(conn, campaign_id) == "draft":
        campaign = await conn.fetchrow(db.query("campaign_for_render"), campaign_id)
        if reason := unsubscribe.without_one_click(dict(campaign), settings, explicitly):
            raise UsageError(f"campaign {campaign_id} not approved: {reason}")
        found = await _trial(conn, settings, campaign_id, limiter)
        if found.hopeless and not force:
            raise UsageError(found.refusal(campaign_id, forcing))
    await transition(conn, "approve", campaign_id)
    return found


async def transition_command(args: argparse.Namespace, settings: Settings) -> int:
    warnings: tuple[str, ...] = ()
    async with db.connection(db.url(settings)) as conn:
        if args.verb == "approve":
            warnings = (await approve(conn, settings, args.id, args.force)).warnings
        else:
            await transition(conn, args.verb, args.id)
        snap = (
            await campaign_status.fetch(conn, args.id, settings.node_timeout_seconds)
            if args.verb == "approve"
            else None
        )
        schedule = _starts(snap) if snap is not None else None
    for warning in warnings:
        print(f"einmal: {warning}", file=sys.stderr)
    print(f"campaign {args.id} {TRANSITIONS[args.verb][1]}" + (f"; {schedule}" if schedule else ""))
    return 0


def _starts(snap: campaign_status.Snapshot) -> str | None:
    """What `approve` adds: `scheduled for … (in 1 h 20 min)`, `starts now` (at a running node's next tick), or
    that it would start now but no node is running."""
    if snap.scheduled_for is not None and snap.now is not None and snap.scheduled_for <= snap.now:
        return "starts now" if snap.nodes != 0 else "due now, but no node is running: start one with `einmal run`"
    return snap.schedule


async def status_command(args: argparse.Namespace, settings: Settings) -> int:
    return await campaign_status.command(args, settings)


# --- retry --------------------------------------------------------------------------------------


def chosen(replies: list[str], reason: str | None, pattern: re.Pattern | None) -> list[str] | None:
    """The last replies whose rows go back (None: every failed row)."""
    from service.inbound import reasons

    if reason is not None:
        return [r for r in replies if reasons.of_reply(r)[1] == reason]
    if pattern is not None:
        return [r for r in replies if pattern.search(r)]
    return None


async def retry_failed(
    conn: asyncpg.Connection, campaign_id: int, reason: str | None = None, pattern: re.Pattern | None = None
) -> tuple[int, bool]:
    """Campaign `campaign_id`'s failed rows back to the queue, those whose last reply has `reason` or matches
    `pattern` when given; returns (rows moved, whether a sent campaign was reopened). Under the campaign's
    lock, so that a finish of the campaign waits for it (docs/design.md#state-machines)."""
    async with conn.transaction():
        campaign = await conn.fetchrow(db.query("reconcile_lock_campaign"), campaign_id)
        if campaign is None:
            raise UsageError(f"no campaign with id {campaign_id}")
        if campaign["status"] == "cancelled":
            raise UsageError(f"cannot retry failed rows of campaign {campaign_id}: it is cancelled")
        replies = None
        if reason is not None or pattern is not None:
            found = [r["reply"] for r in await conn.fetch(db.query("sends_failed_replies"), campaign_id)]
            # one distinct reply a failed row at worst: classified off the event loop (the API serves others)
            replies = await anyio.to_thread.run_sync(chosen, found, reason, pattern)
            if not replies:
                return 0, False
        return await requeued(
            conn, campaign_id, await conn.fetchval(db.query("sends_retry_failed"), campaign_id, replies)
        )


async def requeued(conn: asyncpg.Connection, campaign_id: int, moved: int) -> tuple[int, bool]:
    """After `moved` rows of the campaign went back to the queue, in the transaction that moved them: a sent
    campaign is reopened (compare-and-set) and the nodes are told; returns (moved, whether it reopened)."""
    if not moved:
        return 0, False
    reopened = await conn.fetchval(db.query("campaign_reopen"), campaign_id) is not None
    await conn.execute(db.query("campaign_notify"), campaign_id)
    return moved, reopened


async def retry_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        moved, reopened = await retry_failed(conn, args.id, args.reason, args.reply)
    print(f"{moved} failed row{'' if moved == 1 else 's'} of campaign {args.id} queued again")
    if reopened:
        print(f"campaign {args.id} is sending again")
    return 0


# --- reconcile ----------------------------------------------------------------------------------


def chosen_rows(args: argparse.Namespace) -> tuple[list[int] | None, list[str] | None]:
    """--id and --address as the (send row ids, mailbox keys) to decide; (None, None): every in-doubt row."""
    ids, addresses = getattr(args, "ids", None) or [], getattr(args, "addresses", None) or []
    if not ids and not addresses:
        return None, None
    return ids, [email_key(address) for address in addresses]


async def list_in_doubt(
    conn: asyncpg.Connection, campaign_id: int, ids: list[int] | None = None, keys: list[str] | None = None
) -> None:
    await current_status(conn, campaign_id)
    rows = await conn.fetch(db.query("reconcile_list"), campaign_id, ids, keys)
    table = [
        (
            r["id"],
            r["email"],
            r["claimed_by"] or "-",
            r["updated_at"].isoformat(timespec="seconds"),
            " ".join((r["last_reply"] or "-").split()),
        )
        for r in rows
    ]
    for line in aligned(("id", "email", "node", "in doubt since", "last reply"), table) if rows else ():
        print(line)
    hint = "; decide with --resend or --mark-sent (all, or some with --id and --address)" if rows else ""
    print(f"{len(rows)} in-doubt row{'' if len(rows) == 1 else 's'} in campaign {campaign_id}{hint}")


async def _check_chosen(
    conn: asyncpg.Connection, campaign_id: int, ids: list[int], keys: list[str], addresses: list[str]
) -> None:
    """UsageError naming the first --id or --address that is no in-doubt row of the campaign."""
    found = await conn.fetch(db.query("reconcile_list"), campaign_id, ids, keys)
    for i in ids:
        if i not in {r["id"] for r in found}:
            raise UsageError(f"campaign {campaign_id} has no in-doubt row with id {i}; nothing decided")
    for key, address in zip(keys, addresses, strict=True):
        if key not in {r["email_lower"] for r in found}:
            raise UsageError(f"campaign {campaign_id} has no in-doubt row for {shown(address)}; nothing decided")


async def decide(
    conn: asyncpg.Connection,
    campaign_id: int,
    resend: bool,
    ids: list[int] | None = None,
    keys: list[str] | None = None,
    addresses: list[str] = (),
) -> tuple[int, bool]:
    """Move the in-doubt rows (only those of ``ids`` and ``keys`` when either is given); returns (rows moved,
    whether the campaign was reopened)."""
    async with conn.transaction():
        campaign = await conn.fetchrow(db.query("reconcile_lock_campaign"), campaign_id)
        if campaign is None:
            raise UsageError(f"no campaign with id {campaign_id}")
        if ids is not None:
            await _check_chosen(conn, campaign_id, ids, keys or [], list(addresses))
        if not resend:
            return await conn.fetchval(db.query("reconcile_mark_sent"), campaign_id, ids, keys), False
        if campaign["status"] == "cancelled":
            raise UsageError(f"cannot resend in-doubt rows of campaign {campaign_id}: it is cancelled")
        return await requeued(
            conn, campaign_id, await conn.fetchval(db.query("reconcile_resend"), campaign_id, ids, keys)
        )


async def reconcile_command(args: argparse.Namespace, settings: Settings) -> int:
    ids, keys = chosen_rows(args)
    async with db.connection(db.url(settings)) as conn:
        if not (args.resend or args.mark_sent):
            await list_in_doubt(conn, args.id, ids, keys)
            return 0
        moved, reopened = await decide(conn, args.id, args.resend, ids, keys, args.addresses or [])
    rows = f"{moved} in-doubt row{'' if moved == 1 else 's'}"
    print(f"{rows} of campaign {args.id} {'queued again' if args.resend else 'marked sent'}")
    if reopened:
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
    create.add_argument("--html-file", help="an HTML body from a UTF-8 file (autoescaped Jinja2 template)")
    create.add_argument(
        "--list",
        dest="lists",
        action="append",
        default=[],
        help="a list to send to; repeat for several (default: default)",
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
    create.set_defaults(func=create_command)
    for verb in ("approve", "pause", "resume", "cancel"):
        p = campaign.add_parser(verb, help=f"{verb} a campaign")
        p.add_argument("id", type=int, help="the campaign's id")
        if verb == "approve":
            p.add_argument(
                "--force", action="store_true", help="approve even if its trial render fails for every subscriber tried"
            )
        p.set_defaults(func=transition_command, verb=verb)
    status = campaign.add_parser("status", help="counts per state, the pause reason, the top failure replies")
    status.add_argument("id", type=int, help="the campaign's id")
    status.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    status.add_argument("--follow", action="store_true", help="show a progress bar until the campaign ends")
    status.set_defaults(func=status_command)
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
    listing.add_argument("--status", choices=campaign_view.STATUSES, help="only campaigns in this status")
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
        "--subject-prefix", default="[TEST] ", metavar="TEXT", help="put before the subject (default: '[TEST] ')"
    )
    test.set_defaults(func=campaign_view.test_command)
