"""The failover run: a campaign sent by two real node processes through a URL naming a primary and its
pg_basebackup standby (`…@A,B/einmal?target_session_attrs=read-write`), the database taken away
half-way, and a verdict on what every recipient received against what docs/design.md#in-doubt-bound and #liveness
promise.

    python -m tests.support.failover [--recipients 15000] [--rate 500] [--scenarios sync,async,...]
                                     [--lag 2] [--outage 60] [--journal-seconds 10] [--time-limit 240]

Scenarios, each on a fresh primary and standby of its own (PostgreSQL 18 from the embedded package, on
loopback), each with one verdict line:

    sync               synchronous_standby_names = '*'; SIGKILL to the primary's postmaster half-way, the
                       standby promoted 3 s later: 0 duplicates, 0 lost, 0 in doubt
    async              asynchronous, the standby caught up at the kill: 0 duplicates, 0 lost, 0 in doubt
    async-lag          asynchronous, the standby receiving nothing for --lag seconds before the kill (a
                       relay holds what the primary sends it, while its replies pass: the primary sees its
                       replay fall behind), inside the journal's window: the same promise
    async-lag-outside  the same with a lag of the journal's window + 5 s: every duplicate and every row
                       left in doubt is accounted for, by its own line and einmal.lost_outcomes row or by
                       the one line that says the standby was further behind than the journal covers
    outage             synchronous; the primary stopped for --outage seconds, then started again, no node
                       process restarted: 0 duplicates, 0 lost, 0 in doubt
    fixed-id           synchronous; nodes with a fixed EINMAL_NODE_ID, one SIGKILLed half-way and started
                       again with the same id: 0 duplicates, 0 lost, in doubt at most its connections
                       (docs/design.md#in-doubt-bound)

Bounded in time (--time-limit for each scenario); it stops by itself. Exit 0 when every verdict passes.
"""

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from tests.support.chaos import Nodes, prepare, tally
from tests.support.pgcluster import PgCluster, pair_url
from tests.support.pipeline import message_id, node_env
from tests.support.relay import Relay
from tests.support.smtp_servers import FaultServer

SCENARIOS = ("sync", "async", "async-lag", "async-lag-outside", "outage", "fixed-id")
CONNECTIONS = 20  # einmal's default EINMAL_SMTP_CONNECTIONS: a SIGKILLed node leaves at most this many in doubt
SLACK = 1.0  # seconds: a message is recorded (and journalled) a moment after the server has it

LOST_LINE = "kept in einmal.lost_outcomes"
REWRITE_LINE = re.compile(
    r"after the failover: wrote again (\d+) outcome\(s\) the new primary had lost, "
    r"(\d+) were there"
)
LAG_LINE = re.compile(r"the standby was ([\d.]+)s behind at the last check before the failover")


@dataclass
class Scenario:
    name: str
    recipients: int = 15_000
    rate: float = 500  # EINMAL_RATE_LIMIT, all nodes together: the campaign lasts recipients / rate seconds
    nodes: int = 2
    lag: float = 0.0  # seconds the standby receives nothing before the kill
    outage: float = 60.0
    promote_after: float = 3.0
    journal_seconds: float = 10.0  # EINMAL_JOURNAL_SECONDS
    tick: float = 1.0
    node_timeout: float = 30.0  # einmal's default
    time_limit: float = 240.0

    @property
    def sync(self) -> bool:
        return self.name in ("sync", "outage", "fixed-id")

    @property
    def in_doubt_bound(self) -> int:
        return CONNECTIONS if self.name == "fixed-id" else 0


def scenario(name: str, *, lag: float | None = None, **settings) -> Scenario:
    """Scenario `name` with `settings`. Its lag: `lag`, else 2 s for async-lag and the journal's window + 5 s
    for async-lag-outside; none for the others."""
    assert name in SCENARIOS, name
    s = Scenario(name, **settings)
    if name.startswith("async-lag"):
        s.lag = lag if lag is not None else 2.0 if name == "async-lag" else s.journal_seconds + 5
    return s


