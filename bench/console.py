"""The console's pages under load: their p95 with --subscribers (1,000,000) in the account and a campaign of
--recipients (100,000) sending, against the target of 200 ms.

The account is seeded once (bench/sql/seed_console.sql): its subscribers on a list, the sending campaign's send
rows queued, 3 campaigns of --recipients sent in the last 30 days with their bounces and complaints, a webhook
endpoint with 1,000 deliveries, 1,000 transactional messages, a sequence of 3 steps on a list of 10,000 (made
with the service's function). While the pages are measured the campaign sends: a writer marks its queued rows
sent, RATE a second in batches, as the send pipeline's group commits do (no relay: the figure is the console's,
with the row churn a send makes). `einmal serve` at its defaults answers; CLIENTS browsers, each with its own
session, walk every page in turn --rounds times; each request's latency is from its first byte sent to its
last byte read. Prints each page's p50 and p95, and the p95 of all of them against the target.

`python -m bench.console [--quick] [--subscribers N] [--recipients N] [--rounds N]`; `make bench` runs it
(--quick: 20,000 subscribers, 5,000 recipients)."""

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from statistics import quantiles

import anyio
import asyncpg
import httpx

from bench import database
from bench.api import _free_port, _ready
from bench.report import row
from service.mail.mailing import Mailing
from service.sequences import sequences, steps
from service.settings import Settings
from service.users import users

NAME = "einmal_bench_console"
CLIENTS, RATE, BATCH = 4, 2_000, 100  # browsers at once; the campaign's rows sent a second, in batches of
TARGET_MS = 200.0
PASSWORD = "bench console password"
TOKEN = re.compile(r'name="form_token" value="([^"]+)"')
# a sequence step's messages to the first $3 members of list $2, sent
SENT = """INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, sent_at)
SELECT $1::bigint, s.account_id, s.id, s.email, s.email_lower, 'campaign:' || $1::bigint || ':' || s.id, 'sent', now()
FROM einmal.list_members m JOIN einmal.subscribers s ON s.id = m.subscriber_id WHERE m.list_id = $2
ORDER BY s.id LIMIT $3"""


@dataclass
class Figures:
    subscribers: int
    recipients: int
    latencies: dict[str, list[float]] = field(default_factory=dict)  # page: seconds
    refused: int = 0  # answers other than 200
    sent: int = 0  # the campaign's rows the writer marked sent while the pages were measured

    @property
    def p95_ms(self) -> float:
        return p95([s for page in self.latencies.values() for s in page]) * 1000


def p95(values: list[float]) -> float:
    return quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else (values or [0.0])[0]


async def seed(dsn: str, subscribers: int, recipients: int) -> dict[str, int]:
    """The account, its campaign sending and the operations pages' objects: the paths' ids."""
    script = database.sql("seed_console")
    for name, value in (("subscribers", subscribers), ("recipients", recipients), ("history", recipients)):
        script = script.replace(f":{name}", str(int(value)))
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(script)
        account_id = await conn.fetchval("SELECT id FROM einmal.accounts WHERE name = 'bench'")
        found = await sequences.create(conn, account_id=account_id, name="Welcome", list_name="welcome", existing=True)
        list_id = await conn.fetchval(
            "SELECT id FROM einmal.lists WHERE account_id = $1 AND name = 'welcome'", account_id
        )
        mailing = Mailing.of(Settings(unsubscribe_url="https://example.org/u", unsubscribe_secret="s" * 32))
        for position, reached in ((1, 8_000), (2, 4_000), (3, 1_000)):
            step = await steps.add(
                conn,
                mailing=mailing,
                account_id=account_id,
                sequence_id=found.id,
                subject=f"Step {position}",
                from_address="news@example.com",
                text="b",
                delay_seconds=86400 * (position - 1),
            )
            await conn.execute(SENT, step.campaign_id, list_id, reached)
        await users.add(conn, name="bench@example.org", account="bench", password=PASSWORD, actor="bench")
        await conn.execute("ANALYZE")
        return {
            "campaign": await conn.fetchval("SELECT id FROM einmal.campaigns WHERE name = 'Spring sale'"),
            "endpoint": await conn.fetchval("SELECT id FROM einmal.webhook_endpoints"),
            "message": await conn.fetchval("SELECT max(campaign_id) FROM einmal.messages"),
            "sequence": found.id,
        }
    finally:
        await conn.close()


def pages(ids: dict[str, int]) -> dict[str, str]:
    c = ids["campaign"]
    return {
        "dashboard": "/console/",
        "campaigns": "/console/campaigns",
        "campaign": f"/console/campaigns/{c}",
        "progress": f"/console/campaigns/{c}/progress",
        "audit": "/console/audit",
        "deliverability": "/console/deliverability",
        "webhooks": "/console/webhooks",
        "webhook": f"/console/webhooks/{ids['endpoint']}",
        "messages": "/console/messages",
        "message": f"/console/messages/{ids['message']}",
        "sequences": "/console/sequences",
        "sequence": f"/console/sequences/{ids['sequence']}",
    }


