"""`einmal suppressions review --account A [--lift]`: the 'bounce' suppressions that today's rule would not
have made (docs/guide/bounces.md).

Before the reasons table (service/smtp/reasons.py) every permanent bounce suppressed its address, and
soft bounces of any kind counted toward EINMAL_SOFT_BOUNCE_LIMIT; at send time every 5.1.x reply did. So a
provider's block (5.7.1), a DMARC failure (5.7.26) or a full mailbox suppressed subscribers who can be
mailed. A suppression is listed when every bounce of its mailbox (einmal.bounces) and every 5xx reply to it
(failed send rows) is judged by today's rule and none would suppress: none has an address reason, and fewer
than EINMAL_SOFT_BOUNCE_LIMIT count toward the soft limit (ever, not only within the window: in doubt, it
stays). A suppression with no such evidence (added by hand with reason bounce, its rows erased) is left
alone. `--lift` deletes the listed ones, in one statement that lifts only those still 'bounce'.
"""

from dataclasses import dataclass

import asyncpg

from service import db
from service.smtp import reasons
from service.subscribers import suppressions


@dataclass(frozen=True)
class Evidence:
    source: str  # bounce (einmal.bounces) or reply (a 5xx at send time)
    kind: str
    status: str
    reason: str | None  # None: a provider's verdict with neither reason nor status code

    def effect(self) -> str:
        if self.reason is None:  # as Report.effect: a permanent one suppresses, a temporary one counts
            return {"hard": reasons.SUPPRESS, "soft": reasons.COUNT}.get(self.kind, reasons.NONE)
        return reasons.effect(self.kind, self.reason)

    def __str__(self) -> str:
        if self.source == "reply":
            return f"{self.kind} {reasons.status_in(self.status) or '-'} {self.reason} (at send time)"
        return f"{self.kind} {self.status or '-'} {self.reason or 'no reason'}"


def evidence(source: str, kind: str, status: str | None, reason: str | None) -> Evidence:
    """A bounce or reply as today's rule reads it. A bounce written before its reason was recorded is
    classified from its status code when it has one (5.7.1); one without (a provider's bare verdict) keeps
    the verdict it had: a permanent one suppresses, a temporary one counts, as Report.effect does."""
    status = status or ""
    if source == "reply":
        kind, reason = reasons.of_reply(status)
    elif reason is None and "." in status and reasons.status_in(status):
        reason = reasons.classify(status)
    return Evidence(source, kind, status, reason)


def stands(found: list[Evidence], soft_limit: int) -> bool:
    effects = [e.effect() for e in found]
    return reasons.SUPPRESS in effects or effects.count(reasons.COUNT) >= soft_limit


@dataclass(frozen=True)
class Review:
    email_lower: str
    suppressed_at: str
    found: tuple[Evidence, ...]

    def line(self) -> str:
        return f"{self.email_lower}\t{self.suppressed_at}\t{'; '.join(map(str, self.found))}"


async def to_review(conn: asyncpg.Connection, account_id: int, soft_limit: int) -> tuple[list[Review], object]:
    """The account's 'bounce' suppressions that no bounce or reply of their mailbox would make today, and
    when their evidence was read."""
    by_mailbox: dict[str, tuple[str, list[Evidence]]] = {}
    rows = await conn.fetch(*db.sql("suppressions_review", account_id=account_id))
    for r in rows:
        at = r["created_at"].isoformat(timespec="seconds")
        by_mailbox.setdefault(r["email_lower"], (at, []))[1].append(
            evidence(r["source"], r["kind"], r["status"], r["reason"])
        )
    listed = [
        Review(email, at, tuple(found)) for email, (at, found) in by_mailbox.items() if not stands(found, soft_limit)
    ]
    return listed, rows[0]["began"] if rows else None


async def review(conn: asyncpg.Connection, account_id: int, soft_limit: int, *, lift: bool) -> tuple[list[Review], int]:
    """The suppressions to review, and how many of them were lifted (`lift`, with the audit log's line)."""
    listed, began = await to_review(conn, account_id, soft_limit)
    if not lift or not listed:
        return listed, 0
    keys = [r.email_lower for r in listed]
    async with conn.transaction():
        rows = await conn.fetch(*db.sql("suppressions_lift", account_id=account_id, email_keys=keys, began=began))
        if rows:
            lifted = [r["email_lower"] for r in rows]
            await suppressions.audited(conn, "cli", account_id, "suppression.remove", lifted, len(lifted))
    return listed, len(rows)
