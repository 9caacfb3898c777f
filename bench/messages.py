"""Transactional messages against bulk (docs/design.md#messages): one node (`einmal run` with its HTTP surface, at
einmal's defaults) and Postfix's smtp-sink; messages POSTed to /api/v1/messages one at a time, every
SPACING seconds, first with nothing else to send, then while the node sends a large campaign at full speed; each
message's latency is from just before its POST to its row's `sent_at` (the statement that recorded the relay's
250: an upper bound of the time to the 250). Prints p50 and p99 of each phase and their ratio, against the
target: p99 while the campaign sends at most 2 x idle and at most 1 s.

The campaign must go on for the whole busy phase, or the last messages of the phase would be measured idle: it
is large (100,000 recipients, about 20 s at full speed here, against the phase's 200 x SPACING = 10 s and more),
and cancelled once the phase is over rather than waited for. A campaign that ended before the phase did makes
the figure a MISS, whatever its ratio.

`python -m bench.messages [--recipients N] [--messages K]` (default 100,000 recipients, 200 messages); `make
bench` runs it at these defaults."""

import argparse
import os
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
import asyncpg
import httpx

from bench import database, report
from bench.send import _stop, body, latencies, node_env, node_ready, post_messages, start_node
from bench.sink import Sink, Unavailable, ensure_tools, free_port
from service.accounts import keys
from service.campaigns import transitions
from service.errors import Conflict

SPACING = 0.05  # seconds between two messages' POSTs
TARGET_RATIO, TARGET_P99 = 2.0, 1.0
RECIPIENTS = 100_000  # the campaign: it must outlast the busy phase at any speed this machine reaches


@dataclass
class Figures:
    idle: list[float]  # seconds, each message's latency with nothing else to send
    busy: list[float]  # the same while the campaign sends
    recipients: int
    campaign_rate: float  # the campaign's messages a second while the busy messages went out
    throughout: bool = True  # the campaign was still sending when the last busy message was recorded

    def verdict(self, ratio: float, p99: float) -> bool:
        return self.throughout and ratio <= TARGET_RATIO and p99 <= TARGET_P99

    @staticmethod
    def p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")

    def rows(self) -> list[str]:
        """The figures as rows of the bench's table (bench/report.py)."""
        idle50, idle99 = self.p(self.idle, 0.5), self.p(self.idle, 0.99)
        busy50, busy99 = self.p(self.busy, 0.5), self.p(self.busy, 0.99)
        ratio = busy99 / idle99 if idle99 else float("inf")
        return [
            report.row(
                f"message POST -> 250, idle ({len(self.idle)})",
                f"p50 {idle50 * 1000:.0f} ms, p99 {idle99 * 1000:.0f} ms",
                "(the reference)",
                None,
            ),
            report.row(
                f"message POST -> 250, {self.recipients:,} bulk ({len(self.busy)})",
                f"p50 {busy50 * 1000:.0f} ms, p99 {busy99 * 1000:.0f} ms = {ratio:.2f} × idle"
                + ("" if self.throughout else " (the campaign ended first)"),
                "p99 <= 2 × idle",
                self.throughout and ratio <= TARGET_RATIO,
            ),
            report.row(
                "message POST -> 250 p99 during bulk",
                f"{busy99 * 1000:.0f} ms",
                f"<= {TARGET_P99 * 1000:.0f} ms",
                busy99 <= TARGET_P99,
            ),
        ]

    def lines(self) -> list[str]:
        idle50, idle99 = self.p(self.idle, 0.5), self.p(self.idle, 0.99)
        busy50, busy99 = self.p(self.busy, 0.5), self.p(self.busy, 0.99)
        ratio = busy99 / idle99 if idle99 else float("inf")
        verdict = "PASS" if self.verdict(ratio, busy99) else "MISS"
        ended = "" if self.throughout else " (the campaign ended before the last busy message: not a busy figure)"
        return [
            f"messages, POST -> 250 recorded, {len(self.idle)} idle and {len(self.busy)} during a "
            f"{self.recipients:,}-recipient campaign at {self.campaign_rate:,.0f} msg/s:",
            f"  idle:   p50 {idle50 * 1000:6.0f} ms, p99 {idle99 * 1000:6.0f} ms",
            f"  busy:   p50 {busy50 * 1000:6.0f} ms, p99 {busy99 * 1000:6.0f} ms",
            f"  p99 ratio {ratio:.2f} (target <= {TARGET_RATIO:g} and p99 <= {TARGET_P99 * 1000:.0f} ms): {verdict}"
            + ended,
            f"  p50 ratio {busy50 / idle50 if idle50 else float('inf'):.2f}",
        ]


async def measure(server: str, sink: Sink, *, recipients: int, messages: int, tick: float = 60, say=print) -> Figures:
    name = f"einmal_bench_{os.getpid()}_messages"
    dsn = await database.fresh(server, name)
    logs = Path(tempfile.mkdtemp(prefix="einmal-bench-messages-"))
    port = free_port()
    proc = None
    try:
        conn = await asyncpg.connect(dsn)
        try:
            campaign_id = await conn.fetchval(database.sql("seed_campaign"), recipients, body())
            await conn.execute("VACUUM ANALYZE")
            key = await keys.mint_for(conn, account="bench", name="bench", scope="write")
            env = node_env(dsn, sink.port, tick) | {"EINMAL_HTTP_ADDRESS": f"127.0.0.1:{port}"}
            proc = start_node(env, logs / "node.log")
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(
                base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=30
            ) as client:
                await node_ready(proc, client, base, logs)
                say(f"  {messages} messages with nothing else to send")
                idle = await latencies(conn, await post_messages(client, messages, "idle", SPACING))
                say(f"  a {recipients:,}-recipient campaign approved; {messages} messages while it sends")
                start = sink.arm()
                await transitions.transition(conn, verb="approve", campaign_id=campaign_id)
                with anyio.fail_after(120):
                    while sink.messages < start + max(100, recipients // 50):  # at full speed first
                        await anyio.sleep(0.01)
                at, count = time.monotonic(), sink.messages
                busy = await latencies(conn, await post_messages(client, messages, "busy", SPACING))
                rate = (sink.messages - count) / (time.monotonic() - at)
                # every busy message recorded: was the campaign still going? (its rows all sent: it was not)
                throughout = sink.messages < start + recipients
                if not throughout:
                    say(
                        f"  the campaign ended before the last busy message (use more --recipients than {recipients:,})"
                    )
            with suppress(Conflict):  # one that ended first is sent: nothing to cancel
                await transitions.transition(conn, verb="cancel", campaign_id=campaign_id, reason="the bench is done")
        finally:
            await conn.close()
        return Figures(idle, busy, recipients, rate, throughout)
    finally:
        if proc is not None:
            await _stop(proc)
        await database.drop(server, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.messages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipients", type=int, default=RECIPIENTS, help="the campaign's size (default 100000)")
    parser.add_argument("--messages", type=int, default=200, help="messages in each phase (default 200)")
    args = parser.parse_args(argv)
    if args.recipients < 1_000 or not 10 <= args.messages <= 10_000:
        parser.error("--recipients at least 1000, --messages 10 to 10000")
    try:
        sink_path, _ = ensure_tools(print)
    except Unavailable as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 3
    server, _ = database.server_url()
    with Sink(sink_path) as sink:
        figures = anyio.run(
            lambda: measure(server, sink, recipients=args.recipients, messages=args.messages, say=print)
        )
    for line in figures.lines():
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
