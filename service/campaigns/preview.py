"""The message one subscriber would get (`einmal campaign preview`, GET …/preview), a test message of it
(`campaign test`, POST …/test) and the trial render of a draft (at create, change and approve).

A preview renders the exact message one subscriber would get (the Date header is the time of the preview).
Both are made as a node makes the campaign's messages, as its account's identity (service/accounts/identity.py,
docs/design.md#sending-identity): signed by the account's DKIM keys for the From domain (else the environment's),
with its unsubscribe mailto; a test message goes with its return path as MAIL FROM, through its relays (else the
environment's), outside the campaign's send rows: it changes nothing in the database. It is marked (a prefix
before its subject), has a Message-ID of its own and an unsubscribe link and a return-path token that name
nobody: pressing the link cannot suppress the subscriber it was rendered for, a bounce of it finds no row. Its
To names its recipient as a campaign's messages name theirs (render.mailbox: quoted, RFC 2047 words for what is
not ASCII): the name given with it, else that of the account's subscriber the address is, else that of the
subscriber whose message it is (the To that message would carry).
Compiling and rendering are CPU work bounded by the sandbox's budget: they run in a worker thread.
"""

import email
import email.message
import email.policy
from dataclasses import dataclass, replace
from typing import Any

import anyio
import asyncpg

from service import db
from service.accounts import identity
from service.addresses import email_key
from service.errors import Conflict, Invalid, NotFound
from service.mail import from_rule, unsubscribe
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.relays import Relaying, Routes
from service.smtp.connection import Result, SmtpConnection, SmtpUnavailable
from service.text import MAX_NAME, shown, unsafe_text

TRIAL_SAMPLE = 200  # subscribers rendered at create and approve
MAX_PREVIEW = 2 * 1024 * 1024  # bytes of one previewed message


class NoSubscriber(NotFound):
    """The campaign's account has no subscriber of the address asked for."""


@dataclass(frozen=True)
class Test:
    """A test message: where it goes, what goes before its subject, and the name its To gives the recipient
    (None: the name the account knows for the address, else the subscriber's whose message it is)."""

    to: str
    subject_prefix: str
    name: str | None = None


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a test message's recipient (a line break would start a header of its own), or
    None."""
    if len(name) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    return unsafe_text(name)


@dataclass(frozen=True)
class Rendered:
    template: CampaignTemplate
    message: bytes
    subscriber: str  # the address of the subscriber it was rendered for
    relays: tuple[identity.AccountRelay, ...] = ()  # the account's, for a test message (empty: the environment's)


async def sources(
    conn: asyncpg.Connection, *, campaign_id: int, subscriber: str | None
) -> tuple[dict[str, Any] | None, asyncpg.Record | None]:
    """What a preview or a test message is made of: the campaign's row and the subscriber's (the first member
    of its lists when ``subscriber`` is None); None for either that is not there."""
    campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
    if campaign is None:
        return None, None
    row = await conn.fetchrow(
        *db.sql(
            "subscriber_for_preview",
            campaign_id=campaign_id,
            key=email_key(subscriber) if subscriber else None,
            spelling=subscriber,
        )
    )
    return dict(campaign), row


def rendered(
    campaign: dict[str, Any],
    row: asyncpg.Record,
    mailing: Mailing,
    test: Test | None = None,
    sender: identity.Identity | None = None,
) -> tuple[CampaignTemplate, bytes]:
    """The campaign compiled as its account's identity `sender` (None: the environment's), as a node compiles
    it, and rendered for the subscriber; with ``test`` as a test message to its address (CampaignTemplate.
    render_test), whose unsubscribe link names nobody. CPU work, bounded by the sandbox's
    budget: callers that serve others run it in a worker thread."""
    template = CampaignTemplate.compile(campaign, mailing, sender)
    try:
        if test:
            return template, template.render_test(
                test.to, row["name"], row["attributes"], test.subject_prefix, to_name=test.name
            )
        return template, template.render(row["id"], row["email"], row["name"], row["attributes"])
    except ValueError as exc:
        raise Invalid(f"campaign {campaign['id']} cannot be rendered for {shown(row['email'])}: {exc}") from None


@dataclass(frozen=True)
class Sources:
    """What a preview or a test message is made of, read from the database: the campaign's row, the
    subscriber's, the test message (its To's name found) and the account's identity."""

    campaign: dict[str, Any]
    row: asyncpg.Record
    test: Test | None
    sender: identity.Identity


