"""An account's deliverability (docs/guide/console.md#deliverability): its campaign mail of the last DAYS days,
a day at a time — messages delivered, hard bounces and complaints that came back — their rates against what
the large mailbox providers hold a bulk sender to, and the doctor's findings kept for its domains
(service/accounts/doctor.py keeps them for EINMAL_DOCTOR_CACHE_SECONDS; nothing here asks DNS).

The thresholds: Gmail and Yahoo want complaints under 0.3 % of the mail delivered, and aim at 0.1 %
(Gmail's sender guidelines, Yahoo's sender best practices, 2024); hard bounces are commonly held under 2 %.
einmal pauses a campaign of its own at EINMAL_PAUSE_COMPLAINT_RATE and EINMAL_PAUSE_HARD_BOUNCE_RATE
(service/campaigns/self_pause.py); these figures are the account's over all its campaigns."""

import datetime as dt
import json
from dataclasses import dataclass

import asyncpg

from service import db
from service.accounts.doctor_records import Finding

DAYS = 30
COMPLAINTS_LIMIT, COMPLAINTS_AIM, BOUNCES_LIMIT = 0.3, 0.1, 2.0  # per cent of the messages delivered


@dataclass(frozen=True)
class Day:
    day: dt.date
    delivered: int
    bounced: int  # hard bounces recorded that day
    complained: int


@dataclass(frozen=True)
class Kept:
    """The doctor's findings for one of the account's domains, as kept when it last asked DNS."""

    domain: str
    checked_at: dt.datetime
    findings: tuple[Finding, ...]


def rate(events: int, delivered: int) -> float | None:
    """Per cent of the messages delivered; None when none was."""
    return 100 * events / delivered if delivered else None


def judged(percent: float | None, limit: float, aim: float | None = None) -> str:
    """ok, watch (over the aim, under the limit), over (at or over the limit), or none (nothing delivered)."""
    if percent is None:
        return "none"
    if percent >= limit:
        return "over"
    return "watch" if aim is not None and percent >= aim else "ok"


def trailing(days: tuple[Day, ...], events: str, window: int = 7) -> list[float | None]:
    """Each day's rate over the `window` days ending with it: a complaint comes days after its message, so a
    day's own events over its own deliveries would say little."""
    rates = []
    for i in range(len(days)):
        seen = days[max(0, i - window + 1) : i + 1]
        rates.append(rate(sum(getattr(d, events) for d in seen), sum(d.delivered for d in seen)))
    return rates


@dataclass(frozen=True)
class Deliverability:
    days: tuple[Day, ...]  # DAYS of them, oldest first, today last
    kept: tuple[Kept, ...]

    @property
    def delivered(self) -> int:
        return sum(d.delivered for d in self.days)

    @property
    def bounced(self) -> int:
        return sum(d.bounced for d in self.days)

    @property
    def complained(self) -> int:
        return sum(d.complained for d in self.days)

    @property
    def bounce_rate(self) -> float | None:
        return rate(self.bounced, self.delivered)

    @property
    def complaint_rate(self) -> float | None:
        return rate(self.complained, self.delivered)

    @property
    def bounce_verdict(self) -> str:
        return judged(self.bounce_rate, BOUNCES_LIMIT)

    @property
    def complaint_verdict(self) -> str:
        return judged(self.complaint_rate, COMPLAINTS_LIMIT, COMPLAINTS_AIM)


def since(days: int = DAYS) -> dt.datetime:
    """The start of the window: midnight UTC `days - 1` days before today's."""
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - dt.timedelta(days=days - 1)


async def of_account(conn: asyncpg.Connection, *, account_id: int, days: int = DAYS) -> Deliverability:
    """The account's figures of the last `days` days. A campaign that ended is counted once from its send rows
    (sql/queries/campaign_days_count.sql), then read from einmal.campaign_days; one sending or paused is
    counted from its send rows each time."""
    start = since(days)
    live, counted = [], []
    for c in await conn.fetch(*db.sql("deliverability_campaigns", account_id=account_id, since=start)):
        if c["live"]:
            live.append(c["id"])
            continue
        if not c["counted"]:
            await conn.execute(*db.sql("campaign_days_count", campaign_id=c["id"]))
        counted.append(c["id"])
    rows = await conn.fetch(
        *db.sql("deliverability_days", account_id=account_id, days=days, since=start, live=live, counted=counted)
    )
    kept = [
        Kept(r["domain"], r["checked_at"], tuple(Finding(**f) for f in json.loads(r["findings"])))
        for r in await conn.fetch(*db.sql("doctor_reports_kept", account_id=account_id))
    ]
    return Deliverability(tuple(Day(**dict(r)) for r in rows), tuple(kept))
