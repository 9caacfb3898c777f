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

VERSION = 1  # of the confirmation message's wording, in every language: each sign-up keeps "<language>-<VERSION>"
LOCK_WAIT = "5s"  # the longest a sign-up waits for the key's lock (api_subscriber_lock)
PRUNE_BATCH = 1000


class NotConfigured(UsageError):
    """Double opt-in is off: EINMAL_CONFIRM_URL or EINMAL_OPTIN_FROM is not set."""


@dataclass(frozen=True)
class Wording:
    """The confirmation message in one language: templates of a campaign's subject and text body, with
    campaign.name (the list's), email and confirm_url (service/web/languages/<language>.toml)."""

    language: str
    subject: str
    body: str


@dataclass(frozen=True)
class SignUp:
    list_id: int
    account_id: int
    email: str
    name: str
    source: str  # "form", or "api:<key prefix>": the consent record's "which form"
    wording: Wording  # in the account's language: the list's confirmations are made in it at its first sign-up


def check_configured(settings: Settings) -> None:
    if not (settings.confirm_url and settings.optin_from and settings.unsubscribe_secret):
        raise NotConfigured("double opt-in is not set up here: EINMAL_CONFIRM_URL, EINMAL_OPTIN_FROM and "
                            "EINMAL_UNSUBSCRIBE_SECRET are needed")


def check_message(settings: Settings, wordings: list[Wording]) -> None:
    """ConfigError, one line, when the confirmation message cannot be made with these settings (an
    EINMAL_OPTIN_FROM that is not an address), or in one of its languages: at start, rather than a
    confirmation campaign paused later."""
    if not settings.optin_from:
        return
    for wording, said in ((Wording("en", "x", "x"), "EINMAL_OPTIN_FROM"),  # the From alone, first
                          *((w, f"the {w.language} confirmation message") for w in wordings)):
        try:
            CampaignTemplate.compile({"id": 0, "account_id": 0, "name": "list", "subject": wording.subject,
                                      "body_text": wording.body, "from_address": settings.optin_from,
                                      "kind": "confirmation"}, settings)
        except UsageError as exc:
            raise ConfigError(f"{said}: {exc}") from None


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
    campaign_id, language = await confirmations(conn, settings, request)
    async with conn.transaction():
        await conn.execute(db.query("api_subscriber_lock"), request.account_id, key, LOCK_WAIT)
        subscriber_id = await conn.fetchval(db.query("optin_subscriber"), request.account_id, request.email, key,
                                            request.name)
        row = await conn.fetchrow(db.query("optin_signup"), request.list_id, subscriber_id, campaign_id,
                                  request.email, key, request.source, f"{language}-{VERSION}",
                                  settings.optin_address_limit,
                                  86400.0)
    return row["queued"]


async def confirmations(conn: asyncpg.Connection, settings: Settings, request: SignUp) -> tuple[int, str]:
    """The list's confirmation campaign and its language, made (and committed) at its first need, in the
    sign-up's wording: the account's language then. One made before confirmations had languages is English."""
    found = await conn.fetchrow(db.query("optin_campaign_find"), request.list_id, request.account_id)
    if found is None:
        async with conn.transaction():
            await conn.execute(db.query("optin_campaign_lock"), request.list_id)
            wording = request.wording
            found = await conn.fetchrow(db.query("optin_campaign_ensure"), request.list_id, request.account_id,
                                        wording.subject, settings.optin_from, wording.body, wording.language)
    if found is None:
        raise UsageError("no such list")
    return found["id"], found["language"] or "en"


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
