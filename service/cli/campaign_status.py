"""`einmal campaign status ID [--json] [--follow]`: counts per send state, and a live progress bar.

The counts come from one GROUP BY over einmal.sends, read in the same statement as the
campaign's own status and the messages that came back (einmal.bounces, docs/design.md §8): send
rows with a hard bounce (bounced: a permanent failure, whatever its reason), with a soft one (soft
bounced), with a bounce that said neither (unclassified) and with a complaint (complained), then
per reason (service/inbound/reasons.py: no_mailbox, policy, …). --follow polls (twice a second on
a terminal, once a second into a pipe or file) until the campaign is sent or cancelled; a paused
campaign is shown as paused and still followed. The display itself (a live bar with log lines
above it on a terminal, plain lines elsewhere) is service/cli/progress.py.
"""

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO

import anyio
import asyncpg

from service import db
from service.cli import progress
from service.errors import UsageError
from service.settings import Settings

STATES = ("queued", "claimed", "sending", "sent", "suppressed", "failed", "in_doubt")
CAME_BACK = ("bounced", "soft_bounced", "unclassified", "complained")
DONE = ("sent", "suppressed", "failed", "in_doubt")
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

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return sum(self.counts[s] for s in DONE)

    def as_json(self) -> dict:
        return {"id": self.id, "status": self.status, "total": self.total, "counts": dict(self.counts),
                "pause_reason": self.pause_reason, **(self.came_back or dict.fromkeys(CAME_BACK, 0)),
                "reasons": dict(self.reasons or {}),
                "paused_domains": [{"domain": d, "until": until, "reply": reply, "queued": n}
                                   for d, until, reply, n in self.paused_domains],
                "failures": [{"reply": reply, "count": n} for reply, n in self.failures]}


async def fetch(conn: asyncpg.Connection, campaign_id: int) -> Snapshot:
    rows = await conn.fetch(db.query("campaign_status"), campaign_id)
    if not rows:
        raise UsageError(f"no campaign with id {campaign_id}")
    counts = dict.fromkeys(STATES, 0)
    for r in rows:
        if r["send_status"] is not None:
            counts[r["send_status"]] = r["n"]
    failures = ()
    if counts["failed"]:
        failures = tuple((r["reply"], r["n"]) for r in await conn.fetch(db.query("sends_top_failures"),
                                                                        campaign_id, TOP_FAILURES))
    paused = ()
    if counts["queued"]:
        paused = tuple((r["domain"], r["paused_until"].isoformat(timespec="seconds"), r["last_reply"] or "",
                        r["n"]) for r in await conn.fetch(db.query("domains_paused"), campaign_id))
    first = rows[0]
    return Snapshot(first["id"], first["name"], first["status"], counts, first["pause_reason"], failures,
                    {name: first[name] for name in CAME_BACK}, json.loads(first["reasons"]), paused)


def table(snap: Snapshot) -> str:
    width = max(len(str(snap.total)), 5)
    reason = f" ({snap.pause_reason})" if snap.status == "paused" and snap.pause_reason else ""
    lines = [f"campaign {snap.id} {snap.name!r}: {snap.status}{reason}"]
    lines += [f"  {state:<13}{snap.counts[state]:>{width}}" for state in STATES]
    lines.append(f"  {'total':<13}{snap.total:>{width}}")
    came_back = snap.came_back or dict.fromkeys(CAME_BACK, 0)
    lines.append("came back:")
    lines += [f"  {name.replace('_', ' '):<13}{came_back[name]:>{width}}" for name in CAME_BACK]
    if snap.reasons:
        lines.append("by reason:")
        lines += [f"  {name.replace('_', ' '):<15}{n:>{width}}" for name, n in sorted(snap.reasons.items())]
    if snap.paused_domains:
        lines.append("paused domains (their rows wait, then probes test them):")
        lines += [f"  {domain}  {n} queued, until {until}: {reply[:200]}"
                  for domain, until, reply, n in snap.paused_domains]
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


def summary(snap: Snapshot, rate: float) -> str:
    """`done 1200/5000 (sent 1000, suppressed 150, failed 40, in_doubt 10)   24%  850/s  ETA 4s`:
    done counts every finished state, each named."""
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


async def follow(conn: asyncpg.Connection, campaign_id: int, out: TextIO, *, tty: bool,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> Snapshot:
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


async def command(args: argparse.Namespace, settings: Settings, *, out: TextIO | None = None,
                  interval: float | None = None) -> int:
    out = out or sys.stdout
    async with db.connection(db.url(settings)) as conn:
        if args.follow:
            snap = await follow(conn, args.id, out, tty=out.isatty(), interval=interval)
        else:
            snap = await fetch(conn, args.id)
    print(json.dumps(snap.as_json()) if args.json else table(snap), file=out, flush=True)
    return 0
