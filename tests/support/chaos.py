"""The chaos run: real node processes killed with SIGKILL and stalled with
SIGSTOP in the middle of a campaign, an SMTP server that refuses, drops and
bounces, opt-outs committed mid-send, optionally a PostgreSQL restart — and a
verdict on what every recipient received.

    python -m tests.support.chaos [--recipients 50000] [--nodes 3] [--kills 20] [--stalls 2]
                          [--no-smtp-faults] [--opt-outs 50] [--no-pg-restart] [--seed N]
                          [--in-doubt hold|resend]

Bounded in count (kills, stalls) and time (--time-limit). Ends with one
verdict line. Under `hold` (the default), zero duplicates and zero lost is the
only passing verdict (exit 0). Under `resend` (at least once), zero lost, and
duplicates plus rows still in doubt within the in-doubt bound: each duplicate
is a message that was in doubt and sent again with the same Message-ID.
"""

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from service.db import embedded
from tests.conftest import UNSUBSCRIBE, with_database
from tests.support import forkserver
from tests.support.pipeline import message_id, start_node
from tests.support.smtp_servers import DROP, FaultServer

CONNECTIONS = 4
NODE_TIMEOUT = 2.0


@dataclass
class Scenario:
    recipients: int = 50_000
    nodes: int = 3
    kills: int = 20
    stalls: int = 2
    smtp_faults: bool = True  # 2% 4xx, 0.2% dropped after the end of DATA, a 5xx domain
    opt_outs: int = 50
    pg_restart: bool = True  # on a throwaway cluster of PostgreSQL 18 from the embedded package
    seed: int = field(default_factory=lambda: random.randrange(1_000_000))
    time_limit: float = 540
    in_doubt: str = "hold"  # EINMAL_IN_DOUBT of the nodes


@dataclass
class Verdict:
    mode: str
    delivered: int
    duplicates: int
    lost: int
    in_doubt: int
    bound: int
    suppressed: int
    failed: int
    opt_outs_leaked: int
    kills: int
    stalls: int
    pg_restarts: int
    seconds: float

    @property
    def passed(self) -> bool:
        if self.mode == "resend":  # at least once: what was in doubt may arrive twice, within the bound
            return self.lost == 0 and self.duplicates + self.in_doubt <= self.bound
        return self.duplicates == 0 and self.lost == 0 and self.in_doubt <= self.bound

    def line(self) -> str:
        return (
            f"verdict ({self.mode}): {'PASS' if self.passed else 'FAIL'} delivered {self.delivered}, duplicates "
            f"{self.duplicates}, lost {self.lost}, in doubt {self.in_doubt} (bound {self.bound}), "
            f"suppressed {self.suppressed}, failed {self.failed}, "
            f"opt-outs already in flight {self.opt_outs_leaked}, kills {self.kills}, stalls {self.stalls}, "
            f"postgres restarts {self.pg_restarts}, seconds {self.seconds:.1f}"
        )


SEED_SQL = """
WITH a AS (INSERT INTO einmal.accounts (name) VALUES ('chaos') RETURNING id),
l AS (INSERT INTO einmal.lists (account_id, name)
      SELECT id, n FROM a, unnest(ARRAY['one', 'two']) n RETURNING id, name),
s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)  -- ASCII: lower() is its key
    SELECT a.id, e, lower(e), 'User ' || i FROM a, generate_series(1, $1) i,
        LATERAL (SELECT 'user' || i || CASE WHEN i % 500 = 3 THEN '@bounce.test' ELSE '@example.com' END) AS x (e)
    UNION ALL  -- every 50th address again, in upper case: the same recipient
    SELECT a.id, 'USER' || i || '@EXAMPLE.com', 'user' || i || '@example.com', 'User ' || i
    FROM a, generate_series(1, $1, 50) i
    RETURNING id, email
)
INSERT INTO einmal.list_members (list_id, subscriber_id)
SELECT l.id, s.id FROM l, s
WHERE l.name = 'one' OR (l.name = 'two' AND s.email LIKE '%0@example.com')  -- every 10th in both lists
"""


async def prepare(server: str, name: str, recipients: int) -> tuple[str, int]:
    from service.db.migrate import migrate

    admin = await asyncpg.connect(with_database(server, "postgres"))
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    dsn = with_database(server, name)
    conn = await asyncpg.connect(dsn)
    await migrate(conn)
    await conn.execute(SEED_SQL, recipients)
    await conn.execute(
        """INSERT INTO einmal.suppressions (account_id, email_lower)
                          SELECT a.id, 'user' || i || '@example.com' FROM einmal.accounts a,
                          generate_series(7, $1, 997) i""",
        recipients,
    )
    campaign = await conn.fetchval("""
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
        SELECT a.id, 'chaos', 'Hello {{ name }}', 'news@example.com', 'Hi {{ name }} <{{ email }}>',
               (SELECT array_agg(id) FROM einmal.lists), 'approved'
        FROM einmal.accounts a RETURNING id""")
    await conn.execute("SELECT pg_notify('einmal_campaign', $1)", str(campaign))
    await conn.close()
    return dsn, campaign


