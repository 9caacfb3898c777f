"""`einmal campaign list|preview|test`: what an operator looks at before and while a campaign goes out.

`preview` renders the exact message one subscriber would get (the Date header is the time of
the preview), its body decoded for reading (`--raw`: the bytes as they go on the wire, as `--out` writes them).
`test` sends that message, addressed to another mailbox, through the configured
relay, outside the campaign's send rows: it changes nothing in the database. A test message is marked
(`[TEST] ` before its subject, `--subject-prefix` to change it), has a Message-ID of its own and an
unsubscribe link that unsubscribes nobody: pressing it cannot suppress the subscriber it was rendered for.
"""

import argparse
import email
import email.message
import email.policy
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.cli.tables import aligned
from service.errors import UsageError
from service.mail import unsubscribe
from service.mail.render import CampaignTemplate
from service.settings import Settings
from service.smtp.connection import Outcome, Result, SmtpConnection, SmtpUnavailable
from service.text import shown

TRIAL_SAMPLE = 200  # subscribers rendered at create and approve
STATUSES = ("draft", "approved", "sending", "paused", "sent", "cancelled")
NOT_YET = "-"  # the started column of a campaign that has not started


async def list_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        rows = await conn.fetch(db.query("campaign_list"), args.status)
    table = []
    for r in rows:
        reason = f" ({r['pause_reason']})" if r["status"] == "paused" and r["pause_reason"] else ""
        if r["status"] in ("draft", "approved") and r["scheduled_for"] is not None:  # given with --at
            reason = f" (scheduled for {r['scheduled_for'].isoformat(timespec='seconds')})"
        if r["in_doubt"]:  # only an operator settles them: einmal reconcile
            reason += f" ({r['in_doubt']} in doubt: einmal reconcile {r['id']})"
        if not r["unsubscribe_required"]:
            reason += " (--no-unsubscribe)"
        started = r["started_at"].isoformat(timespec="seconds") if r["started_at"] else NOT_YET
        table.append((r["id"], r["account"], r["name"], f"{r['status']}{reason}", started, r["recipients"]))
    for line in aligned(("id", "account", "name", "status", "started", "recipients"), table) if rows else ():
        print(line)
    if not rows:
        print("no campaigns" + (f" with status {args.status}" if args.status else ""), file=sys.stderr)
    return 0


async def sources(conn, campaign_id: int, subscriber: str | None) -> tuple[dict | None, asyncpg.Record | None]:
    """What a preview or a test message is made of: the campaign's row and the subscriber's (the first member
    of its lists when ``subscriber`` is None); None for either that is not there."""
    campaign = await conn.fetchrow(db.query("campaign_for_render"), campaign_id)
    if campaign is None:
        return None, None
    row = await conn.fetchrow(
        db.query("subscriber_for_preview"), campaign_id, email_key(subscriber) if subscriber else None, subscriber
    )
    return dict(campaign), row


def rendered(
    campaign: dict, row: asyncpg.Record, settings: Settings, test: tuple[str, str] | None = None
) -> tuple[CampaignTemplate, bytes]:
    """The campaign compiled and rendered for the subscriber; with ``test`` (to, subject prefix) as a test
    message to that address (CampaignTemplate.render_test), whose unsubscribe link names nobody. CPU work,
    bounded by the sandbox's budget: callers that serve others run it in a worker thread."""
    template = CampaignTemplate.compile(campaign, settings)
    try:
        if test:
            return template, template.render_test(test[0], row["name"], row["attributes"], test[1])
        return template, template.render(row["id"], row["email"], row["name"], row["attributes"])
    except ValueError as exc:
        raise UsageError(f"campaign {campaign['id']} cannot be rendered for {shown(row['email'])}: {exc}") from None


async def _message(
    conn, settings: Settings, campaign_id: int, subscriber: str | None, test: tuple[str, str] | None = None
) -> tuple[CampaignTemplate, bytes]:
    campaign, row = await sources(conn, campaign_id, subscriber)
    if campaign is None:
        raise UsageError(f"no campaign with id {campaign_id}")
    if row is None:
        raise UsageError(
            f"campaign {campaign_id}'s account has no subscriber {shown(subscriber)}"
            if subscriber
            else f"campaign {campaign_id} has no subscriber on its lists; name one with --subscriber"
        )
    return rendered(campaign, row, settings, test)


@dataclass(frozen=True)
class Trial:
    """What `campaign create`, `approve` and the API's create, change and approve find before a node sends: the
    campaign rendered for a sample of its real subscribers (the check of the templates sees only one without
    attributes), and what its unsubscribe will be."""

    tried: int = 0
    failed: int = 0
    first_error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def hopeless(self) -> bool:
        """It failed for every subscriber tried: approve refuses it unless forced."""
        return self.tried > 0 and self.failed == self.tried

    def refusal(self, campaign_id: int, forcing: str) -> str:
        return (
            f"campaign {campaign_id} cannot be rendered for any of the {self.tried} subscribers tried (a sample "
            f"of its lists): {self.first_error}; not approved ({forcing} approves it anyway)"
        )


