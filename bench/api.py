"""Subscriber upserts through the HTTP API against a bare asyncpg loop, on the same database in the same run.

The reference: CLIENTS tasks, each on its own connection, upserting with one `INSERT … ON CONFLICT (account_id,
email) DO UPDATE`. einmal: `einmal serve` in its own process at its defaults, CLIENTS HTTP clients each
sending `PUT /api/v1/subscribers/{email}` with a name and an attribute, one request at a time; the p99 of
their latencies. Beside them, the same clients against the floor (bench/floor.py): an ASGI app of a few
lines on einmal's server parts that runs the bare loop's statement for each PUT, what the HTTP front alone
costs. Each writes the same number of distinct addresses, half of them new and half updates.

`python -m bench.api [--upserts N]` prints the two lines; `python -m bench` prints them with the rest.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import anyio
import asyncpg
import httpx
from anyio.streams.buffered import BufferedByteReceiveStream

from bench import database
from bench.floor import UPSERT
from service.addresses import email_key

CLIENTS = 50
NAME = "einmal_bench_api"


@dataclass(frozen=True)
class Upserts:
    upserts: int
    bare_seconds: float
    floor_seconds: float
    api_seconds: float
    p99_ms: float

    @property
    def ratio(self) -> float:
        return self.bare_seconds / self.api_seconds

    @property
    def floor_ratio(self) -> float:
        return self.bare_seconds / self.floor_seconds


def _addresses(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i}@example.org" for i in range(n)]


async def _bare(dsn: str, account_id: int, addresses: list[str]) -> float:
    chunks = [addresses[i::CLIENTS] for i in range(CLIENTS)]
    conns = [await asyncpg.connect(dsn) for _ in range(CLIENTS)]

    async def client(conn: asyncpg.Connection, mine: list[str]) -> None:
        for email in mine:
            await conn.execute(UPSERT, account_id, email, email_key(email), "Bench", '{"plan": "pro"}')

    try:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for conn, mine in zip(conns, chunks, strict=True):
                tg.start_soon(client, conn, mine)
        return time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()


async def _api(address: str, key: str, addresses: list[str]) -> tuple[float, list[float]]:
    """CLIENTS keep-alive connections, each sending its PUTs one after the other. A client of a few lines
    over anyio's streams: httpx's connection pool costs more CPU than the server at 50 connections."""
    host, port = address.rsplit(":", 1)
    chunks = [addresses[i::CLIENTS] for i in range(CLIENTS)]
    latencies: list[float] = []
    body = json.dumps({"name": "Bench", "attributes": {"plan": "pro"}}).encode()

    async def client(mine: list[str]) -> None:
        async with await anyio.connect_tcp(host, int(port)) as stream:
            buffered = BufferedByteReceiveStream(stream)
            for email in mine:
                began = time.perf_counter()
                await stream.send(
                    f"PUT /api/v1/subscribers/{email} HTTP/1.1\r\nHost: {address}\r\n"
                    f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                head = (await buffered.receive_until(b"\r\n\r\n", 65536)).decode("latin-1")
                length = int(
                    next(
                        line.split(":", 1)[1]
                        for line in head.split("\r\n")
                        if line.lower().startswith("content-length:")
                    )
                )
                answer = await buffered.receive_exactly(length)
                latencies.append(time.perf_counter() - began)
                if head.split(" ", 2)[1] not in ("200", "201"):
                    raise RuntimeError(f"PUT {email}: {head.splitlines()[0]} {answer[:200]!r}")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for mine in chunks:
            tg.start_soon(client, mine)
    return time.perf_counter() - started, latencies


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def seeded(dsn: str, upserts: int, accounts: dict[str, str], keyed: str) -> tuple[list[int], dict[str, str], str]:
    """Make `accounts` (name: address prefix), each with half of its `upserts` addresses already there (so the
    upserts are half inserts, half updates), and a write key of account `keyed`: the accounts' ids, the
    environment for einmal's processes on `dsn`, and the key."""
    conn = await asyncpg.connect(dsn)
    try:
        ids = []
        for name, prefix in accounts.items():
            account_id = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)
            existing = [(account_id, e) for e in _addresses(upserts // 2, prefix)]
            await conn.executemany(
                "INSERT INTO einmal.subscribers (account_id, email, email_lower) VALUES ($1, $2, $2)", existing
            )
            ids.append(account_id)
    finally:
        await conn.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["EINMAL_DATABASE_URL"] = dsn
    made = await anyio.run_process(
        [sys.executable, "-m", "service", "accounts", "key", "create", "--account", keyed], env=env
    )
    return ids, env, made.stdout.decode().strip()


async def measure(server: str, upserts: int) -> Upserts:
    dsn = await database.fresh(server, NAME)
    try:
        (bare_account, floor_account, _), env, key = await seeded(
            dsn, upserts, {"bare": "b", "floor": "f", "api": "a"}, "api"
        )
        bare_seconds = await _bare(dsn, bare_account, _addresses(upserts, "b"))
        floor_seconds, _ = await _served(
            "bench.floor", {**env, "BENCH_ACCOUNT": str(floor_account)}, key, _addresses(upserts, "f")
        )
        api_seconds, latencies = await _served("service", env, key, _addresses(upserts, "a"), "serve")
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        return Upserts(upserts, bare_seconds, floor_seconds, api_seconds, p99)
    finally:
        await database.drop(server, NAME)


async def _served(
    module: str, env: dict[str, str], key: str, addresses: list[str], *arguments: str
) -> tuple[float, list[float]]:
    """_api against `python -m module arguments…`, a server on the free port it is given in EINMAL_HTTP_ADDRESS."""
    address = f"127.0.0.1:{_free_port()}"
    async with await anyio.open_process(
        [sys.executable, "-m", module, *arguments],
        env={**env, "EINMAL_HTTP_ADDRESS": address},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as node:
        try:
            await _ready(f"http://{address}")
            return await _api(address, key, addresses)
        finally:
            node.terminate()
            with anyio.fail_after(30):
                await node.wait()


async def _ready(base: str) -> None:
    async with httpx.AsyncClient() as http:
        with anyio.fail_after(60):
            while True:
                try:
                    if (await http.get(f"{base}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    from bench import report

    parser = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upserts", type=int, default=10_000, help="addresses written each way (default 10000)")
    args = parser.parse_args(argv)
    if args.upserts < CLIENTS * 2:
        parser.exit(2, f"python -m bench.api: --upserts must be at least {CLIENTS * 2}\n")
    server, _ = database.server_url()
    report.api_upserts(anyio.run(measure, server, args.upserts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
