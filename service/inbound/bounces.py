"""Bounces and complaints: tied to a send row and applied once (reading them: service/inbound/reports.py).

``parse(data)`` (service/inbound/reports.py) reads one inbound message into Reports: a bounce of
any format is hard, soft or unclassified with a reason (service/smtp/reasons.py), a complaint
is a complaint, anything else is ``()``. ``record`` puts the token's row in a report's event id
(``dsn:C.S:<Message-ID>``): a report sent first to one's own return path cannot take the id of
another row's report.

What a report may change is decided apart from what it says (docs/design.md#inbound-events), so a parser
that reads more formats cannot widen it: over SMTP only the send row of the signed VERP token
(verified at RCPT, or, for mail to the plain return path such as a feedback loop's complaints,
found in the envelope sender the report quotes: ``returned_senders``) is touched, by one report
at most (``about``); ``apply`` acts only on a row whose message went out (WENT_OUT) and applies
the event through ``inbound.apply``, as the reason says (``Report.effect``): an address that does
not exist, a domain that does not, a disabled mailbox, or a complaint suppress the address
(reason ``bounce`` or ``complaint``); a refusal of our own sender (reason ``sender``: a failure at
MAIL FROM, or one naming our return path) never touches the address; a full mailbox, routing
trouble, an expiry or a temporary failure count, and suppress once EINMAL_SOFT_BOUNCE_LIMIT of them fell within
EINMAL_SOFT_BOUNCE_DAYS; policy, authentication, content and unclassified bounces are kept and
change nothing. Every event applied leaves one einmal.bounces row, with its reason; a complaint or a
hard bounce for an address reason is counted toward its campaign's self-pause in the same transaction,
and the campaign is checked once it committed (service/campaigns/self_pause.py). Provider
webhooks (service/inbound/webhooks.py), authenticated by the provider's signature, find their rows
with ``find_row`` or their own query and end in ``apply`` too.

Mail comes back to the environment's return path (EINMAL_RETURN_PATH) and to each account's own
(``ReturnPaths``): a token at an account's return path verifies only with that account's keys and
only for a campaign of that account, so no account's secret answers for another's mail. Provider webhooks
verify a token with the same core (``account_paths``, ``find_paths``, ``verify_token``).
"""

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import asyncpg
from pydantic import SecretStr

from service import db
from service.addresses import email_key
from service.campaigns import self_pause
from service.inbound import events as inbound
from service.inbound.reports import MAX_PARTS, MAX_RECIPIENTS, Malformed, Report, TooLarge, bounded, parse
from service.mail.mailing import Mailing
from service.mail.verp import Keys, ReturnPath
from service.settings import Settings
from service.smtp import reasons

__all__ = [
    "MAX_PARTS",
    "MAX_RECIPIENTS",
    "Malformed",
    "Report",
    "ReturnPaths",
    "TooLarge",
    "about",
    "account_paths",
    "apply",
    "bounded",
    "campaign_owner",
    "find_paths",
    "find_row",
    "parse",
    "record",
    "verify_token",
]

WENT_OUT = ("sent", "sending", "in_doubt")  # a report may be about these rows' messages only


def about(found: tuple[Report, ...], email_lower: str) -> Report | None:
    """The one report of a message that may act on the send row its token names (address key
    `email_lower`): a message's only report, whatever recipient it names (relays rewrite them);
    of several, the first naming the row's own address; None when none does."""
    if len(found) == 1:
        return found[0]
    return next((r for r in found if any(_key(a) == email_lower for a in (r.recipient, *r.also))), None)


def _key(address: str | None) -> str | None:
    try:
        return email_key(address) if address else None
    except ValueError:  # a report may name anything
        return None


async def find_row(
    conn: asyncpg.Connection, report: Report, row_ids: tuple[int, int], by_token: bool
) -> asyncpg.Record | str:
    """The send row a report is about, or why there is none.

    by_token: the row (campaign, subscriber) a verified VERP token named, whatever the report's
    recipient (pick the report with ``about``). Else, for a report its source authenticated (a
    provider's signed webhook) naming the message by its Message-ID: that row when the report's
    recipient is its address (or the report names none), else that campaign's row for the
    report's recipient."""
    campaign_id, subscriber_id = row_ids
    row = await conn.fetchrow(*db.sql("bounce_send_row", campaign_id=campaign_id, subscriber_id=subscriber_id))
    if row is None:
        return "no such send row"
    if by_token or report.recipient is None or email_key(report.recipient) == row["email_lower"]:
        return row
    other = await conn.fetchrow(
        *db.sql("bounce_send_row_address", campaign_id=campaign_id, email_key=email_key(report.recipient))
    )
    return other if other is not None else "the report's recipient is not the address of the message it returns"