def _tried(campaign: dict, settings: Settings, sample: list) -> Trial:
    """The trial: CPU work, bounded by the sandbox's budget per message; callers run it in a worker thread."""
    warnings = []
    if (
        campaign["kind"] == "campaign"
        and not campaign["unsubscribe_required"]
        and unsubscribe.one_click_missing(settings)
    ):
        warnings.append(
            "warning: the campaign may go out without a one-click unsubscribe (made with "
            '--no-unsubscribe, the API\'s "unsubscribe": false): Gmail and Yahoo require one of bulk '
            "mail, and may refuse or junk it"
        )
    try:
        template = CampaignTemplate.compile(campaign, settings)
    except UsageError:  # what a node would refuse (no unsubscribe URL here, say): the node pauses it and says why
        return Trial(warnings=tuple(warnings))
    if template.has_one_click and not template.bodies_use("unsubscribe_url"):
        warnings.append(
            "warning: neither body shows {{ unsubscribe_url }}: the List-Unsubscribe header works, but a "
            "visible link is what people look for before they press 'spam'"
        )
    failures = []
    for row in sample:
        try:
            template.render(row["id"], row["email"], row["name"], row["attributes"])
        except ValueError as exc:
            failures.append(str(exc))
    if failures:
        warnings.append(
            f"warning: the campaign cannot be rendered for {len(failures)} of {len(sample)} subscribers "
            f"tried (a sample of its lists): {failures[0]}"
        )
    return Trial(len(sample), len(failures), failures[0] if failures else None, tuple(warnings))


async def trial(conn, settings: Settings, campaign_id: int, limiter: anyio.CapacityLimiter | None = None) -> Trial:
    """The campaign's trial render, in a worker thread (``limiter``: of a process that serves others); an empty
    Trial for a campaign that is not there."""
    campaign = await conn.fetchrow(db.query("campaign_for_render"), campaign_id)
    if campaign is None:
        return Trial()
    sample = await conn.fetch(db.query("subscribers_render_sample"), campaign_id, TRIAL_SAMPLE)
    return await anyio.to_thread.run_sync(_tried, dict(campaign), settings, sample, limiter=limiter)


async def preview_command(args: argparse.Namespace, settings: Settings) -> int:
    async with db.connection(db.url(settings)) as conn:
        _, message = await _message(conn, settings, args.id, args.subscriber)
    if args.out:
        try:
            await anyio.Path(args.out).write_bytes(message)
        except OSError as exc:
            raise UsageError(f"--out {args.out}: {exc.strerror or exc}") from None
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
    message_parsed = parsed(message)
    head = "\n".join(f"{name}: {' '.join(str(value).split())}" for name, value in message_parsed.items())
    parts = decoded(message_parsed)
    body = []
    for content_type, content in parts:
        if len(parts) > 1:
            body.append(f"--- {content_type} ---\n")
        body.append(content if isinstance(content, str) else f"({len(content)} bytes)\n")
    return f"{head}\n\n{''.join(body)}"


def parsed(message: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(message, policy=email.policy.default)


def decoded(message: email.message.EmailMessage) -> list[tuple[str, str | bytes]]:
    """Each part of the message that is not multipart: (its content type, its content decoded)."""
    return [(part.get_content_type(), part.get_content()) for part in message.walk() if not part.is_multipart()]


async def test_command(args: argparse.Namespace, settings: Settings) -> int:
    if problem := address_problem(args.to):
        raise UsageError(f"--to {shown(args.to)} is not a valid address: {problem}")
    async with db.connection(db.url(settings)) as conn:
        template, message = await _message(
            conn, settings, args.id, args.subscriber, test=(args.to, args.subject_prefix)
        )
    try:
        result = await send_test(settings, template, args.to, message)
    except SmtpUnavailable as exc:
        raise UsageError(f"test message not sent: {exc}") from None
    if result.outcome is not Outcome.SENT:
        raise UsageError(f"test message not accepted: {result.reply}")
    print(f"test message of campaign {args.id} sent to {args.to}: {result.reply}")
    return 0


async def send_test(settings: Settings, template: CampaignTemplate, to: str, message: bytes) -> Result:
    """A test message through the configured relay, on a connection of its own, outside the campaign's send
    rows. SmtpUnavailable when no relay answers."""
    connection = SmtpConnection(settings)
    try:
        return await connection.send(template.envelope_from, to, message)
    finally:
        await connection.close()
