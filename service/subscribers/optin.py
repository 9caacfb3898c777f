"""Double opt-in (docs/design.md §16 "Double opt-in"): a sign-up, its one confirmation message, the
confirmation with its consent record, and the pruning of sign-ups never confirmed.

A sign-up (`POST /api/v1/subscribe`, the hosted form `/lists/{id}/subscribe`) makes an 'unconfirmed'
membership and queues the confirmation as the one send row of the subscriber in the list's confirmation
campaign (a campaign of kind 'confirmation', made at the list's first sign-up, always sending). The
normal pipeline claims, sends, fences and puts it in doubt like any other row, so its
UNIQUE (campaign_id, subscriber_id) is the exactly-once: a retry, a double submit or a crash cannot
send a second. Whatever happened (a new sign-up, a repeat, a confirmed member, a suppressed address, a
flood bound reached) the caller answers the same.
"""

from dataclasses import dataclass

import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.errors import ConfigError, UsageError
from service.mail.render import CampaignTemplate
from service.settings import Settings
from service.subscribers.importer import MAX_EMAIL, MAX_NAME, unsafe_text

WORDING = "en-1"  # the version of the message below: kept with every sign-up (list_members.wording)
SUBJECT = "Please confirm your subscription to {{ campaign.name }}"
BODY = """Hello,

someone, we hope you, asked to receive "{{ campaign.name }}" at {{ email }}.
To confirm, open this link and press the button on the page:

{{ confirm_url }}

If it was not you, ignore this message: nothing will be sent to you.
"""
LOCK_WAIT = "5s"  # the longest a sign-up waits for the key's lock (api_subscriber_lock)
PRUNE_BATCH = 1000


class NotConfigured(UsageError):
    """Double opt-in is off: EINMAL_CONFIRM_URL or EINMAL_OPTIN_FROM is not set."""


@dataclass(frozen=True)
class SignUp:
    list_id: int
    account_id: int
    email: str
    name: str
    source: str  # "form", or "api:<key prefix>": the consent record's "which form"


def check_configured(settings: Settings) -> None:
    if not (settings.confirm_url and settings.optin_from and settings.unsubscribe_secret):
        raise NotConfigured("double opt-in is not set up here: EINMAL_CONFIRM_URL, EINMAL_OPTIN_FROM and "
                            "EINMAL_UNSUBSCRIBE_SECRET are needed")


def check_message(settings: Settings) -> None:
    """ConfigError, one line, when the confirmation message cannot be made with these settings (an
    EINMAL_OPTIN_FROM that is not an address): at start, rather than a confirmation campaign paused later."""
    if not settings.optin_from:
        return
    try:
        CampaignTemplate.compile({"id": 0, "account_id": 0, "name": "list", "subject": SUBJECT, "body_text": BODY,
                                  "from_address": settings.optin_from, "kind": "confirmation"}, settings)
    except UsageError as exc:
        raise ConfigError(f"EINMAL_OPTIN_FROM: {exc}") from None


def checked_address(email: str, name: str = "") -> tuple[str, str]:
    """(address, name) stripped, or UsageError with why the address or name cannot be taken."""
    email, name = email.strip(" "), name.strip(" ")
    problem = ("longer than 254 characters" if len(email) > MAX_EMAIL else
               "a name longer than 1000 characters" if len(name) > MAX_NAME else
               unsafe_text(email) or unsafe_text(name) or address_problem(email))
    if problem:
        raise UsageError(f"not an address that can be subscribed: {problem}")
    return email, name


async def sign_up(conn: asyncpg.Connection, settings: Settings, request: SignUp) -> bool:
    """Record the sign-up; True when its confirmation was queued now (for the log only: the answer to the
    caller never depends on it). The address must have passed checked_address."""
    check_configured(settings)
    key = email_key(request.email)
    campaign_id = await confirmations(conn, settings, request.list_id, request.account_id)
    async with conn.transaction():
        await conn.execute(db.query("api_subscriber_lock"), request.account_id, key, LOCK_WAIT)
        subscriber_id = await conn.fetchval(db.query("optin_subscriber"), request.account_id, request.email, key,
                                            request.name)
        row = await conn.fetchrow(db.query("optin_signup"), request.list_id, subscriber_id, campaign_id,
                                  request.email, key, request.source, WORDING, settings.optin_address_limit,
                                  86400.0)
    return row["queued"]


async def confirmations(conn: asyncpg.Connection, settings: Settings, list_id: int, account_id: int) -> int:
    """The list's confirmation campaign, made (and committed) at its first need."""
    campaign_id = await conn.fetchval(db.query("optin_campaign_find"), list_id, account_id)
    if campaign_id is None:
        async with conn.transaction():
            await conn.execute(db.query("optin_campaign_lock"), list_id)
            campaign_id = await conn.fetchval(db.query("optin_campaign_ensure"), list_id, account_id, SUBJECT,
                                              settings.optin_from, BODY)
    if campaign_id is None:
        raise UsageError("no such list")
    return campaign_id


def window_seconds(settings: Settings) -> float:
    return settings.optin_window_hours * 3600


async def confirm(conn: asyncpg.Connection, settings: Settings, ids: tuple[int, int, int], ip: str | None,
                  agent: str) -> str:
    """'confirmed', 'already' (nothing changed) or 'expired' for the link's (account, campaign, subscriber)."""
    return await conn.fetchval(db.query("optin_confirm"), *ids, ip, agent[:500], window_seconds(settings))


async def link(conn: asyncpg.Connection, settings: Settings, ids: tuple[int, int, int]) -> asyncpg.Record | None:
    """What the confirmation page shows (optin_link.sql); None when the link names no list."""
    return await conn.fetchrow(db.query("optin_link"), *ids, window_seconds(settings))


async def prune(conn: asyncpg.Connection, settings: Settings) -> tuple[int, int]:
    """Remove the sign-ups unconfirmed past the window, in batches: (memberships, send rows) removed."""
    members = rows = 0
    while True:
        done = await conn.fetchrow(db.query("optin_prune"), window_seconds(settings), PRUNE_BATCH)
        members, rows = members + done["members"], rows + done["rows"]
        if done["members"] < PRUNE_BATCH:
            return members, rows
