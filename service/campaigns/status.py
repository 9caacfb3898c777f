"""A campaign's status: counts per send state, what came back, why it is paused, when it starts and what the
operator must do for it to go on (`einmal campaign status`, GET /api/v1/campaigns/{id}).

The counts come from one GROUP BY over einmal.sends, read in the same statement as the campaign's own status
and the messages that came back (einmal.bounces, docs/design.md#inbound-events): send rows with a hard bounce (bounced:
a permanent failure, whatever its reason), with a soft one (soft bounced), with a bounce that said neither
(unclassified) and with a complaint (complained), then per reason (service/smtp/reasons.py)."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from service import db
from service.errors import NotFound
from service.settings import Settings

STATUSES = ("draft", "approved", "sending", "paused", "sent", "cancelled")
# `cancelled`: rows a cancel settled, stored as `failed` with the reply 'campaign cancelled' (the status words
# of einmal.sends are a contract: docs/operations/monitoring.md#watching-progress-with-sql); counted apart from
# the failures
STATES = ("queued", "claimed", "sending", "sent", "suppressed", "failed", "cancelled", "in_doubt")
CAME_BACK = ("bounced", "soft_bounced", "unclassified", "complained")
DONE = ("sent", "suppressed", "failed", "cancelled", "in_doubt")
NOT_STARTED = ("draft", "approved")
FINAL = ("sent", "cancelled")
TOP_FAILURES = 5


@dataclass(frozen=True)
class Snapshot:
    id: int
    name: str
    status: str
    counts: dict[str, int]
    pause_reason: str | None = None
    failures: tuple[tuple[str, int], ...] = ()  # the most frequent replies of failed rows, with their counts
    came_back: dict[str, int] | None = None  # send rows that bounced (hard, soft) or drew a complaint
    reasons: dict[str, int] | None = None  # send rows per reason of their bounces or complaints
    # recipient domains paused (a throttle, a refusal) with queued rows of the campaign: (domain, until,
    # the reply that paused it, rows waiting)
    paused_domains: tuple[tuple[str, str, str, int], ...] = ()
    scheduled_for: datetime | None = None  # when it may start (for a draft: once approved, if that is later)
    started_at: datetime | None = None
    now: datetime | None = None  # the database's clock when the snapshot was read
    nodes: int | None = None  # nodes alive (a recent heartbeat): with none, nothing sends
    unsubscribed: int = 0  # recipients who pressed the campaign's unsubscribe link
    estimate: int | None = None  # a campaign not started yet: the recipients its build would take now
    unsubscribe: bool = True  # false: made with --no-unsubscribe, it may go out without a one-click unsubscribe
    local_time: str | None = None  # 'HH:MM' in each recipient's time zone (--local-time); None: at once
    waiting: int = 0  # rows queued for their first attempt whose local time has not come
    next_due: datetime | None = None  # when the next of them is due
    zone_fallbacks: int = 0  # rows given the account's time zone: their subscriber's time_zone named none known

    @property
    def local(self) -> str | None:
        """`at 09:00 local time: 1200 wait for it, the next due 2027-01-01T08:00:00+00:00 (in 20 min)`, for a
        campaign with a local time."""
        if self.local_time is None:
            return None
        said = f"at {self.local_time} local time"
        if self.waiting:
            said += f": {self.waiting} wait for it"
            if self.next_due is not None:
                said += f", the next due {self.next_due.isoformat(timespec='seconds')}"
                if self.now is not None:
                    said += f" (in {until((self.next_due - self.now).total_seconds())})"
        if self.zone_fallbacks:
            n = self.zone_fallbacks
            said += (
                f"; {n} recipient{'' if n == 1 else 's'} whose time_zone attribute names no known time zone "
                "got the account's"
            )
        return said

    @property
    def schedule(self) -> str | None:
        """`scheduled for 2027-01-01T08:00:00+00:00 (in 1 h 20 min)` for a campaign not started yet,
        `started 2026-…` for one that has; None when neither is known."""
        if self.status == "draft" and self.scheduled_for is None:  # given no time
            return "starts when approved"
        if self.status in NOT_STARTED and self.scheduled_for is not None:
            when = self.scheduled_for.isoformat(timespec="seconds")
            if self.now is not None and self.scheduled_for > self.now:
                return f"scheduled for {when} (in {until((self.scheduled_for - self.now).total_seconds())})"
            if self.status == "draft":
                return "starts when approved"
            if self.nodes == 0:
                return f"due since {when}, but no node is running: start one with `einmal run`"
            return f"due since {when}: a running node starts it within a tick"
        if self.started_at is not None:
            return f"started {self.started_at.isoformat(timespec='seconds')}"
        return None

    @property
    def next_step(self) -> str | None:
        """What the operator must do for the campaign to go on, if anything: decide rows in doubt, start a
        node."""
        if self.counts.get("in_doubt"):
            n = self.counts["in_doubt"]
            return (
                f"{n} message{'' if n == 1 else 's'} in doubt (the relay may or may not have taken "
                f"{'it' if n == 1 else 'them'}): decide with `einmal reconcile {self.id}`"
            )
        if self.nodes == 0 and self.status in ("approved", "sending"):
            return "no node is running, so nothing is sent: start one with `einmal run`"
        return None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return sum(self.counts[s] for s in DONE)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "total": self.total,
            "counts": dict(self.counts),
            "scheduled_for": self.scheduled_for.isoformat() if self.scheduled_for else None,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "pause_reason": self.pause_reason,
            **(self.came_back or dict.fromkeys(CAME_BACK, 0)),
            "reasons": dict(self.reasons or {}),
            "paused_domains": [
                {"domain": d, "until": until, "reply": reply, "queued": n} for d, until, reply, n in self.paused_domains
            ],
            "failures": [{"reply": reply, "count": n} for reply, n in self.failures],
            "unsubscribed": self.unsubscribed,
            "recipients_estimate": self.estimate,
            "nodes_running": self.nodes,
            "next_step": self.next_step,
            "unsubscribe": self.unsubscribe,
            "local_time": self.local_time,
            "waiting_for_local_time": self.waiting,
            "next_due": self.next_due.isoformat() if self.next_due else None,
            "time_zone_fallbacks": self.zone_fallbacks,
        }


async def snapshot(
    conn: asyncpg.Connection,
    *,
    campaign_id: int,
    node_timeout: float = Settings.model_fields["node_timeout_seconds"].default,
) -> Snapshot:
    """The campaign's snapshot; a node is alive when its heartbeat is younger than `node_timeout` seconds.
    NotFound without the campaign."""
    rows = await conn.fetch(*db.sql("campaign_status", campaign_id=campaign_id, node_timeout=node_timeout))
    if not rows:
        raise NotFound(f"no campaign with id {campaign_id}")
    counts = dict.fromkeys(STATES, 0)
    for r in rows:
        if r["send_status"] is not None:
            counts[r["send_status"]] = r["n"]
    failures: tuple[tuple[str, int], ...] = ()
    if counts["failed"]:
        failures = tuple(
            (r["reply"], r["n"])
            for r in await conn.fetch(*db.sql("sends_top_failures", campaign_id=campaign_id, top=TOP_FAILURES))
        )
    paused: tuple[tuple[str, str, str, int], ...] = ()
    if counts["queued"]:
        paused = tuple(
            (r["domain"], r["paused_until"].isoformat(timespec="seconds"), r["last_reply"] or "", r["n"])
            for r in await conn.fetch(*db.sql("domains_paused", campaign_id=campaign_id))
        )
    first = rows[0]
    return Snapshot(
        first["id"],
        first["name"],
        first["status"],
        counts,
        first["pause_reason"],
        failures,
        {name: first[name] for name in CAME_BACK},
        json.loads(first["reasons"]),
        paused,
        first["scheduled_for"],
        first["started_at"],
        first["now"],
        first["nodes"],
        first["unsubscribed"],
        first["estimate"] if first["status"] in NOT_STARTED else None,
        first["unsubscribe_required"],
        first["local_time"],
        first["waiting"],
        first["next_due"],
        first["zone_fallbacks"],
    )


def until(seconds: float) -> str:
    """`1 h 20 min`, `3 min`, `45 s`, `2 d 3 h`: how long until a start, to the nearest unit shown."""
    seconds = max(0, round(seconds))
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{seconds} s"
