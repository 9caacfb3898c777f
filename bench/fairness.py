"""Two accounts sharing one node's rate (docs/design.md#sending-budget "Accounts take turns"): account B sends a
campaign and posts messages to /api/v1/messages one at a time, every SPACING seconds, first alone, then while
account A floods the node with FLOOD messages (POST /api/v1/messages/batch, 100 a call). One node (`einmal run`
with its HTTP surface) at EINMAL_RATE_LIMIT=RATE, Postfix's smtp-sink, one run. Each message's latency is from
just before its POST to its row's `sent_at`; B's rate is its campaign's rows and its messages sent during the
phase over its length (B's share holds both).
Prints B's message p99 and B's campaign rate while A floods, each as a ratio of B alone, against the targets: p99
at most 2 x alone, the campaign at least its fair share (half the rate, two accounts having work).

`python -m bench.fairness [--flood N] [--rate R]` (default 600 messages at 20/s: the flood must outlast its
POSTs); `make bench` runs it last."""

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import asyncpg
import httpx

from bench import database, report
from bench.messages import Figures
from bench.send import _stop, body, latencies, node_env, node_ready, post_messages, sent_rows, start_node
from bench.sink import Sink, Unavailable, ensure_tools, free_port
from service.accounts import keys
from service.campaigns import transitions

SPACING = 0.25  # seconds between two of B's messages' POSTs
MESSAGES = 20  # B's messages in each phase
TARGET_RATIO, TARGET_SHARE = 2.0, 1.0


@dataclass
class Fairness:
    alone: list[float]  # seconds, B's messages' latencies with B alone
    flooded: list[float]  # the same while A floods
    alone_rate: float  # B's campaign and messages, a second, alone
    flooded_rate: float  # the same while A floods
    flood_rate: float  # A's messages a second while B's phase ran
    rate: float
    flood: int

    def lines(self) -> list[str]:
        alone99, flooded99 = Figures.p(self.alone, 0.99), Figures.p(self.flooded, 0.99)
        ratio = flooded99 / alone99 if alone99 else float("inf")
        share = self.flooded_rate / (self.rate / 2)
        return [
            f"fairness, EINMAL_RATE_LIMIT={self.rate:g}, A floods {self.flood} messages:",
            f"  B's message p99: alone {alone99 * 1000:.0f} ms, A flooding {flooded99 * 1000:.0f} ms"
            f" = {ratio:.2f} x alone (target <= {TARGET_RATIO:g}): {'PASS' if ratio <= TARGET_RATIO else 'MISS'}",
            f"  B's campaign and messages: alone {self.alone_rate:.1f}/s, A flooding {self.flooded_rate:.1f}/s"
            f" = {self.flooded_rate / self.alone_rate if self.alone_rate else 0:.2f} x alone,"
            f" {share:.2f} x its fair share {self.rate / 2:g}/s (target >= {TARGET_SHARE:g}):"
            f" {'PASS' if share >= TARGET_SHARE * 0.95 else 'MISS'}",
            f"  A's flood meanwhile {self.flood_rate:.1f}/s",
        ]

    def rows(self) -> list[str]:
        alone99, flooded99 = Figures.p(self.alone, 0.99), Figures.p(self.flooded, 0.99)
        ratio = flooded99 / alone99 if alone99 else float("inf")
        share = self.flooded_rate / (self.rate / 2)
        return [
            report.row(
                f"B's message p99 while A floods {self.flood}",
                f"{flooded99 * 1000:.0f} ms = {ratio:.2f} × alone",
                "<= 2 × alone",
                ratio <= TARGET_RATIO,
            ),
            report.row(
                "B's campaign + messages while A floods",
                f"{self.flooded_rate:.1f}/s = {share:.2f} × fair share",
                ">= fair share",
                share >= TARGET_SHARE * 0.95,
            ),
        ]


async def _sent(conn: asyncpg.Connection, campaign_id: int) -> int:
    return await conn.fetchval(
        "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'sent'", campaign_id
    )


