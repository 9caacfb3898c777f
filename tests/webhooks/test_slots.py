"""The deliverer's places are shared: two claims at once (two nodes) together keep an endpoint within
EINMAL_WEBHOOK_ENDPOINT_IN_FLIGHT and an account within its share, and an account whose endpoints all hang
leaves places to another account's delivery."""

import time

import anyio
import pytest

from actors.sections import webhook_config
from actors.webhooks import claim
from service import db
from service.settings import Settings
from service.subscribers import suppressions
from tests.support.webhook_receiver import HANG, Receiver
from tests.support.webhooks import endpoint, running_actor

pytestmark = pytest.mark.anyio

IN_FLIGHT = "SELECT count(*) FROM einmal.webhook_deliveries WHERE lease_until > now() GROUP BY endpoint_id"


async def account(conn, name: str) -> int:
    return await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id", name)


async def unsubscribe(conn, account_id: int, prefix: str, n: int) -> None:
    await suppressions.suppress(conn, account_id, [f"{prefix}{i}@example.org" for i in range(n)], "unsubscribe")


async def test_two_claims_at_once_keep_an_endpoint_within_its_cap(dsn, conn) -> None:
    a = await account(conn, "a")
    await endpoint(conn, a, "http://127.0.0.1:9/h")
    await unsubscribe(conn, a, "a", 20)
    config = webhook_config(Settings(database_url=dsn), dsn)
    first, second = await db.connect(dsn), await db.connect(dsn)
    taken: list[int] = []

    async def other() -> None:
        taken.append(len(await claim(second, config, token="n2", limit=16)))

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                async with first.transaction():  # the first node's claim, committed only after the second's began
                    taken.append(len(await claim(first, config, token="n1", limit=16)))
                    tg.start_soon(other)
                    await anyio.sleep(0.5)
    finally:
        await first.close()
        await second.close()
    flying = [r["count"] for r in await conn.fetch(IN_FLIGHT)]
    assert max(flying) <= 4, (taken, flying)


async def test_two_claims_at_once_keep_an_account_within_its_share(dsn, conn) -> None:
    a = await account(conn, "a")
    for i in range(6):
        await endpoint(conn, a, f"http://127.0.0.1:9/h{i}")
    await unsubscribe(conn, a, "a", 20)
    config = webhook_config(Settings(database_url=dsn, webhook_in_flight=16, webhook_account_in_flight=6), dsn)
    first, second = await db.connect(dsn), await db.connect(dsn)

    async def other() -> None:
        await claim(second, config, token="n2", limit=16)

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                async with first.transaction():
                    assert len(await claim(first, config, token="n1", limit=16)) == 6
                    tg.start_soon(other)
                    await anyio.sleep(0.5)
    finally:
        await first.close()
        await second.close()
    assert await conn.fetchval("SELECT count(*) FROM einmal.webhook_deliveries WHERE lease_until > now()") == 6


@pytest.mark.serial
async def test_an_account_whose_endpoints_hang_leaves_places_to_another(dsn, conn) -> None:
    a, b = await account(conn, "a"), await account(conn, "b")
    async with Receiver(lambda _r: HANG) as hanging, Receiver() as fine:
        for i in range(18):
            await endpoint(conn, a, hanging.url(f"/a{i}"))
        await endpoint(conn, b, fine.url())
        await unsubscribe(conn, a, "a", 10)  # 180 deliveries, each of them hangs
        async with running_actor(dsn, webhook_timeout_seconds=10.0):  # 16 places, 4 per endpoint
            await hanging.wait_for(lambda: len(hanging.requests) >= 8, 10)
            await anyio.sleep(1)  # every place A may take is taken
            held = len(hanging.requests)
            started = time.monotonic()
            await unsubscribe(conn, b, "b", 1)
            await fine.wait_for(lambda: len(fine.requests) >= 1, 30)
            took = time.monotonic() - started
    # B's one delivery goes at once, not when one of A's ends after the 10 s timeout
    assert took < 5 and held <= 8, (took, held)