@dataclass(frozen=True)
class Rules:
    """What applying a bounce or a complaint needs of the settings, read once from Settings: the soft bounces
    that suppress a mailbox (EINMAL_SOFT_BOUNCE_LIMIT within EINMAL_SOFT_BOUNCE_DAYS), the campaigns'
    self-pause thresholds, and the keys of the return paths (Mailing)."""

    soft_bounce_limit: int
    soft_bounce_days: float
    pause: self_pause.Limits
    mailing: Mailing

    @classmethod
    def of(cls, settings: Settings) -> "Rules":
        return cls(
            settings.soft_bounce_limit, settings.soft_bounce_days, self_pause.Limits.of(settings), Mailing.of(settings)
        )


async def apply(
    conn: asyncpg.Connection, rules: Rules, report: Report, row: asyncpg.Record, payload: dict | None = None
) -> str:
    """Apply the report to its send row once: applied, repeated, or ``dropped: why`` (nothing
    written) when the row's message never went out (WENT_OUT). `payload` is what identifies the
    event's content (default: its kind, status and row)."""
    status = await conn.fetchval(*db.sql("bounce_send_status", send_id=row["id"], campaign_id=row["campaign_id"]))
    if status not in WENT_OUT:
        return f"dropped: its message was not sent (the send row is {status or 'gone'})"
    limit, window = rules.soft_bounce_limit, rules.soft_bounce_days * 86400

    effect = report.effect()
    complained = report.kind == "complaint"
    bounced = report.kind == "hard" and effect == reasons.SUPPRESS
    campaign: list[asyncpg.Record] = []

    async def keep(conn: asyncpg.Connection) -> bool:
        await conn.execute(
            *db.sql(
                "bounce_insert",
                event_id=report.event_id,
                account_id=row["account_id"],
                send_id=row["id"],
                campaign_id=row["campaign_id"],
                kind=report.kind,
                status=report.status,
                reason=report.recorded_reason(),
                counts=effect == reasons.COUNT,
            )
        )
        if complained or bounced:  # toward the campaign's self-pause (service/campaigns/self_pause.py)
            campaign.extend(
                await conn.fetch(
                    *db.sql(
                        "bounce_count",
                        send_id=row["id"],
                        campaign_id=row["campaign_id"],
                        bounced=int(bounced),
                        complained=int(complained),
                    )
                )
            )
        if effect != reasons.COUNT:
            return effect == reasons.SUPPRESS
        mailbox = {"account_id": row["account_id"], "email_key": row["email_lower"]}
        await conn.execute(*db.sql("bounce_lock_mailbox", **mailbox))
        return await conn.fetchval(*db.sql("bounce_soft_count", **mailbox, window_seconds=window)) >= limit

    kind = "complaint" if report.kind == "complaint" else "bounce"
    payload = payload or {"report": report.kind, "status": report.status, "send_id": row["id"]}
    applied = await inbound.apply(conn, report.event_id, kind, row["account_id"], row["email"], payload, keep)
    if applied and campaign:
        await self_pause.check(conn, limits=rules.pause, campaign_id=campaign[0]["campaign_id"])
    return "applied" if applied else "repeated"


async def record(
    conn: asyncpg.Connection, rules: Rules, found: tuple[Report, ...], row_ids: tuple[int, int]
) -> tuple[Report | None, str]:
    """Apply the one report of `found` about the send row a verified VERP token named (``about``):
    that report (None if none is) and a word for the log: applied, repeated, or ``dropped: why``."""
    row = await find_row(conn, found[0], row_ids, by_token=True)
    if isinstance(row, str):
        return None, f"dropped: {row}"
    report = about(found, row["email_lower"])
    if report is None:
        return None, f"dropped: none of its {len(found)} recipients is the address of the token's message"
    source, _, rest = report.event_id.partition(":")  # the row's own ids: nobody can take another row's
    report = replace(report, event_id=f"{source}:{row_ids[0]}.{row_ids[1]}:{rest}")
    if report.guessed and _key(report.recipient) != row["email_lower"]:  # only the returned To: the row disagrees
        report = replace(report, recipient=None, guessed=False)
    return report, await apply(conn, rules, report, row)


