"""Double opt-in (docs/design.md#api "Double opt-in"): a sign-up, its one confirmation message, the
confirmation with its consent record, and the pruning of sign-ups never confirmed.

A sign-up (`POST /api/v1/subscribe`, the hosted form `/forms/{token}`) makes an 'unconfirmed'
membership and queues the confirmation as the one send row of the subscriber in the list's confirmation
campaign (a campaign of kind 'confirmation', made at the list's first sign-up, always sending). The
normal pipeline claims, sends, fences and puts it in doubt like any other row, so its
UNIQUE (campaign_id, subscriber_id) is the exactly-once: a retry, a double submit or a crash cannot
send a second. Whatever happened (a new sign-up, a repeat, a confirmed member, a suppressed address, a
flood bound reached) the caller answers the same, and no sooner than FLOOR_SECONDS after it began, so
that the time taken tells nothing either.

A list takes sign-ups only while its account has opened them (`set_form`): its form is then at
/forms/<token>, a random token, and may be posted from the serving site and the origins the account allows.
"""

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import anyio
import asyncpg

from service import clients, db
from service.addresses import address_problem, email_key
from service.errors import ArgumentError, ConfigError, Conflict, Invalid, NotFound
from service.mail import from_rule
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate
from service.settings import Settings
from service.subscribers import subscriber, texts
from service.subscribers.texts import Wording
from service.text import MAX_EMAIL, MAX_NAME, shown, unsafe_text

PRUNE_BATCH = 1000
FLOOR_SECONDS = 0.25  # a sign-up's answer goes no sooner than this after its handler began (form and API)
HOUR = 3600.0  # the window of the sign-up bounds
CLIENT_KIND, KEY_KIND, LIST_KIND = "sign-up", "sign-up-key", "confirmation-list"  # their einmal.client_counts
TOKEN = re.compile(r"[A-Za-z0-9_-]{22}")  # a form's token: 16 random bytes, URL-safe base64 without padding
MAX_ORIGINS = 20
MAX_FROM = 500  # a list's confirmations' From, as long as a campaign's (service/campaigns/fields.py)
OPTIN_FROM = "the confirmations' From (EINMAL_OPTIN_FROM)"  # how the From rule names it (service/mail/from_rule.py)
LIST_FROM = "the list's confirmations' From"  # a list's own (lists.optin_from), set with its sign-ups


class NotConfigured(Conflict):
    """Double opt-in is off: EINMAL_CONFIRM_URL is not set, or the list has no confirmations' From (neither its
    own nor EINMAL_OPTIN_FROM)."""


class NoList(NotFound):
    """The account has no list of that name."""


def own_wording(default: Wording, subject: str | None, text: str | None) -> Wording:
    """A list's confirmation wording: its own subject and text where it has them (optin_wording.py), else
    `default`'s (einmal's, in the language of its confirmations). With either of its own, the version each sign-up
    records is "list-" and 12 hex digits of the SHA-256 of the subject and text sent: which words were agreed to."""
    if not (subject or text):
        return default
    subject, text = subject or default.subject, text or default.body
    digest = hashlib.sha256(f"{subject}\0{text}".encode()).hexdigest()[:12]
    return Wording(default.language, subject, text, digest)


@dataclass(frozen=True)
class SignUps:
    """Double opt-in's section of the settings, read once from Settings: what making a confirmation needs
    (Mailing), how long its link holds (EINMAL_OPTIN_WINDOW_HOURS) and the bounds on sign-ups (EINMAL_OPTIN_*)."""

    mailing: Mailing
    window_seconds: float
    address_limit: int
    list_limit: int
    client_limit: int

    @classmethod
    def of(cls, settings: Settings) -> "SignUps":
        return cls(
            Mailing.of(settings),
            window_seconds(settings),
            settings.optin_address_limit,
            settings.optin_list_limit,
            settings.optin_client_limit,
        )


@dataclass(frozen=True)
class SignUp:
    list_id: int
    account_id: int
    email: str
    name: str
    source: str  # "form", or "api:<key prefix>": the consent record's "which form"
    wording: Wording  # in the account's language: the list's confirmations are made in it at its first sign-up
    from_address: str | None = None  # the list's own confirmations' From; None: EINMAL_OPTIN_FROM


def check_configured(mailing: Mailing, from_address: str | None = "") -> None:
    """NotConfigured unless EINMAL_CONFIRM_URL and EINMAL_UNSUBSCRIBE_SECRET are set and the confirmations have a
    From: `from_address`, the list's own, else EINMAL_OPTIN_FROM ('': whatever list, one of them may have one)."""
    has_from = from_address == "" or bool(from_address or mailing.optin_from)
    if not (mailing.confirm_url and has_from and mailing.unsubscribe_secret):
        raise NotConfigured(
            "double opt-in is not set up here: EINMAL_CONFIRM_URL, EINMAL_UNSUBSCRIBE_SECRET and a confirmations' "
            "From (EINMAL_OPTIN_FROM, or the list's own: einmal lists form open --from) are needed"
        )