async def gather(
    conn: asyncpg.Connection, *, mailing: Mailing, campaign_id: int, subscriber: str | None, test: Test | None = None
) -> Sources:
    """What render() renders, read on `conn`: a caller that bounds its database time reads it within that bound
    and renders (made) outside it. Its errors are render's."""
    campaign, row = await sources(conn, campaign_id=campaign_id, subscriber=subscriber)
    if campaign is None:
        raise NotFound(f"no campaign with id {campaign_id}")
    if row is None:
        if subscriber:
            raise NoSubscriber(f"campaign {campaign_id}'s account has no subscriber {shown(subscriber)}")
        raise Invalid(
            f"campaign {campaign_id} has no subscriber on its lists; name one with subscriber",
            code="subscriber.none_on_lists",
            field="subscriber",
        )
    if test:  # what goes out obeys the From rule, as the campaign will at approve
        await from_rule.check(
            conn, mailing=mailing, account_id=campaign["account_id"], address=campaign["from_address"], said="From"
        )
        if test.name is None:  # the name the account knows for the address, else the one this message's To has
            known = await conn.fetchrow(
                *db.sql("subscriber_for_preview", campaign_id=campaign_id, key=email_key(test.to), spelling=test.to)
            )
            test = replace(test, name=(known["name"] or "") if known is not None else row["name"])
    return Sources(campaign, row, test, await identity.of_account(conn, account_id=campaign["account_id"]))


async def made(found: Sources, *, mailing: Mailing, limiter: anyio.CapacityLimiter | None = None) -> Rendered:
    """The message `found` makes, rendered in a worker thread (`limiter`: of a process that serves others)."""
    template, message = await anyio.to_thread.run_sync(
        rendered, found.campaign, found.row, mailing, found.test, found.sender, limiter=limiter
    )
    return Rendered(template, message, found.row["email"], found.sender.relays)


