"""The chaos run of webhooks: node processes send a campaign to an SMTP sink on loopback, some recipients refused
at send time (550) and some bounced by a report afterwards, some unsubscribing while it runs, and a few changes
rolled back; the account's endpoint is a real HTTP receiver on 127.0.0.1 that fails about 30% of requests, hangs
on some and is killed (and started again on its port) during the run — and a verdict on what it received.

    python -m tests.support.webhook_chaos [--recipients 10000] [--nodes 2] [--receiver-kills 2] [--bounces 100]
                                          [--unsubscribes 200] [--rollbacks 10] [--seed N] [--time-limit 600]

When the campaign is done and the outbox drained (bounded): every event of einmal.webhook_events delivered at
least once with a signature the `standardwebhooks` library verifies on arrival, none lost, none received that is
not in the outbox (none for a rolled-back change), each repeat with the same webhook-id and body, and the events
of each type one for one with the send rows, bounces and unsubscribes. One verdict line (exit 0 when it passes).
"""

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from service.db import embedded
from service.inbound import bounces
from service.inbound import events as inbound
from service.inbound.reports import Report
from service.settings import Settings
from tests.conftest import UNSUBSCRIBE, with_database
from tests.support.chaos import Nodes
from tests.support.smtp_servers import FaultServer
from tests.support.webhook_receiver import HANG, Answer, Receiver, Request
from tests.support.webhooks import ALL, endpoint

REFUSED_DOMAIN = "refused.test"  # every 250th address: the sink answers 550 to its RCPT
# short waits, so that a run is minutes, not the days of the shipped schedule: 20 attempts over about 40 s
RETRY_SECONDS = ",".join(["0.1", "0.2", "0.5", "1"] + ["2.5"] * 16)
TIMEOUT = 1.0  # EINMAL_WEBHOOK_TIMEOUT_SECONDS: a hang costs a place this long
OUTAGE = 3.0  # seconds the receiver stays down after each kill


@dataclass
class Scenario:
    recipients: int = 10_000
    nodes: int = 2
    receiver_kills: int = 2
    bounces: int = 100  # hard-bounce reports for sent rows, while it runs
    unsubscribes: int = 200  # one-click unsubscribes while it runs (queued addresses and sent ones)
    rollbacks: int = 10  # changes that would make an event, rolled back
    fail_rate: float = 0.3  # of requests answered 500 (and a 2% share of them hangs instead)
    seed: int = field(default_factory=lambda: random.randrange(1_000_000))
    time_limit: float = 600.0


@dataclass
class Verdict:
    events: int
    requests: int
    delivered: int  # distinct events received with a valid signature and answered 2xx
    repeats: int  # requests beyond the first of an event
    lost: int  # in the outbox, never received with a valid signature
    invented: int  # received, not in the outbox
    bad_signatures: int
    changed_repeats: int  # events whose repeats differ in body
    mismatched: int  # events per type against sends / bounces / unsubscribes, off by this many
    rolled_back: int  # events (made or received) of a rolled-back change
    pending: int  # deliveries not delivered when the run ended
    parked: int
    per_type: dict[str, int]
    kills: int
    hangs: int
    failed_answers: int
    seconds: float
    drained: bool

    @property
    def passed(self) -> bool:
        return (
            self.drained
            and self.events > 0
            and self.lost == 0
            and self.invented == 0
            and self.bad_signatures == 0
            and self.changed_repeats == 0
            and self.mismatched == 0
            and self.rolled_back == 0
            and self.pending == 0
            and self.parked == 0
        )

    def line(self) -> str:
        types = ", ".join(f"{k} {v}" for k, v in sorted(self.per_type.items()))
        return (
            f"verdict (webhooks): {'PASS' if self.passed else 'FAIL'} events {self.events} ({types}), delivered "
            f"{self.delivered}, requests {self.requests}, repeats {self.repeats}, lost {self.lost}, invented "
            f"{self.invented}, bad signatures {self.bad_signatures}, changed repeats {self.changed_repeats}, "
            f"mismatched {self.mismatched}, rolled back {self.rolled_back}, pending {self.pending}, parked "
            f"{self.parked}, answers failed {self.failed_answers} / hung {self.hangs}, receiver kills {self.kills}, "
            f"seconds {self.seconds:.1f}"
        )


SEED_SQL = """
WITH a AS (INSERT INTO einmal.accounts (name) VALUES ('chaos') RETURNING id),
l AS (INSERT INTO einmal.lists (account_id, name) SELECT id, 'all' FROM a RETURNING id, account_id),
s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT l.account_id, e, e, 'User ' || i FROM l, generate_series(1, $1) i,
        LATERAL (SELECT 'user' || i || CASE WHEN i % 250 = 7 THEN '@refused.test' ELSE '@example.com' END) x (e)
    RETURNING id
)
INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM l, s
RETURNING (SELECT account_id FROM l), list_id
"""