@dataclass
class Tally:
    """A campaign's rows against what the SMTP server received."""

    counts: dict[str, int]  # rows by status
    received: Counter  # Message-ID -> copies the server holds
    rows: dict[str, asyncpg.Record]  # Message-ID -> its row (id, subscriber_id, email_lower, status)
    expected: int  # distinct addresses on the campaign's lists

    @property
    def delivered(self) -> int:
        return len(self.received)

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.received.values() if n > 1)

    @property
    def lost(self) -> int:
        """Rows not settled, rows marked sent that the server does not have, addresses with no row."""
        unfinished = sum(n for st, n in self.counts.items() if st not in ("sent", "suppressed", "failed", "in_doubt"))
        sent_not_received = sum(1 for mid, r in self.rows.items() if r["status"] == "sent" and mid not in self.received)
        return sent_not_received + unfinished + max(self.expected - len(self.rows), 0)

    @property
    def in_doubt(self) -> int:
        return self.counts.get("in_doubt", 0)


async def tally(conn: asyncpg.Connection, campaign: int, messages) -> Tally:
    """The campaign's rows (once the nodes are stopped) against `messages`, what the server received."""
    counts = {
        r["status"]: r["count"]
        for r in await conn.fetch(
            "SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign
        )
    }
    expected = await conn.fetchval("""SELECT count(DISTINCT s.email_lower) FROM einmal.subscribers s
                                      JOIN einmal.list_members m ON m.subscriber_id = s.id""")
    rows = await conn.fetch(
        "SELECT id, subscriber_id, email_lower, status FROM einmal.sends WHERE campaign_id = $1", campaign
    )
    return Tally(
        counts,
        Counter(m.message_id for m in messages),
        {message_id(campaign, r["subscriber_id"]): r for r in rows},
        expected,
    )


async def connect(dsn: str, seconds: float = 30) -> asyncpg.Connection:
    """Connect, retrying while the server comes back."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await asyncpg.connect(dsn)
        except (OSError, asyncpg.PostgresError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


class Nodes:
    """Node processes, node i started with envs[i] and logging to log_dir/node<i>.log."""

    def __init__(self, envs: list[dict], log_dir: Path) -> None:
        self.envs, self.log_dir = envs, log_dir
        self.procs = [self.start(i) for i in range(len(envs))]

    def start(self, i: int) -> subprocess.Popen | forkserver.Child:
        return start_node(self.envs[i], self.log_dir / f"node{i}.log")

    def kill(self, i: int) -> None:
        """SIGKILL node i and start it again, with the same environment."""
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.procs[i] = self.start(i)

    async def stall(self, i: int, seconds: float) -> None:
        self.procs[i].send_signal(signal.SIGSTOP)
        await asyncio.sleep(seconds)
        self.procs[i].send_signal(signal.SIGCONT)

    def stop(self) -> list[int]:
        """Drain every node (SIGTERM); their exit codes (-9: killed, still running after 15 s)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return [proc.returncode for proc in self.procs]


async def opt_out(conn: asyncpg.Connection, campaign: int, n: int) -> tuple[set[str], set[str]]:
    """Commit n opt-outs for addresses still waiting; return them and those already on the wire."""
    rows = await conn.fetch(
        """SELECT account_id, email_lower FROM einmal.sends
                               WHERE campaign_id = $1 AND status IN ('queued', 'claimed')
                               ORDER BY random() LIMIT $2""",
        campaign,
        n,
    )
    await conn.executemany(
        "INSERT INTO einmal.suppressions (account_id, email_lower, reason) "
        "VALUES ($1, $2, 'unsubscribe') ON CONFLICT DO NOTHING",
        [tuple(r) for r in rows],
    )
    return {r["email_lower"] for r in rows}, set()


async def run(scenario: Scenario, log_dir: Path | None = None) -> Verdict:
    if not scenario.pg_restart:
        return await _run(scenario, log_dir, None)
    from tests.support.pgcluster import PgCluster

    cluster = PgCluster.create()
    cluster.start()
    try:
        return await _run(scenario, log_dir, cluster)
    finally:
        cluster.destroy()


