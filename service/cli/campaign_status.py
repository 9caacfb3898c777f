"""`einmal campaign status ID [--json] [--follow]`: counts per send state, and a live progress bar.

The snapshot is service/campaigns/status.py's; this prints it. --follow polls (twice a second on
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
from typing import TextIO

import anyio
import asyncpg

from service import db
from service.campaigns.status import CAME_BACK, DONE, FINAL, NOT_STARTED, STATES, Snapshot, snapshot
from service.cli import progress
from service.settings import Settings

# reason sender (service/smtp/reasons.py): servers refused our return path, not these addresses
SENDER_NOTE = (
    "  sender: a configuration problem: servers refused our return path, not the recipients (check its "
    "domain's DNS and SPF)"
)
TTY_INTERVAL = 0.5
PIPE_INTERVAL = 1.0


def table(snap: Snapshot) -> str:
    width = max(len(str(snap.total)), 5)
    reason = f" ({snap.pause_reason})" if snap.status == "paused" and snap.pause_reason else ""
    doubt = f" ({snap.counts['in_doubt']} in doubt)" if snap.counts.get("in_doubt") else ""
    lines = [f"campaign {snap.id} {snap.name!r}: {snap.status}{reason}{doubt}"]
    if snap.schedule:
        lines.append(f"  {snap.schedule}")
    if snap.local:
        lines.append(f"  {snap.local}")
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
            snap = await snapshot(conn, campaign_id=campaign_id)
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
            snap = await snapshot(conn, campaign_id=args.id, node_timeout=settings.node_timeout_seconds)
    print(json.dumps(snap.as_json()) if args.json else table(snap), file=out, flush=True)
    return 0