async def prepare(server: str, name: str, recipients: int) -> tuple[str, int, int]:
    """A fresh database with an account of `recipients` subscribers on one list: (dsn, account, list)."""
    from service.db.migrate import migrate

    admin = await asyncpg.connect(with_database(server, "postgres"))
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    await admin.close()
    dsn = with_database(server, name)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        account, list_id = (await conn.fetch(SEED_SQL, recipients))[0]
    finally:
        await conn.close()
    return dsn, account, list_id


class Arrivals:
    """What the receiver decides for each request, and what it saw: each signature verified on arrival (the
    library checks the timestamp's tolerance too, so it is checked when the request is made, not at the end)."""

    def __init__(self, secret: str, rng: random.Random, fail_rate: float) -> None:
        self.webhook, self.rng, self.fail_rate = Webhook(secret), rng, fail_rate
        self.bodies: dict[str, set[bytes]] = defaultdict(set)
        self.requests: Counter[str] = Counter()
        self.ok: set[str] = set()  # answered 2xx
        self.bad = self.hangs = self.failed = 0

    def decide(self, request: Request) -> Answer:
        event_id = request.headers.get("webhook-id", "")
        self.requests[event_id] += 1
        self.bodies[event_id].add(request.body)
        try:
            self.webhook.verify(request.body, request.headers)
        except WebhookVerificationError:
            self.bad += 1
            return Answer(status=400)
        roll = self.rng.random()
        if roll < 0.02:
            self.hangs += 1
            return HANG
        if roll < self.fail_rate:
            self.failed += 1
            return Answer(status=500)
        self.ok.add(event_id)
        return Answer()


async def unsubscribe(conn: asyncpg.Connection, account: int, email: str, n: int) -> None:
    """The one-click unsubscribe's effect (service/inbound/events.py): an unsubscribe suppression."""
    await inbound.apply(conn, f"unsubscribe:chaos-{n}", "unsubscribe", account, email)


async def roll_back(conn: asyncpg.Connection, account: int, n: int, row: asyncpg.Record | None) -> None:
    """Changes that would each make an event, rolled back: an unsubscribe suppression, and a bounce of a sent
    row (then an unsubscribe of that row's address) in one transaction."""
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO einmal.suppressions (account_id, email_lower, reason) VALUES ($1, $2, 'unsubscribe')",
                account,
                f"rollback{n}@example.com",
            )
            if row is not None:
                await conn.execute(
                    "INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES ($1, 'x')", f"rollback:{n}"
                )
                await conn.execute(
                    "INSERT INTO einmal.bounces (event_id, account_id, send_id, campaign_id, kind, status, reason) "
                    "VALUES ($1, $2, $3, $4, 'hard', '5.1.1', 'no_mailbox')",
                    f"rollback:{n}",
                    account,
                    row["id"],
                    row["campaign_id"],
                )
            raise _RollBack
    except _RollBack:
        pass


class _RollBack(Exception):
    pass


