"""The chaos run of a sequence: a sequence of three steps (delays 0 s, 5 s, 10 s) while members join its list in a
stream and some leave, node processes SIGKILLed, an SMTP server that answers 4xx and drops connections after the
final dot — and a verdict on what every member received, step by step.

    python -m tests.support.sequence_chaos [--members 10000] [--leaves 500] [--kills 20] [--nodes 3]
                                           [--join-seconds 120] [--seed N] [--time-limit 900]

For every step: 0 duplicates (a Message-ID received twice), 0 lost (a row marked sent that the server does not
have, a row left open, or a member on the list, past the step's delay, without the step while every step before
it was settled — a member behind a message in doubt waits for the operator, and is counted as held), no step
received before its delay after the previous step's arrival (the first step: after the member's join; a delay counts
from the previous step's send, which is after its arrival), none out of order, none after a leave that committed before
its row was on the wire; rows in doubt within the bound (a kill leaves at most one per connection, a dropped
connection one). Bounded in count and time; one verdict line (exit 0 when it passes).
"""

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from service.db import embedded
from tests.conftest import UNSUBSCRIBE, with_database
from tests.support.chaos import Nodes
from tests.support.pipeline import message_id
from tests.support.smtp_servers import DROP, FaultServer

CONNECTIONS = 4
NODE_TIMEOUT = 2.0
DELAYS = (0, 5, 10)
SETTLED = ("sent", "failed", "suppressed")


@dataclass
class Scenario:
    members: int = 10_000
    leaves: int = 500
    nodes: int = 3
    kills: int = 20
    join_seconds: float = 120.0  # the stream of joins lasts this long
    smtp_faults: bool = True  # 2% 4xx after the final dot, 0.2% dropped after it
    seed: int = field(default_factory=lambda: random.randrange(1_000_000))
    time_limit: float = 900.0


@dataclass
class Verdict:
    members: int
    delivered: int
    duplicates: int
    lost: int
    early: int  # received before the step's delay after the previous step's arrival (the first: the join)
    out_of_order: int
    after_leave: int  # received for a member after a leave that committed before its row was on the wire
    held: int  # (step, member) pairs waiting behind a message in doubt
    in_doubt: int
    bound: int
    left: int
    kills: int
    per_step: list[int]  # messages received per step
    seconds: float

    @property
    def passed(self) -> bool:
        return (
            self.duplicates == 0
            and self.lost == 0
            and self.early == 0
            and self.out_of_order == 0
            and self.after_leave == 0
            and self.in_doubt <= self.bound
        )

    def line(self) -> str:
        return (
            f"verdict (sequence): {'PASS' if self.passed else 'FAIL'} members {self.members}, left {self.left}, "
            f"delivered {self.delivered} ({' + '.join(map(str, self.per_step))} by step), duplicates "
            f"{self.duplicates}, lost {self.lost}, before the delay {self.early}, out of order {self.out_of_order}, "
            f"after a leave {self.after_leave}, in doubt {self.in_doubt} (bound {self.bound}), held behind doubt "
            f"{self.held}, kills {self.kills}, seconds {self.seconds:.1f}"
        )


SEED_SQL = """
WITH a AS (INSERT INTO einmal.accounts (name) VALUES ('chaos') RETURNING id)
INSERT INTO einmal.lists (account_id, name) SELECT id, 'welcome' FROM a RETURNING account_id, id
"""
STEP_SQL = """
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status,
                              recipients_built_at, started_at, sequence_id, step_position, step_delay_seconds)
VALUES ($1, 'step ' || $4::integer, 'Step ' || $4::integer || ' for {{ name }}', 'news@example.com',
        'Hi {{ name }}, step ' || $4::integer, ARRAY[$2::bigint], 'step', 'sending', now(), now(), $3, $4::integer, $5)
RETURNING id
"""
JOIN_SQL = """
WITH s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT $1, 'member' || i || '@example.com', 'member' || i || '@example.com', 'Member ' || i
    FROM generate_series($3::integer, $4::integer) AS i
    RETURNING id
)
INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT $2, id FROM s RETURNING subscriber_id
"""


