"""Two accounts on two relays against one account on one (docs/design.md#accounts): the same messages, one
node at einmal's defaults, timed from the approval to the last campaign's `sent`. Each account sends through
its own relay, a smtp-sink of its own, so that each sink's count also shows whose mail went where."""

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import asyncpg

from bench import database
from bench.send import _stop, body, node_env, start_node
from bench.sink import Sink
from service.campaigns import transitions


@dataclass
class Accounts:
    accounts: int
    messages: int
    seconds: float  # approval -> the last campaign's sent_at; the time limit when not all were sent
    at_sinks: list[int]  # messages each account's relay received, in the accounts' order
    sent: bool

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


async def _seed(dsn: str, sinks: list[Sink], messages: int) -> list[int]:
    """Account i with messages/len(sinks) subscribers, a draft campaign and relay i (sink i): the campaigns."""
    conn = await asyncpg.connect(dsn)
    try:
        ids = []
        for i, sink in enumerate(sinks):
            ids.append(
                await conn.fetchval(
                    database.sql("seed_account_campaign"),
                    f"account{i}",
                    messages // len(sinks),
                    body(),
                    f"relay{i}",
                    f"smtp://127.0.0.1:{sink.port}",
                )
            )
        await conn.execute("VACUUM ANALYZE")
        return ids
    finally:
        await conn.close()


async def run(server: str, sinks: list[Sink], *, messages: int, tick: float, timeout: float) -> Accounts:
    """One node sending one campaign of each account, account i through sinks[i]."""
    name = f"einmal_bench_{os.getpid()}_accounts{len(sinks)}"
    dsn = await database.fresh(server, name)
    logs = Path(tempfile.mkdtemp(prefix="einmal-bench-accounts-"))
    proc = None
    try:
        campaigns = await _seed(dsn, sinks, messages)
        # the environment's relay is a port nothing listens on: a message that took it would not arrive
        env = node_env(dsn, 9, tick)
        proc = start_node(env, logs / "node.log")
        conn = await asyncpg.connect(dsn)
        try:
            with anyio.fail_after(60):
                while await conn.fetchval("SELECT count(*) FROM einmal.nodes") < 1:
                    if proc.poll() is not None:
                        raise RuntimeError(f"the node exited at start; see {logs}")
                    await anyio.sleep(0.05)
            bases = [sink.arm() for sink in sinks]
            approved_wall, approved = time.time(), time.monotonic()
            for campaign_id in campaigns:
                await transitions.transition(conn, verb="approve", campaign_id=campaign_id)
            sent = False
            while time.monotonic() < approved + timeout:
                last = await conn.fetchval(
                    "SELECT CASE WHEN bool_and(status = 'sent') THEN max(sent_at) END FROM einmal.campaigns "
                    "WHERE id = ANY($1)",
                    campaigns,
                )
                if last is not None:
                    seconds, sent = last.timestamp() - approved_wall, True
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"the node exited while sending; see {logs}")
                await anyio.sleep(0.1)
            else:
                seconds = time.monotonic() - approved
            for sink, base in zip(sinks, bases, strict=True):
                sink.wait_messages(base + messages // len(sinks), timeout=5)
        finally:
            await conn.close()
        code = await _stop(proc)
        if sent and not code:
            shutil.rmtree(logs, ignore_errors=True)
        return Accounts(
            len(sinks), messages, seconds, [s.messages - b for s, b in zip(sinks, bases, strict=True)], sent
        )
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        await database.drop(server, name)


async def compare(
    server: str, sink_path: str, *, messages: int, tick: float, rounds: int, say=print
) -> tuple[Accounts, Accounts]:
    """One account on one relay, then two on two, the same messages in all, `rounds` times in turn: the fastest
    run of each (a run slowed by the machine's other work says nothing of einmal)."""
    timeout = max(120.0, messages / 120)
    ones, twos = [], []
    with Sink(sink_path) as first, Sink(sink_path) as second:
        say(f"accounts: 1 account on 1 relay, then 2 on 2, {messages:,} recipients, 1 node, best of {rounds}")
        for _ in range(rounds):
            ones.append(await run(server, [first], messages=messages, tick=tick, timeout=timeout))
            twos.append(await run(server, [first, second], messages=messages, tick=tick, timeout=timeout))
            for result in (ones[-1], twos[-1]):
                say(f"  {result.accounts} account(s): {result.rate:,.0f} msg/s; at their relays {result.at_sinks}")
    return max(ones, key=lambda r: r.rate), max(twos, key=lambda r: r.rate)
