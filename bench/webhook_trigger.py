"""`python -m bench.webhook_trigger`: what the outbound webhook trigger on einmal.sends adds to the
sending's record statement (sql/queries/send_advance.sql), one group of GROUP rows to 'sent' at a time, in
four set-ups: the trigger disabled (the floor), no active endpoint anywhere (the trigger's early return), an
active endpoint of another account only, and an endpoint of the sending account (an event, a counter and a
delivery per row). Median and 90th percentile of ROUNDS statements each, and the CPU time of the server's backend
per row (bench/cpu.py: on a busy machine the wall clock swings by more than the trigger costs), each against the
trigger disabled, on a migrated database at EINMAL_DATABASE_URL (it writes an account 'bench-webhooks' there;
`python -m bench` runs it in a fresh database and reports the CPU figure against its target)."""

import os
import statistics
import sys
import time

import anyio
import asyncpg

from bench.cpu import cpu_seconds
from service import db

GROUP, ROUNDS = 100, 100


async def record(conn: asyncpg.Connection, campaign: int, ids: list[int]) -> float:
    started = time.perf_counter()
    await conn.fetch(
        *db.sql(
            "send_advance",
            ids=ids,
            statuses=["sent"] * len(ids),
            replies=["250 ok"] * len(ids),
            attempts=[1] * len(ids),
            retry_afters=[0.0] * len(ids),
            bounces=[False] * len(ids),
            throttled=[False] * len(ids),
            campaign_ids=[campaign] * len(ids),
            token="bench",
            start_ids=[],
            start_campaign_ids=[],
            pause_seconds=1.0,
            pause_max_seconds=2.0,
        )
    )
    return time.perf_counter() - started


async def setup(conn: asyncpg.Connection) -> tuple[int, int, int]:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('bench-webhooks') RETURNING id")
    other = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('bench-webhooks-other') RETURNING id")
    await conn.execute(
        "INSERT INTO einmal.subscribers (account_id, email, email_lower) "
        "SELECT $1, 'b' || g || '@example.org', 'b' || g || '@example.org' FROM generate_series(1, $2) g",
        account,
        GROUP * ROUNDS * len(SETUPS),
    )
    campaign = await conn.fetchval(
        "INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status) "
        "VALUES ($1, 'bench', 's', 'f@example.org', 'b', '{}', 'sending') RETURNING id",
        account,
    )
    await conn.execute(
        "INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, "
        "claimed_by) SELECT $1::bigint, $2::bigint, id, email, email_lower, 'campaign:' || $1::bigint || ':' || id, "
        "'sending', 'bench' FROM einmal.subscribers WHERE account_id = $2",
        campaign,
        account,
    )
    await conn.execute("ANALYZE einmal.sends")
    return account, other, campaign


SETUPS = {  # name: (trigger enabled, the other account's endpoint active, this account's active)
    "trigger disabled": (False, False, False),
    "no active endpoint": (True, False, False),
    "another account's endpoint": (True, True, False),
    "this account's endpoint": (True, True, True),
}


async def arrange(conn: asyncpg.Connection, trigger: bool, other: bool, mine: bool, ids: tuple[int, int]) -> None:
    await conn.execute(f"ALTER TABLE einmal.sends {'ENABLE' if trigger else 'DISABLE'} TRIGGER sends_webhooks")
    await conn.execute(
        "UPDATE einmal.webhook_endpoints SET disabled_at = CASE WHEN (id = $1 AND $3) OR (id = $2 AND $4) "
        "THEN NULL ELSE now() END, disabled_reason = CASE WHEN (id = $1 AND $3) OR (id = $2 AND $4) "
        "THEN NULL ELSE 'bench' END",
        *ids,
        other,
        mine,
    )


async def measure(dsn: str, say=print) -> float | None:
    """The trigger's CPU µs per row of an account with an endpoint, over the trigger disabled (None when the
    server is not on this machine); each set-up's figures said."""
    conn = await asyncpg.connect(dsn)
    try:
        account, other, campaign = await setup(conn)
        secret = "whsec_" + "A" * 32
        add = (
            "INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret) "
            "VALUES ($1, 'https://h.example.org/', '{message.sent}', $2) RETURNING id"
        )
        endpoints = (await conn.fetchval(add, other, secret), await conn.fetchval(add, account, secret))
        rows = [r["id"] for r in await conn.fetch("SELECT id FROM einmal.sends ORDER BY id")]
        groups = iter([rows[i : i + GROUP] for i in range(0, len(rows), GROUP)])
        results: dict[str, list[float]] = {name: [] for name in SETUPS}
        cpu: dict[str, float] = dict.fromkeys(SETUPS, 0.0)
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        for _ in range(ROUNDS):  # the set-ups in turn, so that the machine's drift falls on each alike
            for name, setup_ in SETUPS.items():
                await arrange(conn, *setup_, endpoints)
                before = cpu_seconds(backend)
                results[name].append(await record(conn, campaign, next(groups)))
                after = cpu_seconds(backend)
                cpu[name] += (after or 0.0) - (before or 0.0)
        local = cpu_seconds(backend) is not None
        events = await conn.fetchval("SELECT count(*) FROM einmal.webhook_events WHERE account_id = $1", account)
        floor = statistics.median(results["trigger disabled"])
        say(f"send_advance.sql, {GROUP} rows to 'sent' per statement, {ROUNDS} statements each, in turn:")
        for name, times in results.items():
            median, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
            extra = (cpu[name] - cpu["trigger disabled"]) / (GROUP * ROUNDS) * 1e6
            say(
                f"  {name:28} median {median * 1000:6.2f} ms  p90 {p90 * 1000:6.2f} ms  "
                f"({(median - floor) / GROUP * 1e6:+6.1f} us a row; CPU "
                + (f"{extra:+6.1f} us a row)" if local else "not measured)")
            )
        say(f"  events written with this account's endpoint: {events}")
        if not local:
            return None
        return (cpu["this account's endpoint"] - cpu["trigger disabled"]) / (GROUP * ROUNDS) * 1e6
    finally:
        await conn.execute("ALTER TABLE einmal.sends ENABLE TRIGGER sends_webhooks")
        await conn.close()


async def main() -> int:
    dsn = os.environ.get("EINMAL_DATABASE_URL")
    if not dsn:
        print("bench: set EINMAL_DATABASE_URL to a migrated database", file=sys.stderr)
        return 2
    await measure(dsn)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