async def prepare(server: str, name: str) -> tuple[str, int, int, int, list[int]]:
    """A fresh database: (its dsn, account, list, sequence, the steps' campaign ids)."""
    from service.db.migrate import migrate

    admin = await asyncpg.connect(with_database(server, "postgres"))
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    dsn = with_database(server, name)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        account, list_id = await conn.fetchrow(SEED_SQL)
        sequence = await conn.fetchval(
            "INSERT INTO einmal.sequences (account_id, list_id, name) VALUES ($1, $2, 'welcome') RETURNING id",
            account,
            list_id,
        )
        steps = [await conn.fetchval(STEP_SQL, account, list_id, sequence, i, d) for i, d in enumerate(DELAYS, 1)]
    finally:
        await conn.close()
    return dsn, account, list_id, sequence, steps


async def leave(conn: asyncpg.Connection, list_id: int, subscriber: int, steps: list[int]) -> set[int]:
    """Take the member off the list; the steps whose row was already sent, on the wire or in doubt when the leave
    committed (read in its transaction, after the delete: the trigger has settled the rows queued or claimed)."""
    async with conn.transaction():
        await conn.execute(
            "DELETE FROM einmal.list_members WHERE list_id = $1 AND subscriber_id = $2", list_id, subscriber
        )
        rows = await conn.fetch(
            "SELECT campaign_id FROM einmal.sends WHERE subscriber_id = $1 AND campaign_id = ANY ($2::bigint[]) "
            "AND status IN ('sent', 'sending', 'in_doubt')",
            subscriber,
            steps,
        )
    return {r["campaign_id"] for r in rows}


async def quiet(conn: asyncpg.Connection, steps: list[int]) -> bool:
    """No step row open, and every member still due waits behind a row in doubt."""
    return await conn.fetchval(
        """
        SELECT NOT EXISTS (SELECT 1 FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])
                           AND status IN ('queued', 'claimed', 'sending'))
           AND NOT EXISTS (SELECT 1 FROM einmal.sequence_members m
                           WHERE m.due_at IS NOT NULL
                             AND NOT EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = m.last_step
                                             AND s.subscriber_id = m.subscriber_id AND s.status = 'in_doubt'))""",
        steps,
    )


