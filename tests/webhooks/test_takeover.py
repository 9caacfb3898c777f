"""A node killed (SIGKILL) in the middle of a delivery: its lease ends, and another node delivers the event
again, with the same id. Nothing given back, nothing lost."""

import json
import time

import pytest

from service.subscribers import suppressions
from tests.support.pipeline import node_env, start_node, stop_node
from tests.support.webhook_receiver import HANG, Answer, Receiver, Request
from tests.support.webhooks import endpoint, running_actor, wait_until

pytestmark = pytest.mark.anyio


async def test_a_killed_nodes_delivery_is_made_by_another(dsn, conn, tmp_path) -> None:
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    seen: list[Request] = []

    def decide(request: Request) -> Answer:  # the first request hangs (its node dies with it), then 200
        seen.append(request)
        return HANG if len(seen) == 1 else Answer()

    async with Receiver(decide) as receiver:
        await endpoint(conn, account, receiver.url())
        await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
        env = node_env(
            dsn,
            2525,  # no campaign: no message goes to it
            EINMAL_WEBHOOK_ALLOW_HTTP_LOOPBACK="true",
            EINMAL_WEBHOOK_TIMEOUT_SECONDS="2",
        )
        proc = start_node(env, tmp_path / "node.log")
        try:
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 30)
            lease = await conn.fetchrow("SELECT claimed_by, lease_until - now() AS left FROM einmal.webhook_deliveries")
            assert lease["claimed_by"] is not None and lease["left"].total_seconds() > 1
            proc.kill()  # SIGKILL: the lease is not given back
            proc.wait()
        finally:
            if proc.poll() is None:
                await stop_node(proc)
        killed_at = time.monotonic()
        async with running_actor(dsn):
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries", timeout=30)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] and first.body == second.body
    assert second.at > killed_at  # by the other node, once the lease (2 × 2 s + 5 s) had ended


async def test_the_actor_comes_back_when_its_connections_are_cut(dsn, conn) -> None:
    """The node's supervisor starts the actor again; the table, not the lost notification, says what is due."""
    from tests.support.pipeline import node_settings, running_node

    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    async with Receiver() as receiver:
        await endpoint(conn, account, receiver.url())
        settings = node_settings(dsn, 2525, webhook_allow_http_loopback=True, webhook_tick_seconds=0.5)
        async with running_node(settings):
            await suppressions.suppress(conn, account, ["ann@example.org"], "unsubscribe")
            await receiver.wait_for(lambda: len(receiver.requests) == 1, 20)
            # cut once ann's delivery is recorded: cut before, it is rightly posted again (at least once, the same
            # webhook-id), which is not what this test is about
            await wait_until(conn, "SELECT bool_and(state = 'delivered') FROM einmal.webhook_deliveries", timeout=20)
            cut = await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name LIKE 'einmal webhooks%' AND datname = current_database()"
            )
            assert cut >= 1
            await suppressions.suppress(conn, account, ["bob@example.org"], "unsubscribe")
            await receiver.wait_for(lambda: len(receiver.requests) == 2, 30)
    assert [json.loads(r.body)["data"]["email"] for r in receiver.requests] == ["ann@example.org", "bob@example.org"]