async def _phase(client: httpx.AsyncClient, conn: asyncpg.Connection, campaign_id: int, tag: str):
    """Approve B's campaign, wait for it to send, post MESSAGES of B's; their latencies and the campaign's rate."""
    await transitions.transition(conn, verb="approve", campaign_id=campaign_id)
    with anyio.fail_after(120):
        while await _sent(conn, campaign_id) < 5:
            await anyio.sleep(0.05)
    at, count = time.monotonic(), await _sent(conn, campaign_id)
    began = await post_messages(client, MESSAGES, tag, SPACING)
    seconds = time.monotonic() - at
    rows = await sent_rows(conn, began)
    mine = sum(1 for r in rows if r["sent_at"] is not None and r["sent_at"].timestamp() <= time.time())
    rate = (await _sent(conn, campaign_id) - count + mine) / seconds  # B's campaign and messages
    waited = await latencies(conn, began)
    await transitions.transition(conn, verb="pause", campaign_id=campaign_id)
    return waited, rate


async def measure(server: str, sink: Sink, *, flood: int = 600, rate: float = 20.0, tick: float = 60) -> Fairness:
    name = f"einmal_bench_{os.getpid()}_fairness"
    dsn = await database.fresh(server, name)
    logs = Path(tempfile.mkdtemp(prefix="einmal-bench-fairness-"))
    port = free_port()
    proc = None
    recipients = int(rate * (MESSAGES * SPACING + 10) * 2)  # more than either phase sends
    try:
        conn = await asyncpg.connect(dsn)
        try:
            first = await conn.fetchval(database.sql("seed_campaign"), recipients, body())
            second = await conn.fetchval(
                "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)"
                " SELECT account_id, 'bench 2', subject, from_address, body_text, list_ids FROM einmal.campaigns"
                " WHERE id = $1 RETURNING id",
                first,
            )
            await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('flood')")
            await conn.execute("VACUUM ANALYZE")
            b_key = await keys.mint_for(conn, account="bench", name="bench", scope="write")
            a_key = await keys.mint_for(conn, account="flood", name="flood", scope="write")
            env = node_env(dsn, sink.port, tick) | {
                "EINMAL_HTTP_ADDRESS": f"127.0.0.1:{port}",
                "EINMAL_RATE_LIMIT": str(rate),
            }
            proc = start_node(env, logs / "node.log")
            base = f"http://127.0.0.1:{port}"
            async with (
                httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {b_key}"}) as b,
                httpx.AsyncClient(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {a_key}"}) as a,
            ):
                await node_ready(proc, b, base, logs)
                alone, alone_rate = await _phase(b, conn, first, "alone")
                for call in range(0, flood, 100):
                    items = [
                        {
                            "to": f"a{call + i}@flood.example",
                            "subject": "Flood",
                            "text": "x",
                            "from": "shop@example.com",
                        }
                        for i in range(min(100, flood - call))
                    ]
                    (await a.post("/messages/batch", json={"messages": items}, timeout=60)).raise_for_status()
                flood_sent = (
                    "SELECT count(*) FROM einmal.sends WHERE campaign_id >= 4503599627370496"
                    " AND email LIKE '%@flood.example' AND status = 'sent'"
                )
                at, a_before = time.monotonic(), await conn.fetchval(flood_sent)
                flooded, flooded_rate = await _phase(b, conn, second, "flooded")
                flood_rate = (await conn.fetchval(flood_sent) - a_before) / (time.monotonic() - at)
        finally:
            await conn.close()
        return Fairness(alone, flooded, alone_rate, flooded_rate, flood_rate, rate, flood)
    finally:
        if proc is not None:
            await _stop(proc)
        await database.drop(server, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=600, help="A's messages (default 600)")
    parser.add_argument("--rate", type=float, default=20.0, help="EINMAL_RATE_LIMIT (default 20)")
    args = parser.parse_args(argv)
    if not 100 <= args.flood <= 100_000 or not 2 <= args.rate <= 10_000:
        parser.error("--flood 100 to 100000, --rate 2 to 10000")
    try:
        sink_path, _ = ensure_tools(print)
    except Unavailable as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 3
    server, _ = database.server_url()
    with Sink(sink_path) as sink:
        figures = anyio.run(lambda: measure(server, sink, flood=args.flood, rate=args.rate))
    for line in figures.lines():
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
