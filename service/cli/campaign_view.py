"""`einmal campaign list|preview|test`: what an operator looks at before and while a campaign goes out.

`preview` renders the exact message one subscriber would get (the Date header is the time of
the preview), its body decoded for reading (`--raw`: the bytes as they go on the wire, as `--out` writes them).
`test` sends that message, addressed to another mailbox, through the configured
relay, outside the campaign's send rows: it changes nothing in the database. Its To names the recipient as
the campaign's messages name theirs: `--name` (`''`: none), else the name of the account's subscriber of that
address, else that of the subscriber whose message it is. A test message is marked
(`[TEST] ` before its subject, `--subject-prefix` to change it), has a Message-ID of its own and an
unsubscribe link that unsubscribes nobody: pressing it cannot suppress the subscriber it was rendered for.
Both are made by service/campaigns/preview.py.
"""

import argparse
import sys
from pathlib import Path

import anyio

from service import db
from service.addresses import address_problem
from service.campaigns import listing, preview
from service.cli.tables import aligned
from service.errors import EinmalError, Invalid
from service.mail.mailing import Mailing
from service.relays import Relaying
from service.settings import Settings
from service.smtp.connection import Outcome, SmtpUnavailable
from service.text import shown

NOT_YET = "-"  # the started column of a campaign that has not started


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await listing.every(conn, status=args.status)
    table = []
    for r in rows:
        reason = f" ({r.pause_reason})" if r.status == "paused" and r.pause_reason else ""
        if r.status in ("draft", "approved") and r.scheduled_for is not None:  # given with --at
            reason = f" (scheduled for {r.scheduled_for.isoformat(timespec='seconds')})"
        if r.in_doubt:  # only an operator settles them: einmal reconcile
            reason += f" ({r.in_doubt} in doubt: einmal reconcile {r.id})"
        if not r.unsubscribe_required:
            reason += " (--no-unsubscribe)"
        started = r.started_at.isoformat(timespec="seconds") if r.started_at else NOT_YET
        table.append((r.id, r.account, r.name, f"{r.status}{reason}", started, r.recipients))
    for line in aligned(("id", "account", "name", "status", "started", "recipients"), table) if rows else ():
        print(line)
    if not rows:
        print("no campaigns" + (f" with status {args.status}" if args.status else ""), file=sys.stderr)
    return 0


async def preview_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        message = (
            await preview.render(conn, mailing=Mailing.of(settings), campaign_id=args.id, subscriber=args.subscriber)
        ).message
    if args.out:
        try:
            await anyio.Path(args.out).write_bytes(message)
        except OSError as exc:
            raise Invalid(f"--out {args.out}: {exc.strerror or exc}") from None
        print(f"wrote {len(message)} bytes to {Path(args.out)}")
    elif args.raw:
        sys.stdout.write(message.decode("utf-8").replace("\r\n", "\n"))
    else:
        sys.stdout.write(readable(message))
    return 0


def readable(message: bytes) -> str:
    """The message for a person: its header fields decoded (no encoded words, unfolded: `--raw` shows them as
    they go on the wire), then each text part decoded (not quoted-printable or base64), under a
    `--- text/html ---` line when there are several."""
    message_parsed = preview.parsed(message)
    head = "\n".join(f"{name}: {' '.join(str(value).split())}" for name, value in message_parsed.items())
    parts = preview.decoded(message_parsed)
    body = []
    for content_type, content in parts:
        if len(parts) > 1:
            body.append(f"--- {content_type} ---\n")
        body.append(content if isinstance(content, str) else f"({len(content)} bytes)\n")
    return f"{head}\n\n{''.join(body)}"


async def test_command(args: argparse.Namespace, settings: Settings) -> int:
    if problem := address_problem(args.to):
        raise Invalid(f"--to {shown(args.to)} is not a valid address: {problem}")
    if args.name is not None and (problem := preview.name_problem(args.name)):
        raise Invalid(f"--name {shown(args.name)}: {problem}")
    async with db.connection(db.url(settings)) as conn:
        made = await preview.render(
            conn,
            mailing=Mailing.of(settings),
            campaign_id=args.id,
            subscriber=args.subscriber,
            test=preview.Test(args.to, args.subject_prefix, args.name),
        )
    try:
        result = await preview.send_test(relaying=Relaying.of(settings), made=made, to=args.to)
    except SmtpUnavailable as exc:
        raise EinmalError(f"test message not sent: {exc}") from None
    if result.outcome is not Outcome.SENT:
        raise Invalid(f"test message not accepted: {result.reply}")
    print(f"test message of campaign {args.id} sent to {args.to}: {result.reply}")
    return 0