async def run(scenario: Scenario, log_dir: Path | None = None) -> Verdict:
    s, rng = scenario, random.Random(scenario.seed)
    print(
        f"sequence chaos: seed {s.seed}, {s.members} members over {s.join_seconds:g}s, {s.leaves} leaves, "
        f"{s.nodes} nodes, {s.kills} kills, delays {DELAYS}, smtp faults {'on' if s.smtp_faults else 'off'}",
        flush=True,
    )
    server = os.environ.get("EINMAL_DATABASE_URL") or os.environ.get("DATABASE_URL") or embedded.url()
    name = f"einmal_seqchaos_{os.getpid()}"
    dsn, account, list_id, _, steps = await prepare(server, name)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="einmal-seqchaos-"))
    smtp = FaultServer(seed=s.seed).start()
    if s.smtp_faults:
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
        EINMAL_SEQUENCE_TICK_SECONDS="0.5",
        EINMAL_SEQUENCE_WAIT_SECONDS="0.5",
        EINMAL_SEQUENCE_BATCH="200",
        EINMAL_LOG_LEVEL="WARNING",
        **UNSUBSCRIBE,
    )
    clock = time.time() - time.monotonic()  # the server stamps arrivals with time.monotonic()
    nodes = Nodes([env] * s.nodes, log_dir)
    batches = max(1, int(s.join_seconds / 0.2))
    sizes = [s.members // batches + (1 if i < s.members % batches else 0) for i in range(batches)]
    kills = sorted(rng.uniform(1, s.join_seconds + max(DELAYS)) for _ in range(s.kills))
    leaves_at = sorted(rng.uniform(0.5, s.join_seconds + max(DELAYS)) for _ in range(s.leaves))
    joined: list[int] = []
    left: dict[int, set[int]] = {}  # member -> the steps on the wire or done when its leave committed
    killed = 0
    began = time.monotonic()
    conn = await asyncpg.connect(dsn)
    try:
        next_number, batch = 1, 0
        while time.monotonic() - began < s.time_limit:
            now = time.monotonic() - began
            if batch < batches and now >= batch * 0.2:
                made = await conn.fetch(JOIN_SQL, account, list_id, next_number, next_number + sizes[batch] - 1)
                joined += [r["subscriber_id"] for r in made]
                next_number += sizes[batch]
                batch += 1
            while kills and now >= kills[0]:
                kills.pop(0)
                nodes.kill(rng.randrange(s.nodes))
                killed += 1
            while leaves_at and now >= leaves_at[0] and len(left) < len(joined):
                leaves_at.pop(0)
                member = rng.choice([m for m in joined[-2000:] if m not in left] or [0])
                if member:
                    left[member] = await leave(conn, list_id, member, steps)
            if batch == batches and not kills and not leaves_at and now > s.join_seconds + max(DELAYS):
                if await quiet(conn, steps):
                    break
            await asyncio.sleep(0.02)
        seconds = time.monotonic() - began
        nodes.stop()
        verdict = await judge(conn, steps, smtp, clock, joined, left, killed, seconds)
    finally:
        await conn.close()
        nodes.stop()
        smtp.stop()
    if os.environ.get("EINMAL_CHAOS_KEEP"):
        print(f"database kept: {dsn}")
    else:
        admin = await asyncpg.connect(with_database(server, "postgres"))
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    print(f"node logs in {log_dir}")
    return verdict


async def judge(
    conn: asyncpg.Connection,
    steps: list[int],
    smtp: FaultServer,
    clock: float,
    joined: list[int],
    left: dict[int, set[int]],
    killed: int,
    seconds: float,
) -> Verdict:
    messages = smtp.messages
    received = Counter(m.message_id for m in messages)
    first_at: dict[str, float] = {}
    for m in messages:
        first_at.setdefault(m.message_id, m.at + clock)
    rows = {
        (r["campaign_id"], r["subscriber_id"]): r["status"]
        for r in await conn.fetch(
            "SELECT campaign_id, subscriber_id, status FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])", steps
        )
    }
    joins = {
        r["subscriber_id"]: r["joined_at"].timestamp()
        for r in await conn.fetch("SELECT subscriber_id, joined_at FROM einmal.sequence_members")
    }
    lost = early = out_of_order = after_leave = held = 0
    lost += sum(1 for key, status in rows.items() if status == "sent" and message_id(*key) not in received)
    lost += sum(1 for status in rows.values() if status in ("queued", "claimed", "sending"))
    for member in joined:
        previous_at, behind, doubted = None, False, False
        # a delay counts from the previous step's send, which its arrival precedes (a step not received: the one
        # before it, or the join)
        since = joins[member]
        for step, delay in zip(steps, DELAYS, strict=True):
            mid = message_id(step, member)
            status = rows.get((step, member))
            if mid in first_at:
                if first_at[mid] < since + delay:
                    early += 1
                since = first_at[mid]
                if (previous_at is not None and first_at[mid] < previous_at) or doubted:
                    out_of_order += 1  # before the step before it, or past one in doubt (it waits for the operator)
                if member in left and step not in left[member]:
                    after_leave += 1
                previous_at = first_at[mid]
            if member in left:
                continue
            if behind:
                held += 1
            elif status is None:
                lost += 1  # on the list, everything before settled, the run over: it should have come
            doubted = doubted or status == "in_doubt"
            if status == "in_doubt" or behind:
                behind = True
            elif status not in SETTLED:
                behind = True  # an open row was counted as lost above
    return Verdict(
        members=len(joined),
        delivered=len(received),
        duplicates=sum(n - 1 for n in received.values() if n > 1),
        lost=lost,
        early=early,
        out_of_order=out_of_order,
        after_leave=after_leave,
        held=held,
        in_doubt=sum(1 for status in rows.values() if status == "in_doubt"),
        bound=killed * CONNECTIONS + sum(1 for m in messages if not m.answered),
        left=len(left),
        kills=killed,
        per_step=[sum(1 for mid in received if mid.startswith(f"<campaign.{step}.")) for step in steps],
        seconds=seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.sequence_chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--leaves", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--join-seconds", type=float, default=120.0)
    parser.add_argument("--no-smtp-faults", dest="smtp_faults", action="store_false")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--time-limit", type=float, default=900.0)
    args = parser.parse_args()
    scenario = Scenario(
        args.members,
        args.leaves,
        args.nodes,
        args.kills,
        args.join_seconds,
        args.smtp_faults,
        time_limit=args.time_limit,
        **({"seed": args.seed} if args.seed is not None else {}),
    )
    verdict = asyncio.run(run(scenario))
    print(verdict.line())
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()
