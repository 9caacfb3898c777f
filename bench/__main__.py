"""einmal's throughput benchmark, in one run on one machine:

1. the wire's limit: Postfix's smtp-source -> smtp-sink, 10 persistent sessions, ~4 KB messages;
2. einmal end to end, one node (`einmal run`) at einmal's defaults (any EINMAL_ variable of the
   bench's environment is passed to the nodes), to the same smtp-sink, timed from the approval
   to the campaign's `sent`; its database cost: transactions, and PostgreSQL's CPU per message
   against today's engine (bench/cpu.py);
3. the same with two nodes;
4. one node again, unsigned and DKIM-signed with Ed25519 and RSA-2048, interleaved (bench/signing.py);
5. the recipient build of 1,000,000 subscribers against one bare INSERT … SELECT DISTINCT ON;
6. a relay that answers the end of DATA after 0-100 ms: one node at 20 connections against a
   pool of 20 aiosmtplib connections (bench/latency.py, bench/relay.py);
7. the render cost per message, in this process (bench/render.py);
8. the parse cost of a bounce per message, over the real samples, in this process (bench/bounces.py);
9. subscriber upserts through the HTTP API (`einmal serve`, 50 clients) against a bare asyncpg loop at 50
   connections, and the API's p99 latency; beside them the floor, a bare ASGI app on einmal's server parts
   running the bare statement per request (bench/api.py, bench/floor.py);
10. one node sending two accounts' campaigns, each through its own relay, against one account's on one
    relay, the same messages, best of three runs in turn (bench/accounts.py);
11. subscriber upserts in batches of 1,000 through the HTTP API (`POST /api/v1/subscribers/batch`, `einmal
    serve`, 4 clients) against the bare asyncpg loop of 9 run again beside it (bench/batch.py);
12. transactional messages' latency from POST /api/v1/messages to the relay's 250, idle and while one node
    sends a campaign of 100,000 recipients, cancelled once measured (bench/messages.py; alone:
    `python -m bench.messages`);
13. the sequence sweep's cost per tick at 1,000,000 members with 1 % due, against the same number due in a list
    fifty times smaller (bench/sequences.py; --quick: 20,000 members);
14. webhook deliveries per second of one node's actor at the shipped defaults, 5,000 events for one endpoint of
    an always-200 receiver on loopback, against the same signed POSTs from an httpx client at the actor's
    concurrency for one endpoint (bench/webhooks.py; --quick: 1,000 events);
15. two accounts on one node at EINMAL_RATE_LIMIT=20: B's message p99 and B's campaign rate while A floods 600
    messages, each against B alone (bench/fairness.py; alone: `python -m bench.fairness`);
16. the recipient build of a campaign narrowed by a segment, and of one taking every member, over --subscribers
    (1,000,000), against the bare list build of the same run (bench/segments.py; alone: `python -m bench.segments`);
17. the outbound webhook trigger's server CPU per row sent of an account with an endpoint, over the trigger disabled,
    in a database of its own (bench/webhook_trigger.py);
18. the claim of a campaign whose 1,000,000 rows wait for their local send time but 20,000 due, against a campaign
    of the same due rows alone (bench/local_times.py; --quick: 100,000 rows; alone: `python -m bench.local_times`).
19. the console's pages' p95 over --subscribers (1,000,000) with a campaign of 100,000 sending, 4 signed-in
    clients walking every page (bench/console.py; --quick: 5,000 sending; alone: `python -m bench.console`).
20. the engagement reads (a campaign's counts and clicks, a template's counts, a subscriber's last activity) of a
    campaign of 1,000,000 send rows, each against 10 ms, beside the count by state they spare (bench/engagement.py;
    --quick: 20,000 rows; alone: `python -m bench.engagement`).

Each figure is printed next to its target with PASS or MISS. Exit 0 either way; 1 when the
bench could not run, 3 when smtp-sink is missing and cannot be installed.
"""

import argparse
import os
import sys
import time

import anyio
import asyncpg

from bench import (
    accounts,
    api,
    batch,
    bounces,
    build,
    console,
    database,
    engagement,
    fairness,
    latency,
    local_times,
    messages,
    render,
    report,
    segments,
    send,
    sequences,
    signing,
    webhook_trigger,
    webhooks,
)
from bench.sink import Sink, Unavailable, ensure_tools, wire
from service.errors import EinmalError

TIME_BUDGET = 540  # seconds: einmal's recipient build is stopped when the run reaches it


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message}\n")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, help="messages per measurement (default 20000; --big: 1000000)")
    parser.add_argument(
        "--subscribers",
        type=int,
        default=1_000_000,
        help="subscribers of the recipient-build benchmark (default 1000000)",
    )
    parser.add_argument("--quick", action="store_true", help="a few thousand messages and 20000 subscribers, for CI")
    parser.add_argument(
        "--big", action="store_true", help="only the 1,000,000-recipient campaign on one node: its peak RSS (long)"
    )
    parser.add_argument("--tick", type=float, help="EINMAL_TICK_SECONDS of the nodes (default 60; --quick: 5)")
    args = parser.parse_args(argv)
    if args.messages is None:
        args.messages = 1_000_000 if args.big else 3_000 if args.quick else 20_000
    if args.quick:
        args.subscribers = min(args.subscribers, 20_000)
    if args.tick is None:
        args.tick = 5.0 if args.quick else 60.0
    if args.messages < 100 or args.subscribers < 1_000 or not 0 < args.tick <= 3600:
        parser.error("--messages must be at least 100, --subscribers at least 1000, --tick in (0, 3600]")
    return args