PROMISES = {
    "sync": "0 duplicates, 0 lost, 0 in doubt",
    "async": "0 duplicates, 0 lost, 0 in doubt",
    "async-lag": "0 duplicates, 0 lost, 0 in doubt",
    "async-lag-outside": "0 lost; every duplicate and row in doubt logged and counted",
    "outage": "0 duplicates, 0 lost, 0 in doubt",
    "fixed-id": f"0 duplicates, 0 lost, in doubt <= {CONNECTIONS}",
}


@dataclass
class Verdict:
    name: str
    delivered: int
    duplicates: int
    lost: int
    in_doubt: int
    bound: int  # rows in doubt the design allows
    lost_outcomes: int  # rows in einmal.lost_outcomes
    lost_lines: int  # their warning lines in the nodes' logs
    rewritten: int  # outcomes written again after the failover (the nodes' lines)
    there: int  # outcomes the new primary already had
    lag_said: float | None  # the lag a node's line said the standby had, beyond the journal's window
    lag: float  # the lag the run made (seconds the standby received nothing)
    unaccounted: int  # duplicates and rows in doubt beyond the bound that no line accounts for
    exits: list[str] = field(default_factory=list)  # nodes that ended by themselves or not cleanly; no fault
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        if self.exits or self.lost:
            return False
        if self.name == "async-lag-outside":
            return self.unaccounted == 0 and (self.lag_said is not None or not (self.duplicates or self.in_doubt))
        return self.duplicates == 0 and self.in_doubt <= self.bound

    def line(self) -> str:
        said = f"{self.lag_said:.1f}s" if self.lag_said is not None else "none"
        exits = f", node exits: {'; '.join(self.exits)}" if self.exits else ""
        return (
            f"failover {self.name}: {'PASS' if self.passed else 'FAIL'} delivered {self.delivered}, duplicates "
            f"{self.duplicates}, lost {self.lost}, in doubt {self.in_doubt}, lost_outcomes {self.lost_outcomes} "
            f"rows / {self.lost_lines} lines, written again {self.rewritten} ({self.there} were there), lag "
            f"{self.lag:g}s (line: {said}), unaccounted {self.unaccounted}{exits}, seconds {self.seconds:.1f}"
            f" — promised: {PROMISES[self.name]}"
        )


@dataclass
class Moments:
    hold: float | None = None  # monotonic time the standby stopped receiving
    fault: float | None = None  # the kill, the stop
    newest: float | None = None  # the last message received before the fault