async def writer(dsn: str, campaign: int, figures: Figures, stop: anyio.Event) -> None:
    """The campaign sending: RATE of its queued rows a second marked sent, a batch at a time."""
    conn = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            began = time.monotonic()
            done = await conn.execute(
                "UPDATE einmal.sends SET status = 'sent', sent_at = now(), attempts = 1, updated_at = now() "
                "WHERE campaign_id = $1 AND id IN (SELECT id FROM einmal.sends WHERE campaign_id = $1 "
                "AND status = 'queued' ORDER BY next_attempt_at, id LIMIT $2)",
                campaign,
                BATCH,
            )
            figures.sent += int(done.split()[-1])
            await anyio.sleep(max(0.0, BATCH / RATE - (time.monotonic() - began)))
    finally:
        await conn.close()


async def browse(base: str, paths: dict[str, str], rounds: int, figures: Figures) -> None:
    """One browser: signed in, then every page in turn `rounds` times."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        form = await client.get("/console/login")
        token = TOKEN.search(form.text)
        assert token is not None, form.text[:200]
        data = {"form_token": token.group(1), "name": "bench@example.org", "password": PASSWORD}
        signed = await client.post("/console/login", data=data, headers={"Origin": base})
        if signed.status_code != 303:
            raise RuntimeError(f"bench: the console's sign-in answered {signed.status_code}")
        for _ in range(rounds):
            for page, path in paths.items():
                began = time.perf_counter()
                answer = await client.get(path, headers={"HX-Request": "true"} if page == "progress" else None)
                figures.latencies.setdefault(page, []).append(time.perf_counter() - began)
                figures.refused += answer.status_code != 200


async def measure(server: str, subscribers: int, recipients: int, rounds: int) -> Figures:
    dsn = await database.fresh(server, NAME)
    try:
        ids = await seed(dsn, subscribers, recipients)
        figures = Figures(subscribers, recipients)
        address = f"127.0.0.1:{_free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
        env.update(EINMAL_DATABASE_URL=dsn, EINMAL_HTTP_ADDRESS=address, EINMAL_LOG_LEVEL="WARNING")
        async with await anyio.open_process(
            [sys.executable, "-m", "service", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ) as node:
            try:
                await _ready(f"http://{address}")
                stop = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer, dsn, ids["campaign"], figures, stop)
                    async with anyio.create_task_group() as browsers:
                        for _ in range(CLIENTS):
                            browsers.start_soon(browse, f"http://{address}", pages(ids), rounds, figures)
                    stop.set()
            finally:
                node.terminate()
                with anyio.fail_after(30):
                    await node.wait()
        return figures
    finally:
        await database.drop(server, NAME)


def report(figures: Figures, say=print) -> None:
    for page, seconds in figures.latencies.items():
        ms = sorted(s * 1000 for s in seconds)
        say(row(f"  console {page}", f"p50 {ms[len(ms) // 2]:.0f} ms, p95 {p95(seconds) * 1000:.0f} ms", "", None))
    say(
        row(
            f"console pages p95, {figures.subscribers:,} subscribers, {figures.recipients:,} sending",
            f"{figures.p95_ms:.0f} ms ({figures.sent:,} sent meanwhile, {figures.refused} not 200)",
            f"<= {TARGET_MS:.0f} ms",
            figures.p95_ms <= TARGET_MS and figures.refused == 0,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console", description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=1_000_000, help="the account's (default 1000000)")
    parser.add_argument("--recipients", type=int, default=100_000, help="the campaign sending (default 100000)")
    parser.add_argument("--rounds", type=int, default=20, help="times each client walks every page (default 20)")
    parser.add_argument("--quick", action="store_true", help="20000 subscribers, 5000 recipients, 5 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.subscribers, args.recipients, args.rounds = 20_000, 5_000, 5
    if not 10_000 <= args.subscribers <= 10_000_000 or not 1_000 <= args.recipients <= args.subscribers:
        parser.exit(2, "python -m bench.console: --subscribers from 10000, --recipients from 1000 to --subscribers\n")
    if not 1 <= args.rounds <= 1000:
        parser.exit(2, "python -m bench.console: --rounds from 1 to 1000\n")
    server, _ = database.server_url()
    try:
        figures = anyio.run(measure, server, args.subscribers, args.recipients, args.rounds)
    except (RuntimeError, OSError, TimeoutError, asyncpg.PostgresError) as exc:
        print(f"python -m bench.console: could not run: {exc}", file=sys.stderr)
        return 1
    report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