RETURN_PATHS_SECONDS = 10.0  # how long the accounts' return paths are reused by the inbound listener


def account_paths(rows: Iterable[asyncpg.Record], keys: Keys) -> dict[str, list[tuple[int, ReturnPath]]]:
    """The accounts' own return paths (rows of account_return_paths) by their lower-case address, each with
    the keys that sign its tokens (its return_path_secret, else the environment's)."""
    accounts: dict[str, list[tuple[int, ReturnPath]]] = {}
    for row in rows:
        secret = row["return_path_secret"]
        try:
            path = ReturnPath.of_account(row["return_path"], SecretStr(secret) if secret is not None else None, keys)
        except ValueError:
            continue  # one that cannot sign signed nothing
        if path is not None:
            accounts.setdefault(f"{path.local}@{path.domain}".lower(), []).append((row["account_id"], path))
    return accounts


def find_paths(
    env: ReturnPath | None, accounts: Mapping[str, list[tuple[int, ReturnPath]]], address: str
) -> tuple[list[tuple[int | None, ReturnPath]], str | None]:
    """The return paths (with their account; None: the environment's) an address is, and its token;
    ([], None) when it is none of them."""
    if env is not None and (ours := env.ours(address))[0]:
        return [(None, env)], ours[1]
    local, at, domain = address.strip().strip("<>").rpartition("@")
    base, plus, token = local.partition("+")
    paths = accounts.get(f"{base}@{domain}".lower(), []) if at else []
    return list(paths), (token if plus and paths else None)


async def verify_token(
    paths: list[tuple[int | None, ReturnPath]], token: str, owner: Callable[[int], Awaitable[int | None]]
) -> tuple[int, int] | None:
    """(campaign, subscriber) of a token one of `paths` signed, an account's only for its own campaign
    (`owner`: the account of a campaign, asked only then)."""
    for account_id, path in paths:
        row_ids = path.verify(token)
        if row_ids is not None and (account_id is None or await owner(row_ids[0]) == account_id):
            return row_ids
    return None


async def campaign_owner(conn: asyncpg.Connection, campaign_id: int) -> int | None:
    return await conn.fetchval(*db.sql("campaign_owner", campaign_id=campaign_id))


class ReturnPaths:
    """The return paths mail comes back to: the environment's, and every account's own with the keys that
    sign its tokens (``account_paths``), read again every RETURN_PATHS_SECONDS."""

    def __init__(self, settings: Settings, env: ReturnPath, pool: asyncpg.Pool) -> None:
        self.settings, self.env, self.pool = settings, env, pool
        self.accounts: dict[str, list[tuple[int, ReturnPath]]] = {}  # by the lower-case return path
        self.loaded_at = -RETURN_PATHS_SECONDS

    async def load(self) -> None:
        """Read the accounts' return paths again if they are older than RETURN_PATHS_SECONDS."""
        if time.monotonic() - self.loaded_at < RETURN_PATHS_SECONDS:
            return
        async with db.acquire(self.pool) as conn:
            found = await conn.fetch(*db.sql("account_return_paths"))
        self.accounts, self.loaded_at = account_paths(found, self.settings), time.monotonic()

    def find(self, recipient: str) -> tuple[list[tuple[int | None, ReturnPath]], str | None]:
        """``find_paths`` of a recipient, with the return paths last read."""
        return find_paths(self.env, self.accounts, recipient)

    async def verify(self, paths: list[tuple[int | None, ReturnPath]], token: str) -> tuple[int, int] | None:
        """``verify_token``, the database asked for an account's token only."""
        return await verify_token(paths, token, self._owner)

    async def _owner(self, campaign_id: int) -> int | None:
        async with db.acquire(self.pool) as conn:
            return await campaign_owner(conn, campaign_id)