def checked_from(mailing: Mailing, address: str) -> str:
    """A list's confirmations' From stripped, or ArgumentError (one line) when no message can be made from it."""
    address = address.strip()
    if not address or len(address) > MAX_FROM or unsafe_text(address):
        raise ArgumentError(f"{LIST_FROM} {shown(address[:100])}: not an address")
    try:
        CampaignTemplate.compile(
            {
                "id": 0,
                "account_id": 0,
                "name": "list",
                "subject": "x",
                "body_text": "x",
                "from_address": address,
                "kind": "confirmation",
            },
            mailing,
        )
    except Invalid as exc:
        raise ArgumentError(f"{LIST_FROM}: not an address: {exc}") from None
    return address


def check_message(mailing: Mailing, wordings: list[Wording]) -> None:
    """ConfigError, one line, when the confirmation message cannot be made with this `mailing` (an
    EINMAL_OPTIN_FROM that is not an address), or in one of its languages: at start, rather than a
    confirmation campaign paused later."""
    if not mailing.optin_from:
        return
    for wording, said in (
        (Wording("en", "x", "x"), "EINMAL_OPTIN_FROM"),  # the From alone, first
        *((w, f"the {w.language} confirmation message") for w in wordings),
    ):
        try:
            CampaignTemplate.compile(
                {
                    "id": 0,
                    "account_id": 0,
                    "name": "list",
                    "subject": wording.subject,
                    "body_text": wording.body,
                    "from_address": mailing.optin_from,
                    "kind": "confirmation",
                },
                mailing,
            )
        except Invalid as exc:
            raise ConfigError(f"{said}: {exc}") from None


def checked_address(email: str, name: str = "") -> tuple[str, str]:
    """(address, name) stripped, or Invalid with why the address or name cannot be taken."""
    email, name = email.strip(" "), name.strip(" ")
    problem = (
        "longer than 254 characters"
        if len(email) > MAX_EMAIL
        else "a name longer than 1000 characters"
        if len(name) > MAX_NAME
        else unsafe_text(email) or unsafe_text(name) or address_problem(email)
    )
    if problem:
        raise Invalid(f"not an address that can be subscribed: {problem}")
    return email, name


@dataclass(frozen=True)
class OpenList:
    id: int
    language: str  # its account's: the language of its confirmations
    from_address: str | None  # its own confirmations' From; None: EINMAL_OPTIN_FROM
    subject: str | None = None  # its own confirmations' subject; None: einmal's
    text: str | None = None  # its own confirmations' text; None: einmal's


async def open_list(conn: asyncpg.Connection, mailing: Mailing, *, account_id: int, list_name: str) -> OpenList:
    """The account's list `list_name`, which takes sign-ups: NotFound without it, NotConfigured while double
    opt-in is off, Conflict while its account has not opened its sign-ups."""
    found = await conn.fetchrow(
        *db.sql("optin_list_named", account_id=account_id, list_name=list_name), timeout=db.DB_SECONDS
    )
    if found is None:
        raise NoList("no such list")
    check_configured(mailing, found["optin_from"])
    if not found["form_open"]:
        raise Conflict(
            f"the list {list_name!r} takes no sign-ups: open them first "
            f"(PUT /api/v1/lists/{{name}}/form, or einmal lists form open)"
        )
    return OpenList(found["id"], found["language"], found["optin_from"], found["optin_subject"], found["optin_text"])


