"""`einmal campaign status ID [--json] [--follow]`: counts per send state, and a live progress bar.

The counts come from one GROUP BY over einmal.sends, read in the same statement as the
campaign's own status and the messages that came back (einmal.bounces, docs/design.md#inbound-events): send
rows with a hard bounce (bounced: a permanent failure, whatever its reason), with a soft one (soft
bounced), with a bounce that said neither (unclassified) and with a complaint (complained), then
per reason (service/inbound/reasons.py: no_mailbox, policy, …). --follow polls (twice a second on
a terminal, once a second into a pipe or file) until the campaign is sent or cancelled; a paused
campaign is shown as paused and still followed. The display itself (a live bar with log lines
above it on a terminal, plain lines elsewhere) is service/cli/progress.py.

What to do next is said where einmal knows it: rows in doubt (only an operator can settle them, with
`einmal reconcile`), and a campaign that is due or sending while no node is alive (nothing sends until one
runs: `einmal run`).
"""

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

import anyio
import asyncpg

from service import db
from service.cli import progress
from service.errors import UsageError
from service.settings import Settings

# `cancelled`: rows a cancel settled, stored as `failed` with the reply 'campaign cancelled' (the status words
# of einmal.sends are a contract: docs/operations/monitoring.md#watching-progress-with-sql); counted apart from the
# failures
STATES = ("queued", "claimed", "sending", "sent", "suppressed", "failed", "cancelled", "in_doubt")
CAME_BACK = ("bounced", "soft_bounced", "unclassified", "complained")
# reason sender (service/inbound/reasons.py): servers refused our return path, not these addresses
SENDER_NOTE = (
    "  sender: a configuration problem: servers refused our return path, not the recipients (check its "
    "domain's DNS and SPF)"
)
DONE = ("sent", "suppressed", "failed", "cancelled", "in_doubt")
NOT_STARTED = ("draft", "approved")
FINAL = ("sent", "cancelled")
TOP_FAILURES = 5
TTY_INTERVAL = 0.5
PIPE_INTERVAL = 1.0


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

    def as_json(self) -> dict:
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
        }


async def fetch(
    conn: asyncpg.Connection,
    campaign_id: int,
    node_timeout: float = Settings.model_fields["node_timeout_seconds"].default,
) -> Snapshot:
    """The campaign's snapshot; a node is alive when its heartbeat is younger than `node_timeout` seconds."""
    rows = await conn.fetch(db.query("campaign_status"), campaign_id, node_timeout)
    if not rows:
        raise UsageError(f"no campaign with id {campaign_id}")
    counts = dict.fromkeys(STATES, 0)
    for r in rows:
        if r["send_status"] is not None:
            counts[r["send_status"]] = r["n"]
    failures = ()
    if counts["failed"]:
        failures = tuple(
            (r["reply"], r["n"]) for r in await conn.fetch(db.query("sends_top_failures"), campaign_id, TOP_FAILURES)
        )
    paused = ()
    if counts["queued"]:
        paused = tuple(
            (r["domain"], r["paused_until"].isoformat(timespec="seconds"), r["last_reply"] or "", r["n"])
            for r in await conn.fetch(db.query("domains_paused"), campaign_id)
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
    )