async def run(s: Scenario, log_dir: Path | None = None) -> Verdict:
    """Scenario `s` on a primary and a standby of its own, destroyed after."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix=f"einmal-failover-{s.name}-"))
    stack = ExitStack()
    primary = PgCluster.create()
    standby = relay = None
    try:
        primary.start()
        if s.lag:  # the standby streams through a relay the run can hold
            relay = stack.enter_context(Relay(lambda: asyncio.open_connection("127.0.0.1", primary.port)))
        standby = PgCluster.standby_of(primary, port=relay.port if relay else None)
        standby.start()
        if s.lag:  # its replies each second, so the primary (and the nodes) see its replay fall behind
            await standby.configure(wal_receiver_status_interval="1s")
        if s.sync:
            await primary.configure(synchronous_standby_names="*")
        await primary.streaming(sync=s.sync)
        _, campaign = await prepare(primary.url(), "einmal", s.recipients)
        await primary.streaming(sync=s.sync)  # the standby has the campaign and its recipients
        return await _run(s, campaign, primary, standby, relay, log_dir)
    finally:
        stack.close()
        for cluster in (standby, primary):
            if cluster is not None:
                cluster.destroy()


async def _run(
    s: Scenario, campaign: int, primary: PgCluster, standby: PgCluster, relay: Relay | None, log_dir: Path
) -> Verdict:
    url = pair_url(primary, standby, "einmal")
    smtp = FaultServer().start()
    envs = [
        node_env(
            url,
            smtp.port,
            EINMAL_RATE_LIMIT=f"{s.rate:g}",
            EINMAL_TICK_SECONDS=f"{s.tick:g}",
            EINMAL_NODE_TIMEOUT_SECONDS=f"{s.node_timeout:g}",
            EINMAL_JOURNAL_SECONDS=f"{s.journal_seconds:g}",
            EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
            EINMAL_LOG_LEVEL="INFO",
            **({"EINMAL_NODE_ID": f"fixed-{i}"} if s.name == "fixed-id" else {}),
        )
        for i in range(s.nodes)
    ]
    moments, exits = Moments(), []
    began = time.monotonic()
    nodes = Nodes(envs, log_dir)
    try:
        while time.monotonic() - began < s.time_limit:
            for i, proc in enumerate(nodes.procs):
                if proc.poll() is not None and not any(e.startswith(f"node{i} ") for e in exits):
                    exits.append(f"node{i} exited {proc.returncode} after {time.monotonic() - began:.0f}s")
            if moments.fault is None and len(smtp.messages) >= s.recipients / 2:
                await disturb(s, primary, standby, relay, nodes, moments)
            elif moments.fault is not None and await status(url, campaign) == "sent":
                break
            await asyncio.sleep(0.05)
        seconds = time.monotonic() - began
    finally:
        codes = await asyncio.to_thread(nodes.stop)
        smtp.stop()
    exits += [f"node{i} exited {code} at the end" for i, code in enumerate(codes) if code != 0]
    conn = await asyncpg.connect(url, timeout=10)
    try:
        result = await tally(conn, campaign, smtp.messages)
        lost = await conn.fetch("SELECT subscriber_id FROM einmal.lost_outcomes WHERE campaign_id = $1", campaign)
        await keep_rows(conn, campaign, log_dir / "rows.txt")
    finally:
        await conn.close()
    logs = "".join((log_dir / f"node{i}.log").read_text(errors="replace") for i in range(s.nodes))
    rewrites = [tuple(map(int, m)) for m in REWRITE_LINE.findall(logs)]
    lag_said = max((float(x) for x in LAG_LINE.findall(logs)), default=None)
    logged = {message_id(campaign, r["subscriber_id"]) for r in lost}
    first = {}
    for m in smtp.messages:
        first.setdefault(m.message_id, m.at)
    if moments.fault is None:
        exits.append(f"none disturbed: half the campaign was not delivered within {s.time_limit:g}s")
    else:  # the journals' newest outcomes: the last message before the fault
        moments.newest = max((at for at in first.values() if at <= moments.fault), default=moments.fault)
    doubtful = [mid for mid, n in result.received.items() if n > 1]
    if s.in_doubt_bound == 0:
        doubtful += [mid for mid, r in result.rows.items() if r["status"] == "in_doubt"]
    # a row in doubt whose message never arrived went out to nobody: beyond the journal (the line about the
    # lag said so) it is one whose return to the queue the failover lost, waiting for `einmal reconcile`
    unaccounted = sum(
        1
        for mid in doubtful
        if mid not in logged
        and not (lag_said is not None and mid not in first)
        and not behind_the_journal(first.get(mid), s, moments, lag_said)
    )
    return Verdict(
        s.name,
        result.delivered,
        result.duplicates,
        result.lost,
        result.in_doubt,
        s.in_doubt_bound,
        len(lost),
        logs.count(LOST_LINE),
        sum(r[0] for r in rewrites),
        sum(r[1] for r in rewrites),
        lag_said,
        s.lag,
        unaccounted,
        exits,
        seconds,
    )


async def keep_rows(conn: asyncpg.Connection, campaign: int, path: Path) -> None:
    """The rows left in doubt and the outcomes kept as lost, for whoever reads the verdict."""
    lines = [
        " ".join(f"{k}={v}" for k, v in r.items())
        for r in await conn.fetch(
            """SELECT id, subscriber_id, status, claimed_by, attempts, last_reply, updated_at FROM einmal.sends
           WHERE campaign_id = $1 AND status NOT IN ('sent', 'suppressed') ORDER BY id""",
            campaign,
        )
    ]
    lines += [
        " ".join(f"{k}={v}" for k, v in r.items())
        for r in await conn.fetch(
            "SELECT * FROM einmal.lost_outcomes WHERE campaign_id = $1 ORDER BY send_id", campaign
        )
    ]
    await asyncio.to_thread(path.write_text, "".join(f"{line}\n" for line in lines))


def behind_the_journal(at: float | None, s: Scenario, moments: Moments, lag_said: float | None) -> bool:
    """Whether a message first received at `at` went out while the standby received nothing and longer
    before the failover than the journal covers: what the one line about the lag accounts for."""
    return (
        lag_said is not None
        and at is not None
        and moments.hold is not None
        and moments.newest is not None
        and moments.hold - SLACK <= at <= moments.newest - s.journal_seconds + SLACK
    )


async def disturb(
    s: Scenario, primary: PgCluster, standby: PgCluster, relay: Relay | None, nodes: Nodes, moments: Moments
) -> None:
    if s.name == "fixed-id":  # the node holding the most rows: SIGKILL, then the same command, the same id
        conn = await asyncpg.connect(pair_url(primary, standby, "einmal"), timeout=10)
        try:
            busiest = await conn.fetchval("""SELECT split_part(claimed_by, '/', 1) FROM einmal.sends
                                             WHERE status IN ('claimed', 'sending')
                                             GROUP BY 1 ORDER BY count(*) DESC LIMIT 1""")
        finally:
            await conn.close()
        moments.fault = time.monotonic()
        await asyncio.to_thread(nodes.kill, int((busiest or "fixed-0").removeprefix("fixed-")))
        return
    if s.name == "outage":
        moments.fault = time.monotonic()
        await asyncio.to_thread(primary.stop, "fast")
        await asyncio.sleep(s.outage)
        await asyncio.to_thread(primary.start)
        return
    if relay is not None:
        relay.hold()
        moments.hold = time.monotonic()
        await asyncio.sleep(s.lag)
        relay.cut()  # what the standby did not receive, it never will
    moments.fault = time.monotonic()
    await asyncio.to_thread(primary.kill)
    await asyncio.sleep(s.promote_after)
    await asyncio.to_thread(standby.promote)


async def status(url: str, campaign: int) -> str | None:
    """The campaign's status, or None while no server accepts writes."""
    try:
        conn = await asyncpg.connect(url, timeout=2)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return None
    try:
        return await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign, timeout=2)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return None
    finally:
        conn.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.failover",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--recipients", type=int, default=15_000)
    parser.add_argument("--rate", type=float, default=500, help="EINMAL_RATE_LIMIT (default 500)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="a comma-separated list (default: all)")
    parser.add_argument("--lag", type=float, default=2.0, help="async-lag's lag in seconds (default 2)")
    parser.add_argument("--outage", type=float, default=60.0, help="seconds the primary is down (default 60)")
    parser.add_argument("--journal-seconds", type=float, default=10.0, help="EINMAL_JOURNAL_SECONDS (default 10)")
    parser.add_argument("--time-limit", type=float, default=240.0, help="seconds for each scenario (default 240)")
    args = parser.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    if unknown := set(names) - set(SCENARIOS):
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; choose among {', '.join(SCENARIOS)}")
    print(f"failover: {args.recipients} recipients at {args.rate:g} msg/s, 2 nodes, {', '.join(names)}", flush=True)
    verdicts = []
    for name in names:
        s = scenario(
            name,
            lag=args.lag if name == "async-lag" else None,
            recipients=args.recipients,
            rate=args.rate,
            outage=args.outage,
            journal_seconds=args.journal_seconds,
            time_limit=args.time_limit,
        )
        log_dir = Path(tempfile.mkdtemp(prefix=f"einmal-failover-{name}-"))
        verdicts.append(asyncio.run(run(s, log_dir)))
        print(f"{verdicts[-1].line()} (node logs in {log_dir})", flush=True)
    passed = Counter(v.passed for v in verdicts)
    print(f"failover: {passed[True]} of {len(verdicts)} scenario(s) as promised", flush=True)
    sys.exit(0 if passed[True] == len(verdicts) else 1)


if __name__ == "__main__":
    main()