async def sign_up(conn: asyncpg.Connection, signups: SignUps, request: SignUp) -> bool:
    """Record the sign-up; True when its confirmation was queued now (for the log only: the answer to the
    caller never depends on it). The address must have passed checked_address."""
    check_configured(signups.mailing, request.from_address)
    address = request.from_address or signups.mailing.optin_from or ""
    await from_rule.check(
        conn,
        mailing=signups.mailing,
        account_id=request.account_id,
        address=address,
        said=LIST_FROM if request.from_address else OPTIN_FROM,
    )
    key = email_key(request.email)
    campaign_id, wording = await confirmations(conn, request, address)
    messages = await clients.count(conn, LIST_KIND, f"list:{request.list_id}", HOUR)
    async with conn.transaction():
        with subscriber.waiting():
            await conn.execute(
                *db.sql(
                    "subscriber_lock", account_id=request.account_id, email_key=key, lock_wait=subscriber.lock_wait()
                )
            )
        subscriber_id = await conn.fetchval(
            *db.sql(
                "optin_subscriber",
                account_id=request.account_id,
                email=request.email,
                email_key=key,
                name=request.name,
            )
        )
        row = await conn.fetchrow(
            *db.sql(
                "optin_signup",
                list_id=request.list_id,
                subscriber_id=subscriber_id,
                campaign_id=campaign_id,
                email=request.email,
                email_key=key,
                source=request.source,
                wording=wording,
                address_limit=signups.address_limit,
                address_seconds=86400.0,
                under_list_limit=messages.hits < signups.list_limit,
            )
        )
    assert row is not None  # the query returns one row
    if row["queued"]:  # counted after: sign-ups at the same moment may pass the list's bound by their number
        await clients.hit(conn, LIST_KIND, f"list:{request.list_id}", HOUR)
    return row["queued"]


async def pad(started: float) -> None:
    """Wait until FLOOR_SECONDS after `started` (time.monotonic()): the answer to a sign-up takes as long
    whatever the address's state, new, unconfirmed, confirmed or suppressed."""
    await anyio.sleep(max(0.0, started + FLOOR_SECONDS - time.monotonic()))


def new_token() -> str:
    return secrets.token_urlsafe(16)


def form_url(mailing: Mailing, token: str | None) -> str | None:
    """Where a form is reached: beside EINMAL_CONFIRM_URL (same site and path prefix); without it, its path."""
    if token is None:
        return None
    return urljoin(mailing.confirm_url, f"forms/{token}") if mailing.confirm_url else f"/forms/{token}"