async def render(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    campaign_id: int,
    subscriber: str | None,
    test: Test | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> Rendered:
    """The campaign's message for `subscriber` (None: the first member of its lists), rendered in a worker
    thread (`limiter`: of a process that serves others); with `test` as a test message, its To naming the
    recipient (see the module).
    NotFound without the campaign, NoSubscriber without the subscriber, Invalid when its lists have nobody
    (field subscriber: name one) or it cannot be rendered; ArgumentError for a test
    message whose From is outside the account's domains (service/mail/from_rule.py)."""
    found = await gather(conn, mailing=mailing, campaign_id=campaign_id, subscriber=subscriber, test=test)
    return await made(found, mailing=mailing, limiter=limiter)


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

    def refusal(self, campaign_id: int) -> Conflict:
        return Conflict(
            f"campaign {campaign_id} cannot be rendered for any of the {self.tried} subscribers tried (a sample "
            f"of its lists): {self.first_error}; not approved (force approves it anyway)",
            code="force.never_renders",
            field="force",
        )


NO_LINK = (
    "warning: neither body shows {{ unsubscribe_url }}: the List-Unsubscribe header works, but a "
    "visible link is what people look for before they press 'spam'"
)


def link_missing(template: CampaignTemplate) -> bool:
    """Whether its messages carry a one-click unsubscribe that neither body offers as a link (NO_LINK)."""
    return template.has_one_click and not template.bodies_use("unsubscribe_url")


def _link_warnings(campaign: dict[str, Any], mailing: Mailing) -> tuple[str, ...]:
    try:
        template = CampaignTemplate.compile(campaign, mailing)
    except Invalid:  # what a node would refuse: the node pauses it and says why
        return ()
    return (NO_LINK,) if link_missing(template) else ()


async def link_warnings(
    conn: asyncpg.Connection, *, mailing: Mailing, campaign_id: int, limiter: anyio.CapacityLimiter | None = None
) -> tuple[str, ...]:
    """NO_LINK for a campaign (a sequence's step) whose bodies show no unsubscribe link, as the trial says it;
    compiled in a worker thread (``limiter``: of a process that serves others); () for one not there."""
    campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
    if campaign is None:
        return ()
    return await anyio.to_thread.run_sync(_link_warnings, dict(campaign), mailing, limiter=limiter)


def _tried(campaign: dict[str, Any], mailing: Mailing, sample: list[asyncpg.Record]) -> Trial:
    """The trial: CPU work, bounded by the sandbox's budget per message; callers run it in a worker thread."""
    warnings: list[str] = []
    if (
        campaign["kind"] == "campaign"
        and not campaign["unsubscribe_required"]
        and unsubscribe.one_click_missing(mailing)
    ):
        warnings.append(
            "warning: the campaign may go out without a one-click unsubscribe (made with "
            '--no-unsubscribe, the API\'s "unsubscribe": false): Gmail and Yahoo require one of bulk '
            "mail, and may refuse or junk it"
        )
    try:
        template = CampaignTemplate.compile(campaign, mailing)
    except Invalid:  # what a node would refuse (no unsubscribe URL here, say): the node pauses it and says why
        return Trial(warnings=tuple(warnings))
    if link_missing(template):
        warnings.append(NO_LINK)
    failures: list[str] = []
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


@dataclass(frozen=True)
class Sample:
    """What a trial render is made of, read from the database: the campaign's row (None: not there) and the
    subscribers it is tried for."""

    campaign: dict[str, Any] | None
    rows: list[asyncpg.Record]


async def sample(conn: asyncpg.Connection, *, campaign_id: int) -> Sample:
    """What trial() renders, read on `conn`: a caller that bounds its database time reads it within that bound
    and renders (tried) outside it."""
    campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
    if campaign is None:
        return Sample(None, [])
    rows = await conn.fetch(*db.sql("subscribers_render_sample", campaign_id=campaign_id, sample=TRIAL_SAMPLE))
    return Sample(dict(campaign), rows)


async def tried(found: Sample, *, mailing: Mailing, limiter: anyio.CapacityLimiter | None = None) -> Trial:
    """The trial render of `found`, in a worker thread (``limiter``: of a process that serves others); an empty
    Trial for a campaign that is not there."""
    if found.campaign is None:
        return Trial()
    return await anyio.to_thread.run_sync(_tried, found.campaign, mailing, found.rows, limiter=limiter)


async def trial(
    conn: asyncpg.Connection, *, mailing: Mailing, campaign_id: int, limiter: anyio.CapacityLimiter | None = None
) -> Trial:
    """The campaign's trial render, in a worker thread (``limiter``: of a process that serves others); an empty
    Trial for a campaign that is not there."""
    return await tried(await sample(conn, campaign_id=campaign_id), mailing=mailing, limiter=limiter)


def parsed(message: bytes) -> email.message.EmailMessage:
    return email.message_from_bytes(message, policy=email.policy.default)


def decoded(message: email.message.EmailMessage) -> list[tuple[str, str | bytes]]:
    """Each part of the message that is not multipart: (its content type, its content decoded)."""
    return [(part.get_content_type(), part.get_content()) for part in message.walk() if not part.is_multipart()]


@dataclass(frozen=True)
class Readable:
    """A rendered message as a preview shows it: its headers decoded and unfolded, in the order they go on the
    wire, its subject, the first text and HTML parts decoded (their lines ending in \\n) and its size."""

    headers: list[tuple[str, str]]
    subject: str
    text: str
    html: str | None
    size: int


def readable(message: bytes) -> Readable:
    """The message decoded (CPU work: callers that serve others run it in a worker thread)."""
    found = parsed(message)
    parts = {
        kind: content.replace("\r\n", "\n") for kind, content in reversed(decoded(found)) if isinstance(content, str)
    }  # the first of each type
    headers = [(k, str(v)) for k, v in found.items()]
    return Readable(
        headers, str(found["Subject"] or ""), parts.get("text/plain", ""), parts.get("text/html"), len(message)
    )


async def send_test(*, relaying: Relaying, made: Rendered, to: str) -> Result:
    """A test message `made` by render(test=…) to `to`, outside the campaign's send rows, as a node sends: MAIL
    FROM the account's return path (a token naming nobody), through the account's relays, else the
    environment's (service/relays.py Routes), the first by weight, then each other on a connection of its own
    while none answers. Invalid for a relay of the account's that cannot be used (named, never its URL);
    SmtpUnavailable when no relay answers."""
    try:
        relays = Routes(relaying).of(made.relays)
    except ValueError as exc:
        raise Invalid(f"the account's sender identity: {exc}") from None
    mail_from = made.template.envelope_sender(unsubscribe.TEST_SUBSCRIBER)
    reasons = []
    for state in relays.order(relays.pick()):
        connection = SmtpConnection(relaying, state.relay)
        try:
            return await connection.send(mail_from, to, made.message)
        except SmtpUnavailable as exc:
            reasons.append(str(exc))
        finally:
            await connection.close()
    raise SmtpUnavailable("; ".join(reasons))