def table(snap: Snapshot) -> str:
    width = max(len(str(snap.total)), 5)
    reason = f" ({snap.pause_reason})" if snap.status == "paused" and snap.pause_reason else ""
    doubt = f" ({snap.counts['in_doubt']} in doubt)" if snap.counts.get("in_doubt") else ""
    lines = [f"campaign {snap.id} {snap.name!r}: {snap.status}{reason}{doubt}"]
    if snap.schedule:
        lines.append(f"  {snap.schedule}")
    if snap.estimate is not None:
        lines.append(
            f"  about {snap.estimate} recipient{'' if snap.estimate == 1 else 's'} now (confirmed members "
            "of its lists, not suppressed)"
        )
    if snap.next_step:
        lines.append(f"  next: {snap.next_step}")
    if not snap.unsubscribe:
        lines.append("  made with --no-unsubscribe: it may go out without a one-click unsubscribe")
    lines += [f"  {state:<13}{snap.counts[state]:>{width}}" for state in STATES]
    lines.append(f"  {'total':<13}{snap.total:>{width}}")
    came_back = snap.came_back or dict.fromkeys(CAME_BACK, 0)
    lines.append("came back:")
    lines += [f"  {name.replace('_', ' '):<13}{came_back[name]:>{width}}" for name in CAME_BACK]
    lines.append(f"  {'unsubscribed':<13}{snap.unsubscribed:>{width}}")
    if snap.reasons:
        lines.append("by reason:")
        lines += [f"  {name.replace('_', ' '):<15}{n:>{width}}" for name, n in sorted(snap.reasons.items())]
        if snap.reasons.get("sender"):
            lines.append(SENDER_NOTE)
    if snap.paused_domains:
        lines.append("paused domains (their rows wait, then probes test them):")
        lines += [
            f"  {domain}  {n} queued, until {until}: {reply[:200]}" for domain, until, reply, n in snap.paused_domains
        ]
    if snap.failures:
        lines.append("top failure replies:")
        lines += [f"  {n:>{width}}  {reply[:200]}" for reply, n in snap.failures]
    return "\n".join(lines)


class Rate:
    """Messages done per second over the last few seconds of samples."""

    def __init__(self, window: float = 5.0):
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> float:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def until(seconds: float) -> str:
    """`1 h 20 min`, `3 min`, `45 s`, `2 d 3 h`: how long until a start, to the nearest unit shown."""
    seconds = max(0, round(seconds))
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{seconds} s"


def summary(snap: Snapshot, rate: float) -> str:
    """`done 1200/5000 (sent 1000, suppressed 150, failed 40, in_doubt 10)   24%  850/s  ETA 4s`:
    done counts every finished state, each named. A campaign not started yet says when it starts instead:
    `approved: scheduled for 2027-01-01T08:00:00+00:00 (in 1 h 20 min)`."""
    if snap.status in NOT_STARTED and not snap.total:
        return f"{snap.status}: {snap.schedule or 'not scheduled'}"
    done, total = snap.done, snap.total
    fraction = done / total if total else 0.0
    eta = duration((total - done) / rate) if rate > 0 else "--"
    states = ", ".join(f"{state} {snap.counts[state]}" for state in DONE if snap.counts[state] or state == "sent")
    line = f"done {done}/{total} ({states})  {fraction:4.0%}  {rate:.0f}/s  ETA {eta}"
    if snap.status == "paused":
        return f"{line}  paused: following until it is resumed and sent, or cancelled"
    return line if snap.status == "sending" else f"{line}  ({snap.status})"


def progress_line(snap: Snapshot, rate: float) -> str:
    """The line written into a pipe or file: `[####....] ` and the summary."""
    return f"[{progress.bar(snap.done, snap.total)}] {summary(snap, rate)}"


async def follow(
    conn: asyncpg.Connection,
    campaign_id: int,
    out: TextIO,
    *,
    tty: bool,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> Snapshot:
    """Show progress until the campaign is sent or cancelled; returns the last snapshot."""
    interval = interval if interval is not None else (TTY_INTERVAL if tty else PIPE_INTERVAL)
    rate = Rate()
    with progress.Display(out, tty=tty) as display:
        while True:
            snap = await fetch(conn, campaign_id)
            display.show(summary(snap, rate.add(clock(), snap.done)), snap.done, snap.total)
            if snap.status in FINAL:
                return snap
            await sleep(interval)


async def command(
    args: argparse.Namespace, settings: Settings, *, out: TextIO | None = None, interval: float | None = None
) -> int:
    out = out or sys.stdout
    async with db.connection(db.url(settings)) as conn:
        if args.follow:
            snap = await follow(conn, args.id, out, tty=out.isatty(), interval=interval)
        else:
            snap = await fetch(conn, args.id, settings.node_timeout_seconds)
    print(json.dumps(snap.as_json()) if args.json else table(snap), file=out, flush=True)
    return 0