def origin(value: str) -> str:
    """An origin as browsers send it in `Origin`, lower case, without a default port: https://shop.example.org;
    Invalid for anything else (a path, a query, credentials, another scheme)."""
    bad = Invalid(f"not an origin (https://host or https://host:port): {value[:100]!r}")
    try:
        parts = urlsplit(value.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        raise bad from None
    if (
        parts.scheme not in ("http", "https")
        or not host
        or parts.username is not None
        or unsafe_text(value)
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise bad
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def origins(values: list[str]) -> list[str]:
    """The origins a form may be posted from besides its own site, checked and without repeats."""
    checked = list(dict.fromkeys(origin(v) for v in values))
    if len(checked) > MAX_ORIGINS:
        raise Invalid(f"at most {MAX_ORIGINS} origins")
    return checked


def posted_from(origin_header: str | None, referer: str | None) -> str | None:
    """The origin a POST says it came from: its `Origin`, else its `Referer`'s; None when it names neither.
    A value that is no origin (`Origin: null`, a sandboxed or privacy-stripped page) is returned as it is, and
    so is allowed nowhere."""
    claimed = origin_header
    if claimed is None and referer:
        try:
            parts = urlsplit(referer)
        except ValueError:
            return referer
        claimed = f"{parts.scheme}://{parts.netloc}"
    if claimed is None:
        return None
    try:
        return origin(claimed)
    except Invalid:
        return claimed


async def set_form(
    conn: asyncpg.Connection,
    account_id: int,
    list_name: str,
    open_: bool,
    allowed: list[str] | None,
    mailing: Mailing | None = None,
    from_address: str | None = None,
    subject: str | None = None,
    text: str | None = None,
) -> asyncpg.Record:
    """Open or close the sign-ups of the account's list (the form and POST /api/v1/subscribe); `allowed`
    replaces its origins (None: they stay); `from_address` becomes the list's own confirmations' From (checked
    with checked_from; None: it stays; '': none, EINMAL_OPTIN_FROM again), and its confirmations made already go
    out from it from then on; so do `subject` and `text` (checked with optin_wording.checked; None: it stays; '':
    none, einmal's text in the language of its confirmations again). NoList for an unknown list; ArgumentError
    when the account's From domains do not allow the From given, or, when opening, the From its confirmations
    would go out from."""
    found = await conn.fetchrow(*db.sql("list_form", account_id=account_id, list_name=list_name))
    if found is None:
        raise NoList(f"no list named {list_name!r}")
    own = found["optin_from"] if from_address is None else from_address or None
    if mailing is not None and own and (from_address or open_):
        await from_rule.check(conn, mailing=mailing, account_id=account_id, address=own, said=LIST_FROM)
    elif mailing is not None and open_ and mailing.optin_from:
        await _check_default(conn, mailing, account_id, list_name)
    own_subject = found["optin_subject"] if subject is None else subject or None
    own_text = found["optin_text"] if text is None else text or None
    wording = None  # the new wording of its confirmation campaign, when it has one and it changes
    if subject is not None or text is not None:
        made = await conn.fetchrow(*db.sql("optin_campaign_find", list_id=found["id"], account_id=account_id))
        if made is not None:
            wording = own_wording(texts.confirmation(made["language"]), own_subject, own_text)
    row = await conn.fetchrow(
        *db.sql(
            "list_form_set",
            account_id=account_id,
            list_name=list_name,
            open=open_,
            set_origins=allowed is not None,
            origins=allowed or [],
            token=new_token(),
            set_from=from_address is not None,
            optin_from=own,
            campaign_from=own or (mailing.optin_from if mailing else None),
            set_subject=subject is not None,
            optin_subject=own_subject,
            set_text=text is not None,
            optin_text=own_text,
            set_wording=wording is not None,
            campaign_subject=wording.subject if wording else None,
            campaign_text=wording.body if wording else None,
            campaign_wording=wording.version if wording else None,
        )
    )
    if row is None:
        raise NoList(f"no list named {list_name!r}")
    return row


async def _check_default(conn: asyncpg.Connection, mailing: Mailing, account_id: int, list_name: str) -> None:
    """ArgumentError when the account may not send as EINMAL_OPTIN_FROM: the list needs its own From then (the
    rule's own hint, to add the domain, would give the account the domain of the installation's From, which is
    most often another client's)."""
    address = mailing.optin_from or ""
    if found := await from_rule.problem(conn, mailing=mailing, account_id=account_id, address=address):
        why = found.split(": add the domain first")[0]  # the rule's words, without its hint
        raise ArgumentError(
            f"{OPTIN_FROM} {shown(address)}: {why}: give the list a From of its own (einmal lists form open "
            f'{shown(list_name)} --from ADDRESS, or "from" in PUT /api/v1/lists/{{name}}/form)'
        )


async def confirmations(conn: asyncpg.Connection, request: SignUp, from_address: str) -> tuple[int, str]:
    """The list's confirmation campaign and the version of its wording (de-2), made (and committed) at its first
    need, in the sign-up's wording: the account's language and einmal's text then. It is never rewritten (a node
    renders a campaign from what it read of it), so the version is what its messages say."""
    found = await conn.fetchrow(*db.sql("optin_campaign_find", list_id=request.list_id, account_id=request.account_id))
    if found is None:
        async with conn.transaction():
            await conn.execute(*db.sql("campaign_partition_lock"))
            wording = request.wording
            found = await conn.fetchrow(
                *db.sql(
                    "optin_campaign_ensure",
                    list_id=request.list_id,
                    account_id=request.account_id,
                    subject=wording.subject,
                    from_address=from_address,
                    body_text=wording.body,
                    language=wording.language,
                    wording=wording.version,
                )
            )
    if found is None:
        raise NotFound("no such list")
    # no wording: made by a node of before 0108, with the version 1 text of its language
    return found["id"], found["wording"] or f"{found['language'] or 'en'}-1"


def window_seconds(settings: Settings) -> float:
    return settings.optin_window_hours * 3600


async def confirm(
    conn: asyncpg.Connection, window: float, ids: tuple[int, int, int], ip: str | None, agent: str
) -> str:
    """'confirmed', 'already' (nothing changed) or 'expired' for the link's (account, campaign, subscriber),
    its window `window` seconds (SignUps.window_seconds)."""
    account_id, campaign_id, subscriber_id = ids
    return await conn.fetchval(
        *db.sql(
            "optin_confirm",
            account_id=account_id,
            campaign_id=campaign_id,
            subscriber_id=subscriber_id,
            ip=ip,
            agent=agent[:500],
            window_seconds=window,
        )
    )


async def link(conn: asyncpg.Connection, window: float, ids: tuple[int, int, int]) -> asyncpg.Record | None:
    """What the confirmation page shows (optin_link.sql); None when the link's account is gone."""
    account_id, campaign_id, subscriber_id = ids
    return await conn.fetchrow(
        *db.sql(
            "optin_link",
            account_id=account_id,
            campaign_id=campaign_id,
            subscriber_id=subscriber_id,
            window_seconds=window,
        )
    )


async def prune(conn: asyncpg.Connection, settings: Settings) -> tuple[int, int]:
    """Remove the sign-ups unconfirmed past the window, in batches: (memberships, send rows) removed."""
    members = rows = 0
    while True:
        done = await conn.fetchrow(*db.sql("optin_prune", window_seconds=window_seconds(settings), batch=PRUNE_BATCH))
        assert done is not None  # the query returns one row
        members, rows = members + done["members"], rows + done["rows"]
        if done["members"] < PRUNE_BATCH:
            return members, rows