async def _run(scenario: Scenario, log_dir: Path | None, cluster) -> Verdict:
    s, rng = scenario, random.Random(scenario.seed)
    print(
        f"chaos: seed {s.seed}, {s.recipients} recipients, {s.nodes} nodes, {s.kills} kills, {s.stalls} stalls, "
        f"smtp faults {'on' if s.smtp_faults else 'off'}, {s.opt_outs} opt-outs, "
        f"postgres restart {'on' if s.pg_restart else 'off'}",
        flush=True,
    )
    server = (
        (cluster.url("postgres") if cluster else None)
        or os.environ.get("EINMAL_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or embedded.url()
    )
    name = f"einmal_chaos_{os.getpid()}"
    dsn, campaign = await prepare(server, name, s.recipients)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="einmal-chaos-"))
    smtp = FaultServer(seed=s.seed).start()
    if s.smtp_faults:
        smtp.inject("rcpt", "550 5.1.1 no such user", domain="bounce.test")
        smtp.inject("data_end", "451 4.3.0 try again later", probability=0.02)
        smtp.inject("data_end", DROP, probability=0.002)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env.update(
        EINMAL_DATABASE_URL=dsn,
        EINMAL_SMTP_HOST="127.0.0.1",
        EINMAL_SMTP_PORT=str(smtp.port),
        EINMAL_SMTP_CONNECTIONS=str(CONNECTIONS),
        EINMAL_NODE_TIMEOUT_SECONDS=str(NODE_TIMEOUT),
        EINMAL_TICK_SECONDS="0.5",
        EINMAL_BATCH_SIZE="100",
        EINMAL_RETRY_BASE_SECONDS="0.2",
        EINMAL_MAX_ATTEMPTS="10",
        EINMAL_LOG_LEVEL="WARNING",
        EINMAL_IN_DOUBT=s.in_doubt,
        **UNSUBSCRIBE,
    )
    nodes = Nodes([env] * s.nodes, log_dir)
    # the moments (as fractions of the campaign delivered) at which each disturbance happens
    plan = sorted(
        [(rng.uniform(0.05, 0.9), "kill") for _ in range(s.kills)]
        + [(rng.uniform(0.1, 0.8), "stall") for _ in range(s.stalls)]
        + [(rng.uniform(0.2, 0.6), "opt-out")] * bool(s.opt_outs)
        + [(rng.uniform(0.3, 0.7), "pg-restart")] * bool(s.pg_restart and cluster)
    )
    done = Counter()
    opted_out: set[str] = set()
    stalls: list[asyncio.Task] = []
    began = time.monotonic()
    conn = await asyncpg.connect(dsn)
    try:
        while time.monotonic() - began < s.time_limit:
            try:
                status = await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()
                conn = await connect(dsn)
                continue
            if status == "sent":
                break
            if plan and len(smtp.messages) >= plan[0][0] * s.recipients:
                _, what = plan.pop(0)
                done[what] += 1
                if what == "kill":
                    await asyncio.sleep(rng.uniform(0, 0.1))
                    nodes.kill(rng.randrange(s.nodes))
                elif what == "stall":
                    stalls.append(asyncio.create_task(nodes.stall(rng.randrange(s.nodes), NODE_TIMEOUT * 2)))
                elif what == "opt-out":
                    opted_out, _ = await opt_out(conn, campaign, s.opt_outs)
                else:  # the database goes away for a few seconds, mid-send
                    await conn.close()
                    cluster.stop(mode="fast")
                    await asyncio.sleep(2)
                    cluster.start()
                    conn = await connect(dsn)
            await asyncio.sleep(0.02)
        seconds = time.monotonic() - began
        await asyncio.gather(*stalls)
        nodes.stop()  # drained: what a woken node knew is recorded before the count
        result = await tally(conn, campaign, smtp.messages)
    finally:
        await conn.close()
        nodes.stop()
        smtp.stop()
    dropped = sum(1 for m in smtp.messages if not m.answered)
    leaked = sum(
        1
        for mid in result.received
        if mid in result.rows
        and result.rows[mid]["email_lower"] in opted_out
        and result.rows[mid]["status"] != "suppressed"
    )
    counts = result.counts
    verdict = Verdict(
        mode=s.in_doubt,
        delivered=result.delivered,
        duplicates=result.duplicates,
        lost=result.lost,
        # a stalled node records its own answers when it wakes; a restarted server fails
        # every node's pipeline at once
        in_doubt=result.in_doubt,
        bound=done["kill"] * CONNECTIONS
        + dropped
        + done["pg-restart"] * s.nodes * CONNECTIONS
        # under resend a stalled node's rows on the wire are sent again by another node
        + (done["stall"] * CONNECTIONS if s.in_doubt == "resend" else 0),
        suppressed=counts.get("suppressed", 0),
        failed=counts.get("failed", 0),
        opt_outs_leaked=leaked,
        kills=done["kill"],
        stalls=done["stall"],
        pg_restarts=done["pg-restart"],
        seconds=seconds,
    )
    if os.environ.get("EINMAL_CHAOS_KEEP"):
        print(f"database kept: {dsn}")
    else:
        admin = await asyncpg.connect(with_database(server, "postgres"))
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    print(f"node logs in {log_dir}")
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=50_000)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--stalls", type=int, default=2)
    parser.add_argument("--opt-outs", type=int, default=50)
    parser.add_argument("--no-smtp-faults", dest="smtp_faults", action="store_false")
    parser.add_argument("--no-pg-restart", dest="pg_restart", action="store_false")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--time-limit", type=float, default=540)
    parser.add_argument("--in-doubt", choices=("hold", "resend"), default="hold")
    args = parser.parse_args()
    scenario = Scenario(
        args.recipients,
        args.nodes,
        args.kills,
        args.stalls,
        args.smtp_faults,
        args.opt_outs,
        args.pg_restart,
        time_limit=args.time_limit,
        in_doubt=args.in_doubt,
        **({"seed": args.seed} if args.seed is not None else {}),
    )
    verdict = asyncio.run(run(scenario))
    print(verdict.line())
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()