def say(line: str) -> None:
    print(line, flush=True)


async def measure(args: argparse.Namespace, source: str, sink: Sink, began: float) -> None:
    server, where = database.server_url()
    header = report.Header(
        args.messages, where, await database.version(server), os.cpu_count() or 0, args.tick, os.getloadavg()[0]
    )
    if args.big:
        say(f"big: one node, a {args.messages:,}-recipient campaign; RSS sampled while it goes out")
        run = await send.campaign(
            server, sink, nodes=1, messages=args.messages, tick=args.tick, timeout=3 * 3600, sample_rss=True, say=say
        )
        report.big(header, run, say)
        return
    say(f"wire: smtp-source -> smtp-sink, {args.messages:,} messages, best of 3")
    wires = [wire(source, sink, args.messages) for _ in range(3)]
    for seconds, sessions in wires:
        say(f"  {args.messages / seconds:,.0f} msg/s ({seconds:.2f} s, {sessions} sessions)")
    runs = []
    for nodes in (1, 2):
        say(f"einmal: {nodes} node{'s' if nodes > 1 else ''}, {args.messages:,} recipients")
        runs.append(
            await send.campaign(
                server,
                sink,
                nodes=nodes,
                messages=args.messages,
                tick=args.tick,
                timeout=max(120.0, args.messages / 120),
                say=say,
            )
        )
        say(f"  {report.run_line(runs[-1])}")
    signed, verified = await signing.runs(server, sink, messages=args.messages, tick=args.tick, say=say)
    say(f"recipient build: {args.subscribers:,} subscribers")
    built = await build.compare(server, args.subscribers, deadline=began + TIME_BUDGET)
    say(f"  seeded in {built.seed_seconds:.1f} s; {built.rows:,} recipients")
    relayed = await latency.measure(server, relay_messages(args), args.tick, say)
    rounds = 1 if args.quick else 3
    one, two = await accounts.compare(server, sink.path, messages=args.messages, tick=args.tick, rounds=rounds, say=say)
    report.default(header, min(s for s, _ in wires), runs, built, say, render.figures())
    report.dkim(signed.pop("unsigned"), signed, say, verified)
    report.latency(relayed, say)
    report.accounts(one, two, say)
    report.bounce_parse(*bounces.microseconds(rounds=2 if args.quick else 5), say)
    report.api_upserts(await api.measure(server, 1_000 if args.quick else 10_000), say)
    batch.report(await batch.measure(server, 4_000 if args.quick else 20_000), say)
    quiet = lambda _line: None  # noqa: E731  (the table is being printed: only its rows)
    bulk = 20_000 if args.quick else messages.RECIPIENTS  # --quick: it may end first, and says so
    sent = await messages.measure(server, sink, recipients=bulk, messages=200, tick=args.tick, say=quiet)
    for line in sent.rows():
        say(line)
    sequences.report(await sequences.measure(server, 20_000 if args.quick else 1_000_000, 1.0, 500), say)
    webhooks.report(await webhooks.measure(server, 1_000 if args.quick else 5_000), say)
    segments.report(await segments.measure(server, args.subscribers), say)
    report.webhook_trigger(await trigger_cost(server), say)
    local_times.report(await local_times.measure(server, 100_000 if args.quick else 1_000_000, 20_000), say)
    for line in (await fairness.measure(server, sink, flood=600, rate=20.0, tick=args.tick)).rows():
        say(line)
    sending = 5_000 if args.quick else 100_000
    console.report(
        await console.measure(server, args.subscribers, min(sending, args.subscribers), 5 if args.quick else 20), say
    )
    engaged = 20_000 if args.quick else 1_000_000
    _, figures, _ = await engagement.measure(server, engaged)
    engagement.report(engaged, figures, say)


async def trigger_cost(server: str) -> float | None:
    """bench/webhook_trigger.py in a fresh database: the trigger's CPU µs per row (its own lines not printed)."""
    name = f"einmal_bench_{os.getpid()}_trigger"
    try:
        return await webhook_trigger.measure(await database.fresh(server, name), say=lambda _line: None)
    finally:
        await database.drop(server, name)


def relay_messages(args: argparse.Namespace) -> int:
    """Messages to the relay that takes 0-100 ms: ~400 msg/s at best, so 5,000 at most (~15 s for the pool)."""
    return max(100, min(5_000, args.messages // 4))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    began = time.monotonic()
    try:
        sink_path, source = ensure_tools(say)
    except Unavailable as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 3
    try:
        with Sink(sink_path) as sink:
            anyio.run(measure, args, source, sink, began)
    except (RuntimeError, OSError, TimeoutError, asyncpg.PostgresError, EinmalError) as exc:
        print(f"bench: could not run: {exc}", file=sys.stderr)
        return 1
    say(f"bench took {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
