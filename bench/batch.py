"""Subscriber upserts in batches through the HTTP API against a bare asyncpg loop, on the same database in the
same run.

The reference is bench/api.py's: CLIENTS (50) tasks, each on its own connection, upserting one address at a
time with one `INSERT … ON CONFLICT (account_id, email) DO UPDATE` (the floor's statement, bench/floor.py).
einmal: `einmal serve` in its own process at its defaults, SENDERS HTTP clients each posting
`POST /api/v1/subscribers/batch` of ROWS rows (a name and an attribute each, as the bare loop writes), one
request at a time, every row checked and written under its key's lock as the route does. Each side writes the
same number of distinct addresses, half of them new and half updates; every row of every answer must be
`created` or `updated`.

`python -m bench.batch [--upserts N]` prints the lines; `python -m bench` prints them with the rest.
"""

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass

import anyio
import asyncpg
import httpx

from bench import api, database
from bench.report import row
from service.addresses import email_key

SENDERS = 4  # clients posting batches at once
ROWS = 1000  # rows of one batch: the route's most (service/subscribers/batch.py MAX_ROWS)
NAME = "einmal_bench_batch"


# the reference a batch is measured against: the same rows in one statement each batch, with nothing checked
STATEMENT = (
    "INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes) "
    "SELECT $1, e, k, 'Bench', '{\"plan\": \"pro\"}'::jsonb FROM unnest($2::text[], $3::text[]) AS g (e, k) "
    "ON CONFLICT (account_id, email) DO UPDATE "
    "SET name = excluded.name, attributes = einmal.subscribers.attributes || excluded.attributes"
)
TARGET = 0.8  # × the single statement


@dataclass(frozen=True)
class Batches:
    upserts: int
    bare_seconds: float
    statement_seconds: float
    batch_seconds: float
    p99_ms: float  # of one batch's request

    @property
    def ratio(self) -> float:
        return self.bare_seconds / self.batch_seconds

    @property
    def statement_ratio(self) -> float:
        return self.statement_seconds / self.batch_seconds


async def _statements(dsn: str, account_id: int, addresses: list[str]) -> float:
    """SENDERS clients, each on its own connection, upserting its share of the addresses ROWS at a time, one
    statement a batch: what the route does at its least (no checks, no locks, no answer per row)."""
    batches = [addresses[i : i + ROWS] for i in range(0, len(addresses), ROWS)]
    conns = [await asyncpg.connect(dsn) for _ in range(SENDERS)]

    async def client(conn: asyncpg.Connection, mine: list[list[str]]) -> None:
        for emails in mine:
            await conn.execute(STATEMENT, account_id, emails, [email_key(e) for e in emails])

    try:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i, conn in enumerate(conns):
                tg.start_soon(client, conn, batches[i::SENDERS])
        return time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()


async def _batches(base: str, key: str, addresses: list[str]) -> tuple[float, list[float]]:
    """SENDERS clients, each on one keep-alive connection, posting its share of the addresses ROWS at a time.
    The bodies are made before the clock starts and the answers read after it stops: the clients share the
    machine with einmal and PostgreSQL, and their JSON is no part of what einmal costs."""
    batches = [addresses[i : i + ROWS] for i in range(0, len(addresses), ROWS)]
    bodies = [
        (json.dumps({"subscribers": [{"email": e, "name": "Bench", "attributes": {"plan": "pro"}} for e in b]}), len(b))
        for b in batches
    ]
    shares = [bodies[i::SENDERS] for i in range(SENDERS)]
    latencies: list[float] = []
    answers: list[tuple[httpx.Response, int]] = []  # each with the rows it posted
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def sender(mine: list[tuple[str, int]]) -> None:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
            for body, rows in mine:
                began = time.perf_counter()
                answers.append((await http.post("/api/v1/subscribers/batch", content=body), rows))
                latencies.append(time.perf_counter() - began)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for mine in shares:
            tg.start_soon(sender, mine)
    took = time.perf_counter() - started
    for answer, rows in answers:
        if answer.status_code != 200:
            raise RuntimeError(f"POST /subscribers/batch: {answer.status_code} {answer.text[:200]}")
        told = answer.json()
        if told["created"] + told["updated"] != rows:
            raise RuntimeError(f"POST /subscribers/batch: {told['invalid']} rows invalid")
    return took, latencies


async def measure(server: str, upserts: int) -> Batches:
    dsn = await database.fresh(server, NAME)
    try:
        (bare_account, _, one), env, key = await api.seeded(
            dsn, upserts, {"bare": "b", "batch": "a", "statement": "c"}, "batch"
        )
        bare_seconds = await api._bare(dsn, bare_account, api._addresses(upserts, "b"))
        statement_seconds = await _statements(dsn, one, api._addresses(upserts, "c"))
        address = f"127.0.0.1:{api._free_port()}"
        async with await anyio.open_process(
            [sys.executable, "-m", "service", "serve"],
            env={**env, "EINMAL_HTTP_ADDRESS": address},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as node:
            try:
                await api._ready(f"http://{address}")
                batch_seconds, latencies = await _batches(f"http://{address}", key, api._addresses(upserts, "a"))
            finally:
                node.terminate()
                with anyio.fail_after(30):
                    await node.wait()
        latencies.sort()
        p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000
        return Batches(upserts, bare_seconds, statement_seconds, batch_seconds, p99)
    finally:
        await database.drop(server, NAME)


def report(result: Batches, say=print) -> None:
    """The batches against the bare loop of the same run."""
    say(
        row(
            f"upserts, bare asyncpg, {result.upserts:,} at {api.CLIENTS} conns",
            f"{result.upserts / result.bare_seconds:,.0f}/s ({result.bare_seconds:.2f} s)",
            "(the reference)",
            None,
        )
    )
    say(
        row(
            f"upserts, one statement a batch of {ROWS:,}, {SENDERS} conns",
            f"{result.upserts / result.statement_seconds:,.0f}/s ({result.statement_seconds:.2f} s)",
            "(the reference)",
            None,
        )
    )
    say(
        row(
            f"upserts, POST /subscribers/batch, {SENDERS} clients",
            f"{result.upserts / result.batch_seconds:,.0f}/s = {result.ratio:.3f} × bare, "
            f"{result.statement_ratio:.3f} × one statement",
            f">= {TARGET} × one statement",
            result.statement_ratio >= TARGET,
        )
    )
    say(row(f"a batch of {ROWS:,} rows: p99 latency", f"{result.p99_ms:.0f} ms", "", None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upserts", type=int, default=20_000, help="addresses written each way (default 20000)")
    args = parser.parse_args(argv)
    if args.upserts < ROWS * SENDERS:
        parser.exit(2, f"python -m bench.batch: --upserts must be at least {ROWS * SENDERS}\n")
    server, _ = database.server_url()
    report(anyio.run(measure, server, args.upserts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
