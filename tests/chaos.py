"""The chaos run: real node processes killed with SIGKILL in the middle of a
campaign, restarted, and a verdict on what every recipient received.

    python -m tests.chaos [--recipients 50000] [--nodes 2] [--kills 20] [--seed N]

Bounded in count (kills) and time (--time-limit). Ends with one verdict line;
zero duplicates and zero lost is the only passing verdict (exit 0).
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
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from service import embedded
from service.migrate import migrate
from tests.conftest import ROOT, with_database
from tests.smtp_servers import FaultServer


@dataclass
class Verdict:
    delivered: int
    duplicates: int
    lost: int
    in_doubt: int
    bound: int
    suppressed: int
    failed: int
    kills: int
    seconds: float

    @property
    def passed(self) -> bool:
        return self.duplicates == 0 and self.lost == 0 and self.in_doubt <= self.bound

    def line(self) -> str:
        return (f"verdict: {'PASS' if self.passed else 'FAIL'} delivered {self.delivered}, duplicates "
                f"{self.duplicates}, lost {self.lost}, in doubt {self.in_doubt} (bound {self.bound}), "
                f"suppressed {self.suppressed}, failed {self.failed}, kills {self.kills}, "
                f"seconds {self.seconds:.1f}")


SEED_SQL = """
WITH a AS (INSERT INTO einmal.accounts (name) VALUES ('chaos') RETURNING id),
l AS (INSERT INTO einmal.lists (account_id, name)
      SELECT id, n FROM a, unnest(ARRAY['one', 'two']) n RETURNING id, name),
s AS (
    INSERT INTO einmal.subscribers (account_id, email, name)
    SELECT a.id, 'user' || i || '@example.com', 'User ' || i FROM a, generate_series(1, $1) i
    UNION ALL  -- every 50th address again, in upper case: the same recipient
    SELECT a.id, 'USER' || i || '@EXAMPLE.com', 'User ' || i FROM a, generate_series(1, $1, 50) i
    RETURNING id, email
)
INSERT INTO einmal.list_members (list_id, subscriber_id)
SELECT l.id, s.id FROM l, s
WHERE l.name = 'one' OR (l.name = 'two' AND s.email LIKE '%0@example.com')  -- every 10th in both lists
"""


async def prepare(server: str, name: str, recipients: int, suppressed: int) -> tuple[str, int]:
    admin = await asyncpg.connect(with_database(server, "postgres"))
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    dsn = with_database(server, name)
    conn = await asyncpg.connect(dsn)
    await migrate(conn)
    await conn.execute(SEED_SQL, recipients)
    await conn.execute("""INSERT INTO einmal.suppressions (account_id, email_lower)
                          SELECT a.id, 'user' || i || '@example.com' FROM einmal.accounts a,
                          generate_series(7, 7 + 97 * ($1 - 1), 97) i""", suppressed)
    campaign = await conn.fetchval("""
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
        SELECT a.id, 'chaos', 'Hello {{ name }}', 'news@example.com', 'Hi {{ name }} <{{ email }}>',
               (SELECT array_agg(id) FROM einmal.lists), 'approved'
        FROM einmal.accounts a RETURNING id""")
    await conn.execute("SELECT pg_notify('einmal_campaign', $1)", str(campaign))
    await conn.close()
    return dsn, campaign


def start(env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "service", "run"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"))


async def run(recipients: int = 50_000, nodes: int = 2, kills: int = 20, seed: int | None = None,
              connections: int = 4, time_limit: float = 540, log_dir: Path | None = None) -> Verdict:
    seed = seed if seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    print(f"chaos: seed {seed}, {recipients} recipients, {nodes} nodes, {kills} kills", flush=True)
    server = os.environ.get("EINMAL_DATABASE_URL") or os.environ.get("DATABASE_URL") or embedded.url()
    dsn, campaign = await prepare(server, f"einmal_chaos_{os.getpid()}", recipients, max(recipients // 1000, 1))
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="einmal-chaos-"))
    smtp = FaultServer().start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env.update(EINMAL_DATABASE_URL=dsn, EINMAL_SMTP_HOST="127.0.0.1", EINMAL_SMTP_PORT=str(smtp.port),
               EINMAL_SMTP_CONNECTIONS=str(connections), EINMAL_NODE_TIMEOUT_SECONDS="2",
               EINMAL_TICK_SECONDS="0.5", EINMAL_BATCH_SIZE="100", EINMAL_LOG_LEVEL="WARNING")
    procs = [start(env, log_dir / f"node{i}.log") for i in range(nodes)]
    began = time.monotonic()
    done_kills = 0
    conn = await asyncpg.connect(dsn)
    try:
        while True:
            status = await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign)
            if status == "sent" or time.monotonic() - began > time_limit:
                break
            if done_kills < kills and len(smtp.messages) > (done_kills + 1) * recipients / (kills + 2):
                victim = rng.randrange(nodes)
                await asyncio.sleep(rng.uniform(0, 0.2))
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                done_kills += 1
                procs[victim] = start(env, log_dir / f"node{victim}.log")
            await asyncio.sleep(0.02)
        seconds = time.monotonic() - began
        counts = {r["status"]: r["count"] for r in await conn.fetch(
            "SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign)}
        expected = await conn.fetchval("""
            SELECT count(DISTINCT s.email_lower) FROM einmal.subscribers s
            JOIN einmal.list_members m ON m.subscriber_id = s.id""")
        sent_ids = {f"<campaign.{campaign}.{r['subscriber_id']}@example.com>" for r in await conn.fetch(
            "SELECT subscriber_id FROM einmal.sends WHERE campaign_id = $1 AND status = 'sent'", campaign)}
    finally:
        await conn.close()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        smtp.stop()
    received = Counter(m.message_id for m in smtp.messages)
    unfinished = sum(n for s, n in counts.items() if s not in ("sent", "suppressed", "failed", "in_doubt"))
    lost = len(sent_ids - set(received)) + unfinished + max(expected - sum(counts.values()), 0)
    verdict = Verdict(delivered=len(received), duplicates=sum(n - 1 for n in received.values() if n > 1),
                      lost=lost, in_doubt=counts.get("in_doubt", 0), bound=done_kills * connections,
                      suppressed=counts.get("suppressed", 0), failed=counts.get("failed", 0),
                      kills=done_kills, seconds=seconds)
    admin = await asyncpg.connect(with_database(server, "postgres"))
    await admin.execute(f"DROP DATABASE IF EXISTS einmal_chaos_{os.getpid()} WITH (FORCE)")
    await admin.close()
    print(f"node logs in {log_dir}")
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=50_000)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--time-limit", type=float, default=540)
    args = parser.parse_args()
    verdict = asyncio.run(run(args.recipients, args.nodes, args.kills, args.seed, time_limit=args.time_limit))
    print(verdict.line())
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()