async def run(scenario: Scenario, log_dir: Path | None = None) -> Verdict:
    s, rng = scenario, random.Random(scenario.seed)
    print(
        f"webhook chaos: seed {s.seed}, {s.recipients} recipients, {s.nodes} nodes, receiver failing "
        f"{s.fail_rate:.0%} and killed {s.receiver_kills} times, {s.bounces} bounces, {s.unsubscribes} unsubscribes, "
        f"{s.rollbacks} rolled-back changes",
        flush=True,
    )
    server = os.environ.get("EINMAL_DATABASE_URL") or os.environ.get("DATABASE_URL") or embedded.url()
    name = f"einmal_whchaos_{os.getpid()}"
    dsn, account, list_id = await prepare(server, name, s.recipients)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="einmal-whchaos-"))
    smtp = FaultServer(seed=s.seed).start()
    smtp.inject("rcpt", "550 5.1.1 no such user", domain=REFUSED_DOMAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env.update(
        EINMAL_DATABASE_URL=dsn,
        EINMAL_SMTP_HOST="127.0.0.1",
        EINMAL_SMTP_PORT=str(smtp.port),
        EINMAL_SMTP_CONNECTIONS="4",
        EINMAL_NODE_TIMEOUT_SECONDS="2",
        EINMAL_TICK_SECONDS="0.5",
        EINMAL_BATCH_SIZE="100",
        EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK="true",
        EINMAL_WEBHOOK_RETRY_SECONDS=RETRY_SECONDS,
        EINMAL_WEBHOOK_TIMEOUT_SECONDS=str(TIMEOUT),
        EINMAL_WEBHOOK_TICK_SECONDS="0.5",
        EINMAL_LOG_LEVEL="WARNING",
        **UNSUBSCRIBE,
    )
    settings = Settings(database_url=dsn)
    conn = await asyncpg.connect(dsn)
    kills = 0
    began = time.monotonic()
    drained = False
    try:
        _endpoint_id, secret = await endpoint(conn, account, "http://127.0.0.1:1/hook", ALL)
        arrivals = Arrivals(secret, rng, s.fail_rate)
        async with Receiver(arrivals.decide) as receiver:
            await conn.execute("UPDATE einmal.webhook_endpoints SET url = $1", receiver.url())
            campaign = await conn.fetchval(
                """INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status)
                   VALUES ($1, 'chaos', 'Hello {{ name }}', 'news@example.com', 'Hi {{ name }}', ARRAY[$2::bigint],
                           'approved') RETURNING id""",
                account,
                list_id,
            )
            await conn.execute("SELECT pg_notify('einmal_campaign', $1)", str(campaign))
            nodes = Nodes([env] * s.nodes, log_dir)
            try:
                drained, kills = await drive(conn, s, rng, receiver, account, campaign, settings)
            finally:
                nodes.stop()
            seconds = time.monotonic() - began
            verdict = await judge(conn, arrivals, campaign, kills, seconds, drained)
    finally:
        await conn.close()
        smtp.stop()
    if os.environ.get("EINMAL_CHAOS_KEEP"):
        print(f"database kept: {dsn}")
    else:
        admin = await asyncpg.connect(with_database(server, "postgres"))
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    print(f"node logs in {log_dir}")
    return verdict


async def drive(
    conn: asyncpg.Connection,
    s: Scenario,
    rng: random.Random,
    receiver: Receiver,
    account: int,
    campaign: int,
    settings: Settings,
) -> tuple[bool, int]:
    """Bounces, unsubscribes, rollbacks and receiver kills spread over the sending; then wait (bounded) until
    the campaign is done and every delivery settled: (drained within the time limit, receiver kills)."""
    began = time.monotonic()
    sent_so_far = 0
    kill_at = sorted(rng.uniform(0.15, 0.85) for _ in range(s.receiver_kills))  # shares of the rows settled
    bounce_at = sorted(rng.uniform(0.1, 0.95) for _ in range(s.bounces))
    unsub_at = sorted(rng.uniform(0.0, 0.9) for _ in range(s.unsubscribes))
    rollback_at = sorted(rng.uniform(0.0, 0.95) for _ in range(s.rollbacks))
    down_until: float | None = None
    done_sending = False
    n = kills = 0
    while time.monotonic() - began < s.time_limit:
        if not done_sending:
            settled, total = await conn.fetchrow(  # type: ignore[misc]
                "SELECT count(*) FILTER (WHERE status NOT IN ('queued', 'claimed', 'sending')), count(*) "
                "FROM einmal.sends WHERE campaign_id = $1",
                campaign,
            )
            share = settled / total if total else 0.0
            sent_so_far = settled
            while kill_at and share >= kill_at[0] and down_until is None:
                kill_at.pop(0)
                receiver.kill()
                kills += 1
                down_until = time.monotonic() + OUTAGE
            while bounce_at and share >= bounce_at[0]:
                bounce_at.pop(0)
                row = await conn.fetchrow(
                    "SELECT s.* FROM einmal.sends s WHERE campaign_id = $1 AND status = 'sent' AND NOT EXISTS "
                    "(SELECT 1 FROM einmal.bounces b WHERE b.send_id = s.id) AND NOT EXISTS "
                    "(SELECT 1 FROM einmal.suppressions x WHERE x.account_id = s.account_id "
                    "AND x.email_lower = s.email_lower) "
                    "ORDER BY random() LIMIT 1",
                    campaign,
                )
                if row is not None:
                    n += 1
                    report = Report("hard", "5.1.1", row["email"], None, f"dsn:chaos-{n}", reason="no_mailbox")
                    await bounces.apply(conn, bounces.Rules.of(settings), report, row)
            while unsub_at and share >= unsub_at[0]:
                unsub_at.pop(0)
                email = await conn.fetchval(
                    "SELECT email FROM einmal.sends s WHERE campaign_id = $1 AND NOT EXISTS (SELECT 1 FROM "
                    "einmal.suppressions x WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower) "
                    "ORDER BY random() LIMIT 1",
                    campaign,
                )
                if email is not None:
                    n += 1
                    await unsubscribe(conn, account, email, n)
            while rollback_at and share >= rollback_at[0]:
                rollback_at.pop(0)
                n += 1
                row = await conn.fetchrow(
                    "SELECT * FROM einmal.sends WHERE campaign_id = $1 AND status = 'sent' LIMIT 1", campaign
                )
                await roll_back(conn, account, n, row)
            done_sending = total > 0 and settled == total and not (kill_at or bounce_at or unsub_at or rollback_at)
        if down_until is not None and time.monotonic() >= down_until:
            await receiver.start()
            down_until = None
        if done_sending and down_until is None:
            open_ = await conn.fetchval(
                "SELECT count(*) FROM einmal.webhook_deliveries WHERE state NOT IN ('delivered', 'parked')"
            )
            if open_ == 0:
                return True, kills
        await asyncio.sleep(0.05)
    print(f"time limit reached with {sent_so_far} rows settled", flush=True)
    if down_until is not None:
        await receiver.start()
    return False, kills


async def judge(
    conn: asyncpg.Connection, arrivals: Arrivals, campaign: int, kills: int, seconds: float, drained: bool
) -> Verdict:
    events = {
        r["id"]: r for r in await conn.fetch("SELECT id, type, payload::text AS payload FROM einmal.webhook_events")
    }
    states = Counter(r["state"] for r in await conn.fetch("SELECT state FROM einmal.webhook_deliveries"))
    per_type = Counter(e["type"] for e in events.values())
    received = set(arrivals.requests)
    lost = sum(1 for event_id in events if event_id not in arrivals.ok)
    invented = sum(1 for event_id in received if event_id not in events)
    changed = sum(1 for bodies in arrivals.bodies.values() if len(bodies) > 1)
    # one for one: the sends' rows, the bounces and the unsubscribes each against their events
    payloads: dict[str, Counter[str]] = defaultdict(Counter)
    for e in events.values():
        data = json.loads(e["payload"])
        payloads[e["type"]][str(data.get("subscriber_id") or data.get("email"))] += 1
    rows = await conn.fetch("SELECT subscriber_id, status FROM einmal.sends WHERE campaign_id = $1", campaign)
    expected: dict[str, Counter[str]] = {
        "message.sent": Counter(str(r["subscriber_id"]) for r in rows if r["status"] == "sent"),
        "message.failed": Counter(str(r["subscriber_id"]) for r in rows if r["status"] == "failed"),
        "message.bounced": Counter(
            str(r["subscriber_id"])
            for r in await conn.fetch(
                "SELECT s.subscriber_id FROM einmal.bounces b JOIN einmal.sends s ON s.id = b.send_id "
                "WHERE b.kind <> 'complaint'"
            )
        ),
        "subscriber.unsubscribed": Counter(
            r["email_lower"]
            for r in await conn.fetch("SELECT email_lower FROM einmal.suppressions WHERE reason = 'unsubscribe'")
        ),
    }
    mismatched = 0  # events without their change and changes without their event, over the types
    for t in set(expected) | set(payloads):
        made, wanted = payloads.get(t, Counter()), expected.get(t, Counter())
        mismatched += (made - wanted).total() + (wanted - made).total()
    rolled_back = sum(1 for e in events.values() if "rollback" in e["payload"]) + sum(
        1 for bodies in arrivals.bodies.values() for body in bodies if b"rollback" in body
    )
    return Verdict(
        events=len(events),
        requests=sum(arrivals.requests.values()),
        delivered=len(arrivals.ok & set(events)),
        repeats=sum(n - 1 for n in arrivals.requests.values()),
        lost=lost,
        invented=invented,
        bad_signatures=arrivals.bad,
        changed_repeats=changed,
        mismatched=mismatched,
        rolled_back=rolled_back,
        pending=sum(v for k, v in states.items() if k not in ("delivered", "parked")),
        parked=states["parked"],
        per_type=dict(per_type),
        kills=kills,
        hangs=arrivals.hangs,
        failed_answers=arrivals.failed,
        seconds=seconds,
        drained=drained,
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.webhook_chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--receiver-kills", type=int, default=2)
    parser.add_argument("--bounces", type=int, default=100)
    parser.add_argument("--unsubscribes", type=int, default=200)
    parser.add_argument("--rollbacks", type=int, default=10)
    parser.add_argument("--fail-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
    scenario = Scenario(
        args.recipients,
        args.nodes,
        args.receiver_kills,
        args.bounces,
        args.unsubscribes,
        args.rollbacks,
        args.fail_rate,
        time_limit=args.time_limit,
        **({"seed": args.seed} if args.seed is not None else {}),
    )
    verdict = asyncio.run(run(scenario))
    print(verdict.line())
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()
